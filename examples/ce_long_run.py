"""Train a small GPT-style LM with npu_fixes' cross entropy and with PyTorch's, side by side.

Both runs start from the same weights and see the same batches (sequences of a fixed random
Markov chain: every token has a few likely successors, so the loss falls from ln(V) towards
the chain's entropy). They advance in lockstep, one step each, so clocks and thermals are
shared. Reported: the loss curves' MAPE (ours vs PyTorch, target <= 0.5%) and the mean step
time of each (the first 50 steps excluded; ours should not be slower; they take turns going
first within a step). AdamW with a linear learning-rate warm-up (``--warmup``).

The default batch (64 x 256 tokens) keeps the GPU busy for most of a step. With ``--batch
16`` the GPU idles most of the step: the host's time decides it (Python and launch costs per
operation), and a cross entropy made of Python and Triton launches costs more host time
than PyTorch's C++ one. ``--pair`` runs controls (two PyTorch runs) instead.

``--tp 2`` splits the LM head over 2 ranks by vocabulary (each rank computes the logits of
its slice; the transformer body is replicated and the hidden states' gradient all-reduced):
ours gets the slice and the process group; PyTorch's gets the full logits, all-gathered
(``F.cross_entropy`` needs the whole vocabulary). The ranks come from ``torchrun`` or, when
started plainly, from ``torch.multiprocessing`` inside this script (NCCL on GPUs, gloo on CPU).

On CUDA the model runs under bf16 autocast, logits in bf16. By default the loss is computed
inside the autocast region too, as nanoGPT and the Hugging Face Trainer do: PyTorch's cross
entropy then upcasts the logits to fp32 (autocast's rule for it), ours reads them as they
are. ``--loss-autocast off`` computes both losses outside it (PyTorch's then runs in bf16).
A step's time is its wall time with the device synced before and after it. ``--profile N``
adds N profiled steps per run after training and writes the kernel and host-op tables. On an
H200 the 2000-step default takes well under 2 minutes.
CPU smoke test::

    python examples/ce_long_run.py --device cpu --steps 5 --vocab 512 --d-model 32 --seq 16
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from npu_fixes.ops import parallel_cross_entropy  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--tp", type=int, default=1, help="vocabulary-parallel ranks of the LM head")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precision", choices=("bf16", "fp32"), default=None,
                   help="autocast dtype (default: bf16 on CUDA, fp32 elsewhere)")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100, help="steps of linear learning-rate warm-up")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--successors", type=int, default=4, help="likely successors per token")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--loss-autocast", choices=("on", "off"), default="on",
                   help="compute the loss inside the autocast region (default on)")
    p.add_argument("--pair", choices=tuple(PAIRS), default="ours-torch",
                   help="what the first run uses: ours, or for control runs PyTorch's loss as it is "
                        "(torch-torch: drift from nondeterministic kernels alone) or of the fp32 "
                        "logits times 1 + 2**-23 (perturbed-torch: how far a last-bit change alone "
                        "moves the curve)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after training, profile N more steps of each run")
    p.add_argument("--out", type=Path, default=Path("ce_long_run_out"))
    p.add_argument("--stem", default=None, help="output file names' stem (default ce_long_run_tp<TP>)")
    args = p.parse_args(argv)
    if args.precision is None:
        args.precision = "bf16" if args.device.startswith("cuda") else "fp32"
    if args.vocab % args.tp:
        p.error("--vocab must be divisible by --tp (PyTorch's side all-gathers equal slices)")
    return args


# ----------------------------------------------------------------------------------- data


def markov_batches(steps: int, batch: int, seq: int, vocab: int, successors: int, seed: int) -> Tensor:
    """Token ids ``(steps, batch, seq + 1)`` walked along a fixed random Markov chain (on CPU,
    so every device and rank gets the same data)."""
    gen = torch.Generator().manual_seed(seed)
    succ = torch.randint(0, vocab, (vocab, successors), generator=gen)
    cum = torch.softmax(2.0 * torch.randn(vocab, successors, generator=gen), dim=-1).cumsum(-1)
    n = steps * batch
    tokens = torch.empty((n, seq + 1), dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (n,), generator=gen)
    for i in range(seq):
        cur = tokens[:, i]
        pick = (cum[cur] < torch.rand(n, 1, generator=gen)).sum(-1).clamp(max=successors - 1)
        tokens[:, i + 1] = succ[cur, pick]
    return tokens.view(steps, batch, seq + 1)


# ---------------------------------------------------------------------------------- model


class _GradAllReduce(torch.autograd.Function):
    """Identity forward; all-reduce (sum) of the gradient: the hidden states feed every
    rank's slice of the LM head, so their gradient is the sum of the ranks' parts."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, group: Any) -> Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _GatherVocab(torch.autograd.Function):
    """All-gather equal vocabulary slices of the logits into the full logits; the gradient
    of each rank's slice is its part of the full gradient."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, group: Any) -> Tensor:
        ctx.rank, ctx.width = dist.get_rank(group), logits.shape[-1]
        parts = [torch.empty_like(logits) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, logits.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        lo = ctx.rank * ctx.width
        return grad[..., lo : lo + ctx.width], None


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Token + position embeddings, ``layers`` blocks, final norm, untied LM head over the
    vocabulary slice ``[lo, hi)`` (the whole vocabulary without tensor parallelism)."""

    def __init__(self, vocab: int, d: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.02 * torch.randn(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)

    def keep_vocab_slice(self, lo: int, hi: int) -> None:
        self.head.weight = nn.Parameter(self.head.weight.detach()[lo:hi].clone())

    def hidden(self, idx: Tensor) -> Tensor:
        """The final norm's output: what the LM head reads."""
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln(x)

    def forward(self, idx: Tensor, group: Any) -> Tensor:
        x = self.hidden(idx)
        if group is not None:
            x = _GradAllReduce.apply(x, group)
        return self.head(x)


# ------------------------------------------------------------------------------- training


def ours_loss(logits: Tensor, target: Tensor, eps: float, group: Any) -> Tensor:
    return parallel_cross_entropy(logits, target, eps, True, group)


def torch_loss(logits: Tensor, target: Tensor, eps: float, group: Any) -> Tensor:
    if group is not None:
        logits = _GatherVocab.apply(logits, group)
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=eps)


