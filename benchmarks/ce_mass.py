"""Mass gate for ``parallel_cross_entropy``: precision, speed and memory over seeded random cases.

The cases (:func:`cases`, 1500 from seed 0 by default): fp32, bf16 and fp16; layouts
``(B, SQ, V)``, ``(SQ, B, V)`` and ``(B, SQ, V)`` as a transposed view of ``(SQ, B, V)``
storage; vocabularies of real tokenizers and random ones from 500 to 262144; token counts
log-uniform up to 32768 (cut so that tokens x V <= ``--max-logits``); label smoothing 0 or 0.1;
``reduce_loss`` on or off; 0-50 % ignored labels; one case in five through a one-rank
``dist_process_group``.

Stages (``--stages``, default all):

* ``precision`` (in ``--workers`` processes, which also fill Triton's cache for ``perf``): loss
  and gradient (a random ``grad_output`` when not reducing) against a float64 reference, by
  :func:`judge`: our RMS error against float64 at most ``MULTIPLIER`` times that of PyTorch's
  own fp32 computation (its gradient rounded once to the input dtype, as any gradient in that
  dtype is), plus ``FLOOR`` times the reference's RMS; a NaN or inf fails. Also the peak memory
  of one forward+backward, ours against PyTorch's ``F.cross_entropy`` in the input dtype.
* ``perf``: eager wall time of forward+backward (``torch.autograd.grad``), ours and PyTorch's
  in paired, alternating blocks of calls; each case's ratio is the median of the per-round
  ratios (:func:`paired`). Cases above ``--recheck`` get more rounds at once, and cases still
  above 1.0 more again after all cases were timed (the ratio is then the median over all
  rounds; the counts before that are printed too). The ten slowest get device time (CUDA graph
  replay) and host time per call (calls queued without a sync) for each side.
* ``leak``: 10,000 forward+backward calls per configuration; allocated memory read every 1000.

Writes ``cases.csv``, ``summary.json`` and ``summary.txt`` into ``--out``; the summary is
printed last.

    python benchmarks/ce_mass.py --out DIR [--cases 1500] [--workers 8] [--stages precision,perf,leak]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from npu_fixes.ops import parallel_cross_entropy

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
LAYOUTS = ("bsv", "sbv", "bsv_view")  # the last: (B, SQ, V) transposed from (SQ, B, V) storage
# Vocabulary sizes of real tokenizers (BERT, T5, LLaMA 1/2, Phi-3, CodeLlama, Mistral v3, GPT-2,
# OPT, StarCoder, OLMo, GPT-NeoX, GPT-J, Yi, Falcon, InternLM2, DeepSeek-V2, Baichuan 2, LLaMA 3,
# DeepSeek-V3, Qwen 2/3, XLM-R, mT5, BLOOM, Gemma, Gemma 3).
TOKENIZER_VOCABS = (
    30522,
    32128,
    32000,
    32064,
    32016,
    32768,
    50257,
    50272,
    49152,
    50304,
    50432,
    50400,
    64000,
    65024,
    92544,
    102400,
    125696,
    128256,
    129280,
    151936,
    250002,
    250112,
    250880,
    256000,
    262144,
)
MIN_VOCAB, MAX_VOCAB, MAX_TOKENS = 500, 262144, 32768
IGNORE = -100
MULTIPLIER = {torch.float32: 2.0, torch.bfloat16: 3.0, torch.float16: 3.0}  # by the result's dtype
FLOOR = 1e-6


@dataclass(frozen=True)
class Case:
    index: int
    dtype: str
    layout: str
    b: int
    sq: int
    vocab: int
    eps: float
    reduce: bool
    ignore_frac: float
    group: bool
    scale: float  # logits are standard normal times this
    seed: int

    @property
    def logits(self) -> int:
        return self.b * self.sq * self.vocab


def cases(n: int = 1500, seed: int = 0, max_logits: int = 2**27) -> list[Case]:
    """``n`` cases drawn from ``seed``: the same list for the same arguments."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            vocab = rng.choice(TOKENIZER_VOCABS)
        else:
            vocab = round(math.exp(rng.uniform(math.log(MIN_VOCAB), math.log(MAX_VOCAB))))
        tokens = round(math.exp(rng.uniform(0.0, math.log(MAX_TOKENS))))
        tokens = max(1, min(tokens, max_logits // vocab))
        b = rng.choice([d for d in (1, 2, 3, 4, 8, 16) if d <= tokens])
        out.append(
            Case(
                index=i,
                dtype=rng.choice(list(DTYPES)),
                layout=rng.choice(LAYOUTS),
                b=b,
                sq=tokens // b,
                vocab=vocab,
                eps=rng.choice((0.0, 0.1)),
                reduce=rng.random() < 0.5,
                ignore_frac=rng.uniform(0.0, 0.5),
                group=rng.random() < 0.2,
                scale=rng.choice((1.0, 2.0, 4.0)),
                seed=rng.getrandbits(31),
            )
        )
    return out


def make(case: Case, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits (requiring grad), targets and a ``grad_output`` for the loss (fp32: 1 when
    reducing, else random), in the case's layout, from the case's seed."""
    gen = torch.Generator(device=device).manual_seed(case.seed)
    b, sq, v = case.b, case.sq, case.vocab
    outer = (sq, b) if case.layout != "bsv" else (b, sq)
    x = torch.randn((*outer, v), generator=gen, device=device) * case.scale
    t = torch.randint(0, v, outer, generator=gen, device=device)
    t[torch.rand(outer, generator=gen, device=device) < case.ignore_frac] = IGNORE
    x = x.to(DTYPES[case.dtype])
    if case.layout == "bsv_view":
        x, t = x.transpose(0, 1), t.transpose(0, 1)
    go = (
        torch.ones((), device=device)
        if case.reduce
        else torch.randn(x.shape[:2], generator=gen, device=device)
    )
    return x.requires_grad_(), t, go


def one_rank_group() -> Any:
    """A one-rank process group (gloo; the default group is made if there is none)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.new_group([0])


def ours(case: Case, group: Any) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Our loss function for the case (``group`` used where the case has one)."""
    pg = group if case.group else None
    return lambda x, t: parallel_cross_entropy(x, t, case.eps, case.reduce, pg, IGNORE)


def torch_loss(case: Case, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """PyTorch's cross entropy of ``x`` in its own dtype, with our shape and mean semantics
    (the mean over non-ignored tokens, 0 when all are ignored)."""
    v = x.shape[-1]
    rows = F.cross_entropy(
        x.reshape(-1, v), t.reshape(-1), reduction="none", ignore_index=IGNORE, label_smoothing=case.eps
    )
    if not case.reduce:
        return rows.view(x.shape[:2])
    return rows.sum() / (t != IGNORE).sum().clamp(min=1)


def torch_step(case: Case, x: torch.Tensor, t: torch.Tensor) -> Callable[[], object]:
    """PyTorch's forward+backward the way a user writes it (``reduction='mean'`` when reducing)."""
    v = x.shape[-1]
    reduction = "mean" if case.reduce else "none"
    go = None if case.reduce else torch.ones(x.shape[0] * x.shape[1], dtype=x.dtype, device=x.device)

    def step() -> object:
        loss = F.cross_entropy(
            x.reshape(-1, v),
            t.reshape(-1),
            reduction=reduction,
            ignore_index=IGNORE,
            label_smoothing=case.eps,
        )
        return torch.autograd.grad(loss, x, go)

    return step


def ours_step(case: Case, x: torch.Tensor, t: torch.Tensor, group: Any) -> Callable[[], object]:
    fn = ours(case, group)
    go = None if case.reduce else torch.ones(x.shape[:2], device=x.device)
    return lambda: torch.autograd.grad(fn(x, t), x, go)


def loss_and_grad(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    t: torch.Tensor,
    go: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    loss = fn(x, t)
    (grad,) = torch.autograd.grad(loss, x, go.to(loss.dtype))
    return loss.detach(), grad


def rms_error(a: torch.Tensor, ref: torch.Tensor) -> float:
    return (a.double() - ref).pow(2).mean().sqrt().item() if ref.numel() else 0.0


def judge(result: torch.Tensor, pytorch_fp32: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """The precision rule: ``result`` passes when it is finite and its RMS error against the
    float64 ``ref`` is at most ``MULTIPLIER[result.dtype]`` times that of ``pytorch_fp32``
    (PyTorch in fp32, rounded to ``result.dtype``) plus ``FLOOR`` times ``ref``'s RMS."""
    ours_err = rms_error(result, ref)
    base_err = rms_error(pytorch_fp32.to(result.dtype), ref)
    bound = MULTIPLIER[result.dtype] * base_err + FLOOR * (
        ref.pow(2).mean().sqrt().item() if ref.numel() else 0.0
    )
    finite = bool(torch.isfinite(result).all())
    return {"err": ours_err, "torch_err": base_err, "bound": bound, "pass": finite and ours_err <= bound}


def peak_bytes(step: Callable[[], object], device: torch.device) -> tuple[int, object]:
    """Peak allocated bytes of one forward+backward above what was allocated before it (the
    gradient kept), and the step's result."""
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base, out


def check_precision(case: Case, device: str | torch.device, group: Any) -> dict[str, Any]:
    """One case's precision (and, on CUDA, peak memory) record."""
    device = torch.device(device)
    x, t, go = make(case, device)
    rec: dict[str, Any] = {}
    fn = ours(case, group)
    if device.type == "cuda":  # each measured at its second call (the first one keeps a plan)
        loss_and_grad(fn, x, t, go)
        rec["mem_ours"], (loss, grad) = peak_bytes(lambda: loss_and_grad(fn, x, t, go), device)
        step = torch_step(case, x, t)
        step()
        rec["mem_torch"], _ = peak_bytes(step, device)
        rec["mem_ratio"] = rec["mem_ours"] / max(rec["mem_torch"], 1)
    else:
        loss, grad = loss_and_grad(fn, x, t, go)
    xs = {dt: x.detach().to(dt).requires_grad_() for dt in (torch.float32, torch.float64)}
    pt_loss, pt_grad = loss_and_grad(lambda a, b: torch_loss(case, a, b), xs[torch.float32], t, go)
    ref_loss, ref_grad = loss_and_grad(lambda a, b: torch_loss(case, a, b), xs[torch.float64], t, go.double())
    for name, res, pt, ref in (("loss", loss, pt_loss, ref_loss), ("grad", grad, pt_grad, ref_grad)):
        for key, value in judge(res, pt, ref).items():
            rec[f"{name}_{key}"] = value
    rec["precision_pass"] = rec["loss_pass"] and rec["grad_pass"]
    return rec


def block_ms(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e3


def paired(
    a: Callable[[], object],
    b: Callable[[], object],
    rounds: int,
    sync: Callable[[], None],
    block_s: float = 0.003,
) -> tuple[list[float], list[float]]:
    """Milliseconds per call of ``a`` and ``b``, one sample per round: blocks of calls, each
    timed on the host and synchronized at its end (at least ``block_s`` seconds and 2 calls),
    alternating ``a, b`` and ``b, a`` round by round."""
    calls = []
    for fn in (a, b):
        fn()
        calls.append(max(2, min(500, math.ceil(block_s / (block_ms(fn, 2, sync) * 1e-3)))))
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        order = ((a, calls[0], ta), (b, calls[1], tb))
        for fn, n, times in order if r % 2 == 0 else order[::-1]:
            times.append(block_ms(fn, n, sync))
    return ta, tb


def host_us(fn: Callable[[], object], calls: int = 20) -> float:
    """Host microseconds per call, the calls queued after a sync and not waited for."""
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def run_precision_worker(all_cases: list[Case], worker: int, workers: int, path: Path) -> None:
    """Precision and memory of every ``workers``-th case from ``worker``, one JSON line each."""
    group = one_rank_group()
    with open(path, "w") as f:
        for case in all_cases[worker::workers]:
            try:
                rec = check_precision(case, "cuda", group)
            except Exception as exc:  # noqa: BLE001 - a case that raises fails, the others go on
                rec = {"precision_pass": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            f.write(json.dumps({"index": case.index, **rec}) + "\n")
            f.flush()
            if case.logits >= 2**25:
                torch.cuda.empty_cache()


def precision_stage(args: argparse.Namespace, records: dict[int, dict[str, Any]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ce_mass_"))
    procs = []
    for w in range(args.workers):
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            str(w),
            "--workers",
            str(args.workers),
            "--cases",
            str(args.cases),
            "--seed",
            str(args.seed),
            "--max-logits",
            str(args.max_logits),
            "--out",
            str(tmp),
        ]
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")  # less fragmentation
        procs.append(subprocess.Popen(cmd, env=env))
    for p in procs:
        p.wait()
    for w in range(args.workers):
        path = tmp / f"precision_{w}.jsonl"
        for line in path.read_text().splitlines() if path.exists() else ():
            rec = json.loads(line)
            records[rec.pop("index")].update(rec)


def time_case(case: Case, rounds: int, group: Any, samples: tuple[list[float], list[float]]) -> float:
    """Adds ``rounds`` paired rounds of ``case`` to ``samples`` (ours, PyTorch's); the median
    of the per-round ratios over all of them."""
    x, t, _ = make(case, "cuda")
    ta, tb = paired(ours_step(case, x, t, group), torch_step(case, x, t), rounds, torch.cuda.synchronize)
    samples[0].extend(ta)
    samples[1].extend(tb)
    return statistics.median(p / q for p, q in zip(*samples, strict=True))


def perf_stage(
    all_cases: list[Case],
    args: argparse.Namespace,
    records: dict[int, dict[str, Any]],
    checkpoint: Callable[[], object] = lambda: None,
) -> None:
    """Paired eager timings of every case (``checkpoint`` called every 250 cases; more rounds
    at once for a case above ``args.recheck``); then once more, after all cases, for each case
    above 1.0 (noise that lasts longer than a case's rounds is then not met again); then where
    the time of the ten slowest goes."""
    group = one_rank_group()
    start = time.time()
    samples: dict[int, tuple[list[float], list[float]]] = {}
    for i, case in enumerate(all_cases):
        if i % 250 == 0:
            print(f"perf: case {i} at {time.time() - start:.0f} s", flush=True)
            checkpoint()
        rec = records[case.index]
        try:
            got = samples[case.index] = ([], [])
            rec["ratio_first"] = time_case(case, args.rounds, group, got)
            if rec["ratio_first"] > args.recheck:
                rec["ratio_first"] = time_case(case, 3 * args.rounds, group, got)
            rec["ratio"] = rec["ratio_first"]  # for the checkpoints; final below
        except Exception as exc:  # noqa: BLE001 - reported, the other cases go on
            rec["perf_error"] = f"{type(exc).__name__}: {exc}"[:300]
            del samples[case.index]
        if case.logits >= 2**25:
            torch.cuda.empty_cache()
    print(f"perf: {len(all_cases)} cases in {time.time() - start:.0f} s", flush=True)
    for case in all_cases:
        rec = records[case.index]
        if rec.get("ratio_first", 0.0) > 1.0:
            rec["ratio"] = time_case(case, 3 * args.rounds, group, samples[case.index])
    print(f"perf: cases above 1.0 timed again by {time.time() - start:.0f} s", flush=True)
    for index, (ta, tb) in samples.items():
        rec = records[index]
        rec["ours_ms"], rec["torch_ms"] = statistics.median(ta), statistics.median(tb)
        rec["ratio"] = statistics.median(p / q for p, q in zip(ta, tb, strict=True))
        rec["rounds"] = len(ta)
    from ce_benchmark import graph_ms  # beside this script: the device time of a call, graph-captured

    worst = sorted(all_cases, key=lambda c: -records[c.index].get("ratio", 0.0))[:10]
    for case in worst:  # where the time of the slowest goes
        x, t, _ = make(case, "cuda")
        a, b = ours_step(case, x, t, group), torch_step(case, x, t)
        rec = records[case.index]
        rec["ours_host_us"], rec["torch_host_us"] = host_us(a), host_us(b)
        try:
            rec["ours_dev_ms"], rec["torch_dev_ms"] = graph_ms(a, 20, inner=3), graph_ms(b, 20, inner=3)
        except Exception as exc:  # noqa: BLE001 - a capture that fails is reported
            rec["perf_error"] = f"graph: {type(exc).__name__}: {exc}"[:300]


def leak_stage() -> list[dict[str, Any]]:
    """10,000 forward+backward calls per configuration; allocated bytes every 1000 calls."""
    group = one_rank_group()
    configs = [
        Case(0, "bf16", "bsv", 4, 256, 8192, 0.0, True, 0.1, False, 1.0, 1),
        Case(1, "fp32", "bsv_view", 2, 512, 32000, 0.1, False, 0.3, True, 1.0, 2),
        Case(2, "fp16", "sbv", 1, 64, 151936, 0.0, False, 0.0, False, 1.0, 3),
    ]
    out = []
    for case in configs:
        x, t, _ = make(case, "cuda")
        step = ours_step(case, x, t, group)
        step()
        torch.cuda.synchronize()
        readings = []
        for _ in range(10):
            for _ in range(1000):
                step()
            torch.cuda.synchronize()
            readings.append(torch.cuda.memory_allocated())
        out.append({"case": asdict(case), "allocated_every_1000": readings, "flat": len(set(readings)) == 1})
    return out


def band(logits: int) -> str:
    for lo, hi in ((0, 20), (20, 24), (24, 26)):
        if logits < 2**hi:
            return f"2^{lo}-2^{hi}" if lo else f"<2^{hi}"
    return ">=2^26"


def summarize(
    all_cases: list[Case], records: dict[int, dict[str, Any]], leaks: list[dict[str, Any]] | None
) -> dict:
    rows = [{**asdict(c), "logits": c.logits, **records[c.index]} for c in all_cases]
    s: dict[str, Any] = {"cases": len(rows)}
    judged = [r for r in rows if "precision_pass" in r]
    if judged:
        s["precision_pass"] = sum(r["precision_pass"] for r in judged)
        s["precision_judged"] = len(judged)
        s["precision_failures"] = [r for r in judged if not r["precision_pass"]][:20]
        s["worst_error_over_bound"] = {
            part: max(
                (r[f"{part}_err"] / r[f"{part}_bound"] for r in judged if r.get(f"{part}_bound")), default=0.0
            )
            for part in ("loss", "grad")
        }
    mem = [r["mem_ratio"] for r in rows if "mem_ratio" in r]
    if mem:
        s["memory"] = {
            "mean": statistics.mean(mem),
            "max": max(mem),
            "above_1.05": sum(m > 1.05 for m in mem),
            "worst": sorted((r for r in rows if "mem_ratio" in r), key=lambda r: -r["mem_ratio"])[:5],
        }
    timed = [r for r in rows if "ratio" in r]
    s["perf_errors"] = [r for r in rows if "perf_error" in r]
    if timed:
        ratios = [r["ratio"] for r in timed]
        s["perf"] = {
            "mean": statistics.mean(ratios),
            "median": statistics.median(ratios),
            "max": max(ratios),
            "above_1.0": sum(v > 1.0 for v in ratios),
            "above_1.05": sum(v > 1.05 for v in ratios),
            "first_above_1.0": sum(r.get("ratio_first", 0.0) > 1.0 for r in timed),
            "first_above_1.05": sum(r.get("ratio_first", 0.0) > 1.05 for r in timed),
            "worst": sorted(timed, key=lambda r: -r["ratio"])[:10],
            "bands": {},
        }
        for name in sorted(
            {band(r["logits"]) for r in timed},
            key=lambda n: min(r["logits"] for r in timed if band(r["logits"]) == n),
        ):
            sel = [r["ratio"] for r in timed if band(r["logits"]) == name]
            s["perf"]["bands"][name] = {
                "n": len(sel),
                "mean": statistics.mean(sel),
                "max": max(sel),
                "above_1.0": sum(v > 1.0 for v in sel),
            }
    if leaks is not None:
        s["leak"] = leaks
    return s


def describe(r: dict[str, Any]) -> str:
    shape = (r["b"], r["sq"], r["vocab"]) if r["layout"] != "sbv" else (r["sq"], r["b"], r["vocab"])
    return (
        f"#{r['index']:4d} {r['dtype']} {r['layout']:8s} {str(shape):20s} eps={r['eps']} "
        f"reduce={int(r['reduce'])} ign={r['ignore_frac']:.2f} group={int(r['group'])}"
    )


def report(s: dict[str, Any]) -> str:
    lines = []
    if "precision_pass" in s:
        lines.append(
            f"precision: {s['precision_pass']}/{s['precision_judged']} pass "
            f"(worst error/bound: loss {s['worst_error_over_bound']['loss']:.3f}, "
            f"grad {s['worst_error_over_bound']['grad']:.3f})"
        )
        for r in s["precision_failures"]:
            lines.append(
                f"  FAIL {describe(r)} {r.get('error', '')} loss {r.get('loss_err', 0):.3e}/"
                f"{r.get('loss_bound', 0):.3e} grad {r.get('grad_err', 0):.3e}/{r.get('grad_bound', 0):.3e}"
            )
    if "memory" in s:
        m = s["memory"]
        lines.append(
            f"peak memory ours/PyTorch: mean {m['mean']:.3f} max {m['max']:.3f}, {m['above_1.05']} above 1.05"
        )
        lines += [
            f"  {describe(r)} {r['mem_ours']}/{r['mem_torch']} B = {r['mem_ratio']:.3f}" for r in m["worst"]
        ]
    if "perf" in s:
        p = s["perf"]
        lines.append(
            f"perf ours/PyTorch (fwd+bwd eager wall): mean {p['mean']:.3f} median {p['median']:.3f} "
            f"max {p['max']:.3f}; above 1.0: {p['above_1.0']}, above 1.05: {p['above_1.05']}"
        )
        lines.append(
            f"  before the cases above 1.0 were timed again: above 1.0: {p['first_above_1.0']}, "
            f"above 1.05: {p['first_above_1.05']}"
        )
        for name, b in p["bands"].items():
            lines.append(
                f"  logits {name:10s} n={b['n']:4d} mean {b['mean']:.3f} max {b['max']:.3f} "
                f"above 1.0: {b['above_1.0']}"
            )
        lines.append("worst ten (ms per call; device ms under graph replay; host us per call):")
        for r in p["worst"]:
            line = f"  {describe(r)} {r['ratio']:.3f} = {r['ours_ms']:.4f}/{r['torch_ms']:.4f} ms"
            if "ours_host_us" in r:
                line += f" host {r['ours_host_us']:.0f}/{r['torch_host_us']:.0f} us"
            if "ours_dev_ms" in r:
                line += f" dev {r['ours_dev_ms']:.4f}/{r['torch_dev_ms']:.4f} ms"
            lines.append(line)
    for r in s["perf_errors"]:
        lines.append(f"  perf error {describe(r)} {r['perf_error']}")
    for leak in s.get("leak", []):
        c = leak["case"]
        lines.append(
            f"leak {c['dtype']} {c['layout']} {(c['b'], c['sq'], c['vocab'])} group={int(c['group'])}: "
            f"{'flat' if leak['flat'] else 'GROWS'} over 10,000 calls {leak['allocated_every_1000']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cases", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-logits", type=int, default=2**27)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stages", default="precision,perf,leak")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--recheck", type=float, default=0.95, help="more rounds for cases above this ratio")
    args = parser.parse_args()
    all_cases = cases(args.cases, args.seed, args.max_logits)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.worker is not None:
        run_precision_worker(
            all_cases, args.worker, args.workers, args.out / f"precision_{args.worker}.jsonl"
        )
        return
    stages = set(args.stages.split(","))
    records: dict[int, dict[str, Any]] = {c.index: {} for c in all_cases}
    start = time.time()
    leaks, text = None, ""
    for stage in ("precision", "leak", "perf"):  # the longest last: each stage's results are saved
        if stage in stages:
            if stage == "precision":
                precision_stage(args, records)
            elif stage == "perf":
                perf_stage(all_cases, args, records, lambda done=leaks: save(args, all_cases, records, done))
            else:
                leaks = leak_stage()
            print(f"{stage}: done at {time.time() - start:.0f} s", flush=True)
            text = save(args, all_cases, records, leaks)
    print(text)


def save(
    args: argparse.Namespace,
    all_cases: list[Case],
    records: dict[int, dict[str, Any]],
    leaks: list[dict[str, Any]] | None,
) -> str:
    """Writes cases.csv, summary.json and summary.txt (after each stage); the summary's text."""
    s = summarize(all_cases, records, leaks)
    s["machine"] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    rows = [{**asdict(c), "logits": c.logits, **records[c.index]} for c in all_cases]
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(args.out / "cases.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "summary.json").write_text(json.dumps(s, indent=1, default=str))
    text = f"{s['machine']}\n{report(s)}"
    (args.out / "summary.txt").write_text(text + "\n")
    return text


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
