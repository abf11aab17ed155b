"""Megatron-core's GPT trained with ``cross_entropy_fusion_impl='native'`` and ``'te'`` side by side.

``'te'`` reaches npu_fixes' ``parallel_cross_entropy`` as it does on an Ascend install:
Transformer Engine there has no ``parallel_cross_entropy``; ``import npu_fixes`` arms the
``te-parallel-ce`` fix, which adds ours when ``transformer_engine.pytorch`` is imported; Megatron's
``megatron.core.extensions.transformer_engine`` then binds it as ``te_parallel_cross_entropy``
and ``LanguageModule.compute_language_model_loss`` calls it with the tensor-parallel group. Where
no Transformer Engine is installed, ``tests/te_stand_in`` takes its place (a version and the names
Megatron reads at import; ``--te-version`` sets the version, which picks Megatron's call). The
script checks that the function Megatron bound is ours. Megatron-core runs unmodified.

Model: Megatron-core's ``GPTModel`` from its local layer spec (no Transformer Engine layers),
tensor parallel over ``--tp`` ranks, vocabulary padded as Megatron's training does (a multiple of
128 x TP), dropout off, weights initialised on the CPU (the same for any TP), the forward under
bf16 autocast. Both models start from the same weights, see the same batches (a fixed random
Markov chain over the ``--vocab`` real tokens, as ``examples/ce_long_run.py`` makes them) and step
in lockstep, taking turns going first. Optimiser: ``torch.optim.AdamW`` with a linear warm-up.

Reported (rank 0, JSON): loss-curve MAPE of 'te' against 'native' (target <= 0.5 %), the mean step
time of each (first steps excluded; each step timed with the device synced before and after),
each run's peak memory in a step above what it held before (activations, logits, the loss's
buffers) and the bytes its collectives moved per step (all-gather and all-reduce, counted at the
``torch.distributed`` calls).

    python examples/megatron_gpt_ce.py --steps 2000                  # TP 1, one GPU
    torchrun --nproc-per-node 4 examples/megatron_gpt_ce.py --tp 4   # TP 4 on 4 GPUs

Megatron-core's attention allocates its buffers on CUDA, so the model does not run on a CPU; the
CPU check of the same call path is ``tests/fixes/test_te_parallel_ce_megatron.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parent.parent
STAND_IN = REPO / "tests" / "te_stand_in"
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(Path(__file__).resolve().parent))
from ce_long_run import markov_batches  # noqa: E402

IMPLS = ("native", "te")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--vocab", type=int, default=32000, help="real tokens (padded to a multiple of 128 x TP)")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--successors", type=int, default=4, help="likely successors per token")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--te-version", default="2.9.0", help="the stand-in's version (>= 2.7.0: seven arguments)")
    p.add_argument("--out", type=Path, default=Path("megatron_gpt_ce_out"))
    p.add_argument("--stem", default=None, help="output file names' stem (default megatron_gpt_ce_tp<TP>)")
    return p.parse_args(argv)


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron's padding: the next multiple of 128 x TP (every rank's slice the same size)."""
    multiple = 128 * tp
    return -(-vocab // multiple) * multiple


def import_megatron(te_version: str) -> Any:
    """npu_fixes first, then Megatron-core, with the stand-in where no Transformer Engine is
    installed. Returns Megatron's extension module after checking it bound our function."""
    if importlib.util.find_spec("transformer_engine") is None:
        os.environ["TE_STAND_IN_VERSION"] = te_version
        sys.path.insert(0, str(STAND_IN))
    import npu_fixes  # noqa: F401, I001  (arms te-parallel-ce before Megatron imports Transformer Engine)
    from megatron.core.extensions import transformer_engine as te_ext
    from npu_fixes.ops import parallel_cross_entropy

    if getattr(te_ext, "parallel_cross_entropy", None) is not parallel_cross_entropy:
        raise SystemExit("Megatron did not bind npu_fixes' parallel_cross_entropy: "
                         f"{getattr(te_ext, 'parallel_cross_entropy', None)!r}")
    return te_ext


def build(impl: str, args: argparse.Namespace, vocab: int) -> torch.nn.Module:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
        tensor_model_parallel_size=args.tp, use_cpu_initialization=True,
        attention_dropout=0.0, hidden_dropout=0.0, pipeline_dtype=torch.float32,
        cross_entropy_loss_fusion=True, cross_entropy_fusion_impl=impl,
    )
    spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False)
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=vocab,
                    max_sequence_length=args.seq)