def torch_perturbed_loss(logits: Tensor, target: Tensor, eps: float, group: Any) -> Tensor:
    """PyTorch's loss of the fp32 logits times ``1 + 2**-23``: a change in the last bit."""
    return torch_loss(logits.float() * (1.0 + 2.0**-23), target, eps, group)


# First run's loss and label per --pair; the second run always uses torch_loss.
PAIRS = {
    "ours-torch": (ours_loss, "npu_fixes parallel_cross_entropy"),
    "torch-torch": (torch_loss, "PyTorch, a second run"),
    "perturbed-torch": (torch_perturbed_loss, "PyTorch, logits x (1 + 2**-23)"),
}


class StepClock:
    """Wall time of each step of one run, the device synced before and after, so a step's
    time is its own (host and device), whichever of them is the bottleneck."""

    def __init__(self, device: torch.device) -> None:
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.times: list[float] = []

    def start(self) -> float:
        self.sync()
        return time.perf_counter()

    def stop(self, begun: float) -> None:
        self.sync()
        self.times.append(time.perf_counter() - begun)

    def mean_ms(self, skip: int) -> float:
        times = self.times[skip:]
        return sum(times) * 1e3 / max(len(times), 1)


class Run:
    """One of the two trainings: model, optimizer, loss function, clock, loss curve."""

    def __init__(self, base: nn.Module, loss_fn: Any, device: torch.device, args: argparse.Namespace,
                 group: Any) -> None:
        self.model = copy.deepcopy(base).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, fused=device.type == "cuda")
        warmup = max(args.warmup, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / warmup))
        self.loss_fn, self.clock = loss_fn, StepClock(device)
        self.losses = torch.zeros(args.steps, device=device)
        self.device, self.args, self.group = device, args, group
        self.dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32

    def step(self, inp: Tensor, target: Tensor) -> Tensor:
        amp = self.dtype != torch.float32
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=amp):
            logits = self.model(inp, self.group)
            with torch.autocast(self.device.type, dtype=self.dtype,
                                enabled=amp and self.args.loss_autocast == "on"):
                loss = self.loss_fn(logits, target, self.args.label_smoothing, self.group)
        loss.backward()
        self.opt.step()
        self.schedule.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


def train(args: argparse.Namespace, device: torch.device, group: Any) -> dict[str, Any]:
    """Both runs in lockstep; returns the loss curves and mean step times (same on all ranks)."""
    tp, rank = (1, 0) if group is None else (dist.get_world_size(group), dist.get_rank(group))
    data = markov_batches(args.steps, args.batch, args.seq, args.vocab, args.successors, args.seed).to(device)
    torch.manual_seed(args.seed)
    base = TinyGPT(args.vocab, args.d_model, args.layers, args.heads, args.seq)
    width = args.vocab // tp
    base.keep_vocab_slice(rank * width, (rank + 1) * width)
    runs = {name: Run(base, loss_fn, device, args, group)
            for name, loss_fn in (("ours", PAIRS[args.pair][0]), ("torch", torch_loss))}
    for step in range(args.steps):
        inp, target = data[step, :, :-1], data[step, :, 1:]
        order = list(runs.values())
        for run in order[:: 1 if step % 2 else -1]:  # take turns going first
            begun = run.clock.start()
            run.losses[step] = run.step(inp, target)
            run.clock.stop(begun)
    skip = min(50, args.steps // 10)
    result = {name: {"loss": run.losses.tolist(), "step_ms": run.clock.mean_ms(skip)}
              for name, run in runs.items()}
    if args.profile:
        result["profile"] = {name: profile(run, data, args.profile) for name, run in runs.items()}
    return result


def profile(run: Run, data: Tensor, steps: int) -> str:
    """Kernel and host-op tables of ``steps`` more steps of ``run`` (on the last batches)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if run.device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        for i in range(steps):
            batch = data[-1 - i % len(data)]
            run.step(batch[:, :-1], batch[:, 1:])
        if run.device.type == "cuda":
            torch.cuda.synchronize()
    table = prof.key_averages()
    cuda = run.device.type == "cuda"
    by_device = table.table(sort_by="self_device_time_total", row_limit=25) if cuda else ""
    return f"{by_device}\n{table.table(sort_by='self_cpu_time_total', row_limit=25)}"


def report(args: argparse.Namespace, result: dict[str, Any], device: str) -> dict[str, Any]:
    """Write the log, the curves (CSV, and PNG when matplotlib is there); return the summary."""
    ours, ref = result["ours"]["loss"], result["torch"]["loss"]
    mape = 100.0 * sum(abs(a - b) / abs(b) for a, b in zip(ours, ref, strict=True)) / len(ref)
    tail = max(1, len(ref) // 20)
    summary = {
        "steps": args.steps, "tp": args.tp, "device": device, "precision": args.precision,
        "vocab": args.vocab, "tokens_per_step": args.batch * args.seq,
        "first_loss": {"ours": ours[0], "torch": ref[0]},
        "final_loss": {"ours": sum(ours[-tail:]) / tail, "torch": sum(ref[-tail:]) / tail},
        "mape_percent": mape,
        "pair": args.pair, "batch": args.batch, "warmup": args.warmup, "loss_autocast": args.loss_autocast,
        "step_ms": {"ours": result["ours"]["step_ms"], "torch": result["torch"]["step_ms"]},
    }
    ms = summary["step_ms"]
    summary["speed_ratio_ours_over_torch"] = ms["ours"] / ms["torch"]
    summary["targets_met"] = {
        "mape<=0.5%": mape <= 0.5,
        "ours_not_slower": summary["speed_ratio_ours_over_torch"] <= 1.0,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or f"ce_long_run_tp{args.tp}"
    if "profile" in result:
        (args.out / f"{stem}_profile.txt").write_text(
            "".join(f"# {name}\n{text}\n" for name, text in result["profile"].items())
        )
    with open(args.out / f"{stem}.csv", "w") as f:
        f.write("step,ours,torch\n")
        f.writelines(f"{i},{a:.6f},{b:.6f}\n" for i, (a, b) in enumerate(zip(ours, ref, strict=True)))
    lines = [f"{k}: {json.dumps(v)}" for k, v in summary.items()]
    every = max(1, args.steps // 20)
    lines += ["", "step  ours      torch"]
    lines += [f"{i:<5} {ours[i]:.5f}  {ref[i]:.5f}" for i in range(0, args.steps, every)]
    (args.out / f"{stem}.log").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        summary["png"] = None
    else:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        ours_label = PAIRS[args.pair][1]
        ax.plot(ref, label=f"PyTorch cross entropy ({ms['torch']:.2f} ms/step)", lw=1)
        ax.plot(ours, label=f"{ours_label} ({ms['ours']:.2f} ms/step)", lw=1, ls="--")
        ax.set(xlabel="step", ylabel="loss", title=f"TinyGPT V={args.vocab} tp={args.tp}: MAPE {mape:.3f}%")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out / f"{stem}.png", dpi=120)
        summary["png"] = str(args.out / f"{stem}.png")
    (args.out / f"{stem}.json").write_text(json.dumps(summary) + "\n")
    return summary


def run_rank(rank: int, args: argparse.Namespace, port: int | None = None) -> None:
    """One rank of a ``--tp`` group: started by this script (rendezvous on ``port``) or by
    ``torchrun`` (``port`` None: rendezvous from its environment)."""
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(rank)
    backend = "nccl" if cuda else "gloo"
    if port is None:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=args.tp)
    if dist.get_world_size() != args.tp:
        raise SystemExit(f"--tp {args.tp} but {dist.get_world_size()} ranks were started")
    run(args, torch.device("cuda", rank) if cuda else torch.device(args.device))


def run(args: argparse.Namespace, device: torch.device) -> None:
    group = dist.group.WORLD if args.tp > 1 else None
    result = train(args, device, group)
    if group is None or dist.get_rank() == 0:
        print(json.dumps(report(args, result, str(device))))
    if group is not None:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.tp == 1:
        run(args, torch.device(args.device))
    elif "RANK" in os.environ:  # torchrun
        run_rank(int(os.environ["LOCAL_RANK"]), args)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        torch.multiprocessing.spawn(run_rank, args=(args, port), nprocs=args.tp, join=True)


if __name__ == "__main__":
    main()