class CommBytes:
    """Bytes each rank contributes to ``torch.distributed``'s all-gather and all-reduce calls,
    per collective, counted while ``counting`` is open."""

    #: The sent tensor's position and keyword in each collective's signature.
    SENT = {"all_gather_into_tensor": (1, "input_tensor"), "all_gather": (1, "tensor"),
            "all_reduce": (0, "tensor")}

    def __init__(self) -> None:
        self.total = dict.fromkeys(self.SENT, 0)
        self.active = False
        for name, (pos, keyword) in self.SENT.items():
            setattr(dist, name, self._counted(name, pos, keyword, getattr(dist, name)))

    def _counted(self, name: str, pos: int, keyword: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                sent = args[pos] if len(args) > pos else kwargs[keyword]
                self.total[name] += sent.numel() * sent.element_size()
            return fn(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        self.active = True
        try:
            yield
        finally:
            self.active = False


class Run:
    """One of the two trainings: model, optimiser, step times, peaks, loss curve."""

    def __init__(self, model: torch.nn.Module, args: argparse.Namespace, device: torch.device) -> None:
        self.model = model.to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, fused=True)
        warmup = max(args.warmup, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / warmup))
        self.losses = torch.zeros(args.steps, device=device)
        self.times: list[float] = []
        self.peak_bytes = 0
        self.comm_bytes = dict.fromkeys(CommBytes.SENT, 0)

    def step(self, i: int, tokens: torch.Tensor, position_ids: torch.Tensor, comm: CommBytes) -> None:
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        before, begun = dict(comm.total), time.perf_counter()
        with comm.counting(), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(tokens[:, :-1], position_ids, None, labels=tokens[:, 1:]).float().mean()
        with comm.counting():
            loss.backward()
        self.opt.step()
        self.schedule.step()
        self.opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        self.times.append(time.perf_counter() - begun)
        self.peak_bytes = max(self.peak_bytes, torch.cuda.max_memory_allocated() - held)
        for name, total in comm.total.items():
            self.comm_bytes[name] += total - before[name]
        self.losses[i] = loss.detach()


def train(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=args.tp)
    model_parallel_cuda_manual_seed(args.seed)
    vocab = padded_vocab(args.vocab, args.tp)
    torch.manual_seed(args.seed)
    models = {impl: build(impl, args, vocab) for impl in IMPLS}
    models["te"].load_state_dict(models["native"].state_dict())
    runs = {impl: Run(model, args, device) for impl, model in models.items()}
    data = markov_batches(args.steps, args.batch, args.seq, args.vocab, args.successors, args.seed)
    position_ids = torch.arange(args.seq, device=device).expand(args.batch, args.seq)
    comm = CommBytes()
    for i in range(args.steps):
        tokens = data[i].to(device)
        for impl in IMPLS[:: 1 if i % 2 else -1]:  # take turns going first
            runs[impl].step(i, tokens, position_ids, comm)
    skip = min(50, args.steps // 10)
    return {
        "vocab": args.vocab, "padded_vocab": vocab,
        "params_per_rank": sum(p.numel() for p in models["te"].parameters()),
        **{impl: {"loss": run.losses.tolist(),
                  "step_ms": 1e3 * sum(run.times[skip:]) / max(len(run.times) - skip, 1),
                  "peak_step_mib": run.peak_bytes / 2**20,
                  "comm_bytes_per_step": {name: total / args.steps for name, total in run.comm_bytes.items()}}
           for impl, run in runs.items()},
    }


def report(args: argparse.Namespace, result: dict[str, Any], device: str) -> dict[str, Any]:
    """Write the curves (CSV) and the summary (JSON); return the summary."""
    te, native = result["te"]["loss"], result["native"]["loss"]
    mape = 100.0 * sum(abs(a - b) / abs(b) for a, b in zip(te, native, strict=True)) / len(native)
    tail = max(1, len(native) // 20)
    summary = {
        "steps": args.steps, "tp": args.tp, "device": device, "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "megatron_core": _version("megatron-core"),
        "te_version_seen_by_megatron": str(_te_version()),
        "model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "seq": args.seq,
                  "batch": args.batch, "vocab": result["vocab"], "padded_vocab": result["padded_vocab"],
                  "params_per_rank": result["params_per_rank"]},
        "first_loss": {"native": native[0], "te": te[0]},
        "final_loss": {"native": sum(native[-tail:]) / tail, "te": sum(te[-tail:]) / tail},
        "mape_percent": mape,
        **{key: {impl: result[impl][key] for impl in IMPLS}
           for key in ("step_ms", "peak_step_mib", "comm_bytes_per_step")},
    }
    summary["step_time_ratio_te_over_native"] = summary["step_ms"]["te"] / summary["step_ms"]["native"]
    summary["targets_met"] = {"mape<=0.5%": mape <= 0.5,
                              "te_not_slower": summary["step_time_ratio_te_over_native"] <= 1.0}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or f"megatron_gpt_ce_tp{args.tp}"
    with open(args.out / f"{stem}.csv", "w") as f:
        f.write("step,native,te\n")
        f.writelines(f"{i},{a:.6f},{b:.6f}\n" for i, (a, b) in enumerate(zip(native, te, strict=True)))
    (args.out / f"{stem}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _version(dist_name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist_name)
    except PackageNotFoundError:
        return "unknown"


def _te_version() -> Any:
    from megatron.core.utils import get_te_version

    return get_te_version()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA GPUs: Megatron-core's attention allocates its buffers on CUDA")
    import_megatron(args.te_version)
    if "RANK" in os.environ:  # torchrun
        dist.init_process_group("nccl")
        local = int(os.environ["LOCAL_RANK"])
    elif args.tp == 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        local = 0
    else:
        raise SystemExit(f"--tp {args.tp}: start the ranks with torchrun --nproc-per-node {args.tp}")
    if dist.get_world_size() != args.tp:
        raise SystemExit(f"--tp {args.tp} but {dist.get_world_size()} ranks were started")
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    result = train(args, device)
    if dist.get_rank() == 0:
        summary = report(args, result, str(device))
        print(json.dumps({k: v for k, v in summary.items() if k not in ("model",)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
