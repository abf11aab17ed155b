"""Benchmark npu_fixes.ops.parallel_cross_entropy on a CUDA GPU.

Forward+backward time against ``torch.nn.functional.cross_entropy`` in the same dtype (and
Liger-Kernel's cross entropy when importable), on five typical shapes, on a fixed sweep of
28 shapes (logits from 2**16 to 2**30, fp32 and bf16) and on a random sweep of shapes; the
fraction of HBM bandwidth reached for 2 reads + 1 write of the logits at N=8192, V=128256
(against a measured device copy); peak memory beyond inputs and gradient; memory growth over
1000 calls. Writes CSV and PNG files into ``--out``.

Two times per shape, side by side: the eager wall time per call the way a training loop sees
it (a loop of calls, synchronized once at its end: host launch overhead included wherever the
host is slower than the device), and the device time (the calls captured in a CUDA graph and
replayed: no host overhead). In the fixed sweep the eager ratio to PyTorch is paired: the median
over 15 rounds of each round's ratio to PyTorch's round beside it. ``--baseline MODULE`` adds
an earlier implementation (a module with ``parallel_cross_entropy``, e.g. a copy of an earlier
version) to the fixed sweep.

    python benchmarks/ce_benchmark.py --out benchmarks/results/<date>_<commit>_<machine> [--baseline MODULE]
    python benchmarks/ce_benchmark.py --out /tmp/tune --tune   # block/warps grid only
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import os
import platform
import random
import statistics
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F

from npu_fixes.ops import parallel_cross_entropy
from npu_fixes.ops.cross_entropy import general_path, tuning

try:
    from liger_kernel.transformers.functional import liger_cross_entropy
except ImportError:  # optional
    liger_cross_entropy = None

TYPICAL = [(2, 128, 4096), (4, 256, 8192), (2, 512, 32000), (2, 256, 65536), (1, 512, 128000)]
# The fixed sweep, each shape in fp32 and bf16: logits from 2**16 to 2**30.
EAGER_SWEEP = [
    (1, 16, 4096),  # 65K
    (1, 64, 4096),  # 262K
    (2, 128, 4096),  # 1.0M, typical
    (1, 32, 32000),  # 1.0M
    (4, 256, 8192),  # 8.4M, typical
    (1, 128, 151936),  # 19M: few rows, wide vocabulary (split rows)
    (8, 1024, 4096),  # 34M: many rows, narrow vocabulary
    (2, 512, 32000),  # 33M, typical
    (2, 256, 65536),  # 34M, typical
    (1, 512, 128000),  # 66M, typical
    (1, 2048, 50257),  # 103M
    (16, 256, 32000),  # 131M: the training shape of examples/ce_long_run.py
    (2, 2048, 128256),  # 525M
    (1, 8192, 128256),  # 1.05G: the roofline shape
]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def time_ms(fn: Callable[[], object], reps: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)
    ]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def wall_samples(
    fns: dict[str, Callable[[], object]], rounds: int = 5, min_calls: int = 10, round_s: float = 0.02
) -> dict[str, list[float]]:
    """Eager wall milliseconds per call of each function, as a training loop sees it, one sample
    per round: a loop of calls timed on the host and synchronized once at its end (at least
    ``min_calls`` calls and ``round_s`` seconds). The functions alternate round by round, so
    drifts of the host's speed hit all alike."""
    calls = {}
    for name, fn in fns.items():
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        calls[name] = max(min_calls, int(round_s / ((time.perf_counter() - start) / 3)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) / calls[name] * 1e3)
    return samples


def wall_ms(fns: dict[str, Callable[[], object]], rounds: int = 5) -> dict[str, float]:
    """Median over rounds of :func:`wall_samples`."""
    return {name: statistics.median(v) for name, v in wall_samples(fns, rounds).items()}


def graph_ms(fn: Callable[[], object], reps: int, inner: int = 5) -> float:
    """Device time of ``fn`` without host launch overhead: ``inner`` calls captured in one
    CUDA graph, median replay time over ``reps`` replays, divided by ``inner``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    ms = time_ms(graph.replay, reps, warmup=1) / inner
    del graph
    return ms


def copy_bandwidth() -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written."""
    src = torch.empty(2**30, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), reps=20)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def make(b: int, sq: int, v: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(b, sq, v, device="cuda", dtype=dtype).requires_grad_()
    t = torch.randint(0, v, (b, sq), device="cuda")
    t[:, ::17] = -100
    return x, t


def step_ours(x: torch.Tensor, t: torch.Tensor, inplace: bool = False) -> Callable[[], object]:
    return lambda: torch.autograd.grad(
        parallel_cross_entropy(x, t, reduce_loss=True, inplace_grad=inplace), x
    )


def step_module(mod: object, x: torch.Tensor, t: torch.Tensor) -> Callable[[], object]:
    """Like ``step_ours``, with another implementation's ``parallel_cross_entropy``."""
    fn = mod.parallel_cross_entropy
    return lambda: torch.autograd.grad(fn(x, t, reduce_loss=True), x)


def step_torch(x: torch.Tensor, t: torch.Tensor) -> Callable[[], object]:
    v = x.shape[-1]
    return lambda: torch.autograd.grad(F.cross_entropy(x.view(-1, v), t.view(-1), ignore_index=-100), x)


def step_liger(x: torch.Tensor, t: torch.Tensor) -> Callable[[], object]:
    v = x.shape[-1]
    return lambda: torch.autograd.grad(liger_cross_entropy(x.view(-1, v), t.view(-1), ignore_index=-100), x)


def peak_extra_bytes(fn: Callable[[], object]) -> int:
    """Peak allocation of one fwd+bwd beyond what was allocated before and the gradient kept."""
    fn()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - base
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak - kept


def typical(out: Path, reps: int) -> None:
    with open(out / "ce_typical.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "dtype",
                "B",
                "SQ",
                "V",
                "ours_ms",
                "torch_ms",
                "liger_ms",
                "ours_inplace_ms",
                "ours_graph_ms",
                "torch_graph_ms",
            ]
        )
        print(
            f"{'dtype':5s} {'shape':>16s} {'ours ms':>9s} {'torch ms':>9s} {'ours/pt':>8s} {'liger ms':>9s} "
            f"{'inplace ms':>10s} {'graph ours/pt':>14s}"
        )
        for name, dtype in DTYPES.items():
            for shape in TYPICAL:
                x, t = make(*shape, dtype)
                wall = wall_ms({"ours": step_ours(x, t), "torch": step_torch(x, t)})
                ours, pt = wall["ours"], wall["torch"]
                inplace = wall_ms({"x": step_ours(x.detach().clone().requires_grad_(), t, inplace=True)})["x"]
                lg = (
                    time_ms(step_liger(x.detach().clone().requires_grad_(), t), reps)
                    if liger_cross_entropy
                    else float("nan")
                )
                g_ours = graph_ms(step_ours(x, t), reps)
                g_pt = graph_ms(step_torch(x, t), reps)
                writer.writerow([name, *shape, ours, pt, lg, inplace, g_ours, g_pt])
                print(
                    f"{name:5s} {str(shape):>16s} {ours:9.4f} {pt:9.4f} {ours / pt:8.3f} {lg:9.4f} "
                    f"{inplace:10.4f} {g_ours:.4f}/{g_pt:.4f}={g_ours / g_pt:.3f}"
                )
                del x


def bandwidth_and_memory(writer: csv.writer, hbm: float, reps: int) -> None:
    n, v = 8192, 128256
    for name, dtype in DTYPES.items():
        x, t = make(1, n, v, dtype)
        logits = x.numel() * x.element_size()
        total = time_ms(step_ours(x, t), reps)
        fwd = time_ms(partial(parallel_cross_entropy, x.detach(), t, reduce_loss=True), reps)
        frac = 3 * logits / (total * 1e-3) / hbm
        extra_ours = peak_extra_bytes(step_ours(x, t))
        extra_pt = peak_extra_bytes(step_torch(x, t))
        torch_ms = time_ms(step_torch(x, t), reps)
        liger_ms = time_ms(step_liger(x, t), reps) if liger_cross_entropy else float("nan")
        writer.writerow([f"{name}_torch_fwd_bwd_ms", torch_ms])
        writer.writerow([f"{name}_liger_fwd_bwd_ms", liger_ms])
        writer.writerow([f"{name}_fwd_bwd_ms", total])
        writer.writerow([f"{name}_fwd_ms", fwd])
        writer.writerow([f"{name}_hbm_fraction_2r1w", frac])
        writer.writerow([f"{name}_peak_extra_over_logits_ours", extra_ours / logits])
        writer.writerow([f"{name}_peak_extra_over_logits_torch", extra_pt / logits])
        print(
            f"{name} N={n} V={v}: fwd+bwd {total:.3f} ms (fwd {fwd:.3f}), "
            f"{frac:.1%} of {hbm / 1e12:.2f} TB/s copy bandwidth for 2 reads + 1 write; "
            f"peak extra memory ours {extra_ours / logits:.2%} of logits, torch {extra_pt / logits:.2%}; "
            f"ours/torch {total / torch_ms:.3f}, ours/liger {total / liger_ms:.3f}"
        )
        del x


def leak(writer: csv.writer) -> None:
    x, t = make(4, 256, 8192, torch.bfloat16)
    step = step_ours(x, t)
    step()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(1000):
        step()
    torch.cuda.synchronize()
    growth = torch.cuda.memory_allocated() - before
    writer.writerow(["bytes_growth_over_1000_calls_bf16_4x256x8192", growth])
    print(f"memory growth over 1000 calls: {growth} bytes")


def eager_sweep(out: Path, baseline: object | None, reps: int) -> list[dict[str, object]]:
    """The fixed sweep: eager wall time and device time of ours, PyTorch's (and the baseline's)
    per shape, side by side; writes ce_eager_sweep.csv and prints the table and the ratios'
    mean and max, over all shapes and over those of at least 2**20 logits."""
    rows: list[dict[str, object]] = []
    t0 = time.time()
    for b, sq, v in EAGER_SWEEP:
        for name, dtype in DTYPES.items():
            x, t = make(b, sq, v, dtype)
            fns = {"torch": step_torch(x, t), "ours": step_ours(x, t)}
            if baseline is not None:
                fns["base"] = step_module(baseline, x, t)
            wall = wall_samples(fns, rounds=15)
            row: dict[str, object] = {"dtype": name, "B": b, "SQ": sq, "V": v, "logits": b * sq * v}
            for key, ms in wall.items():
                row[f"{key}_wall_ms"] = statistics.median(ms)
            for key, fn in fns.items():
                row[f"{key}_graph_ms"] = graph_ms(fn, reps, inner=3)
            for key in fns:
                if key != "torch":
                    # paired: the median of each round's ratio to PyTorch's round next to it
                    ratios = [a / b for a, b in zip(wall[key], wall["torch"], strict=True)]
                    row[f"{key}_wall_over_torch"] = statistics.median(ratios)
                    row[f"{key}_graph_over_torch"] = row[f"{key}_graph_ms"] / row["torch_graph_ms"]
            rows.append(row)
            del x, t, fns
    print(f"fixed sweep of {len(rows)} cases took {time.time() - t0:.0f} s")
    with open(out / "ce_eager_sweep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    has_base = baseline is not None
    head = f"{'dtype':5s} {'shape':>18s} {'logits':>8s} {'torch ms':>9s} {'ours ms':>9s}"
    head += f" {'wall ours/pt':>12s}"
    head += f" {'base ms':>9s} {'wall base/pt':>12s}" if has_base else ""
    head += f" {'dev pt ms':>9s} {'dev ours ms':>11s} {'dev ours/pt':>11s}"
    print(head)
    for r in rows:
        line = (
            f"{r['dtype']:5s} {str((r['B'], r['SQ'], r['V'])):>18s} {r['logits']:8.2e} "
            f"{r['torch_wall_ms']:9.4f} {r['ours_wall_ms']:9.4f} {r['ours_wall_over_torch']:12.3f}"
        )
        if has_base:
            line += f" {r['base_wall_ms']:9.4f} {r['base_wall_over_torch']:12.3f}"
        line += f" {r['torch_graph_ms']:9.4f} {r['ours_graph_ms']:11.4f} {r['ours_graph_over_torch']:11.3f}"
        print(line)
    for label, sel in (("all", rows), (">= 2**20 logits", [r for r in rows if r["logits"] >= 2**20])):
        for key in ("ours_wall_over_torch", "base_wall_over_torch", "ours_graph_over_torch"):
            if key in sel[0]:
                vals = [float(r[key]) for r in sel]
                print(f"{label:16s} {key:22s} mean {statistics.mean(vals):.3f} max {max(vals):.3f} "
                      f"({len(vals)} cases)")
    return rows


def machine_info(out: Path) -> None:
    """What the numbers were measured on: GPU, driver, host kernel and CPU, versions."""
    import triton

    lines = [f"gpu: {torch.cuda.get_device_name()}"]
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        lines.append(f"nvidia-smi: {smi.stdout.strip()}")
    except (OSError, subprocess.SubprocessError) as e:
        lines.append(f"nvidia-smi: {e}")
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    lines += [
        f"host: {platform.node()} kernel {platform.release()} ({os.cpu_count()} cpus, {cpu})",
        f"python {platform.python_version()} torch {torch.__version__} triton {triton.__version__}",
    ]
    (out / "ce_machine.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def sweep(out: Path, count: int, reps: int) -> list[tuple]:
    rng = random.Random(0)
    results = []
    t0 = time.time()
    for i in range(count):
        name = "fp32" if i % 2 == 0 else "bf16"
        while True:
            n = int(math.exp(rng.uniform(math.log(256), math.log(32768))))
            v = int(math.exp(rng.uniform(math.log(4096), math.log(256000))))
            if n * v * DTYPES[name].itemsize <= 4 * 2**30:
                break
        b = rng.choice([1, 2, 4, 8])
        sq = max(1, n // b)
        x, t = make(b, sq, v, DTYPES[name])
        wall = wall_ms({"ours": step_ours(x, t), "torch": step_torch(x, t)}, rounds=3)
        ours, pt = wall["ours"], wall["torch"]
        g_ours = graph_ms(step_ours(x, t), reps)
        g_pt = graph_ms(step_torch(x, t), reps)
        results.append((name, b, sq, v, ours, pt, ours / pt, g_ours, g_pt, g_ours / g_pt))
        del x, t
    print(f"sweep of {count} shapes took {time.time() - t0:.0f} s")
    with open(out / "ce_sweep.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "dtype",
                "B",
                "SQ",
                "V",
                "ours_ms",
                "torch_ms",
                "ours_over_torch",
                "ours_graph_ms",
                "torch_graph_ms",
                "graph_ours_over_torch",
            ]
        )
        w.writerows(results)
    for name in DTYPES:
        for label, col in (("eager", 6), ("cuda graph", 9)):
            ratios = [r[col] for r in results if r[0] == name]
            print(
                f"sweep {name} {label}: {len(ratios)} shapes, ours/torch mean {statistics.mean(ratios):.3f} "
                f"median {statistics.median(ratios):.3f} max {max(ratios):.3f} min {min(ratios):.3f}"
            )
    return results


def plot(out: Path, results: list[tuple]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for ax, (label, col) in zip(
        axes, (("eager (host launch overhead included)", 6), ("CUDA graph (device time)", 9)), strict=True
    ):
        for name, color in (("fp32", "tab:blue"), ("bf16", "tab:orange")):
            pts = [(r[1] * r[2] * r[3], r[col]) for r in results if r[0] == name]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, c=color, label=name)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.5, color="gray", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("logits (N * V)")
        ax.set_title(label)
        ax.legend()
    axes[0].set_ylabel("time ours / torch F.cross_entropy (fwd+bwd)")
    fig.suptitle(f"parallel_cross_entropy vs PyTorch on {torch.cuda.get_device_name()}")
    fig.tight_layout()
    fig.savefig(out / "ce_sweep.png", dpi=120)


def tune() -> None:
    """Time the forward and backward kernels over a grid of block sizes and warps."""
    for name, dtype in DTYPES.items():
        for b, sq, v in ((1, 8192, 128256), (1, 256, 128256), (4, 1024, 32000)):
            x, t = make(b, sq, v, dtype)
            x = x.detach()
            for block in (4096, 8192, 16384, 32768):
                for warps in (4, 8, 16, 32):
                    tuning.MAX_FUSED_BLOCK["cuda"] = block
                    tuning.CUDA_WARPS["fwd"] = tuning.CUDA_WARPS["bwd"] = warps
                    _, lse, inv = general_path.forward(x, t, 0.0, True, -100)
                    g = torch.ones((), device="cuda")
                    fwd = time_ms(partial(general_path.forward, x, t, 0.0, True, -100), 10)
                    bwd = time_ms(partial(general_path.backward, g, x, t, lse, inv, 0.0, -100, None), 10)
                    tb = x.numel() * x.element_size() / 1e12
                    print(
                        f"tune {name} {(b, sq, v)} block {block:5d} warps {warps:2d}: "
                        f"fwd {fwd:.4f} ms ({tb / fwd * 1e3:.2f} TB/s)  "
                        f"bwd {bwd:.4f} ms ({2 * tb / bwd * 1e3:.2f} TB/s)"
                    )
    small = [(1, 16, 1024), (1, 64, 4096), (2, 128, 4096), (1, 256, 8192)]
    for b, sq, v in small:
        x, t = make(b, sq, v, torch.bfloat16)
        res = {}
        for force in ("1", "0"):
            with mock.patch.dict(os.environ, {"NPU_FIXES_CE_FORCE_TRITON": force}):
                res[force] = time_ms(step_ours(x, t), 50)
        pt = time_ms(step_torch(x, t), 50)
        print(
            f"route {(b, sq, v)}: triton {res['1']:.4f} ms, torch path {res['0']:.4f} ms, "
            f"F.cross_entropy {pt:.4f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for CSV and PNG")
    parser.add_argument("--sweep", type=int, default=1500, help="number of random shapes (0: skip the sweep)")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per sweep case")
    parser.add_argument("--tune", action="store_true", help="only time the block/warps grid")
    parser.add_argument("--baseline", help="module of an earlier implementation for the fixed sweep")
    parser.add_argument("--no-typical", action="store_true", help="skip the typical shapes")
    parser.add_argument("--no-fixed-sweep", action="store_true", help="skip the fixed sweep")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if args.tune:
        tune()
        return
    machine_info(args.out)
    hbm = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {hbm / 1e12:.2f} TB/s (read + write)")
    if not args.no_typical:
        typical(args.out, reps=20)
    with open(args.out / "ce_summary.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["metric", "value"])
        writer.writerow(["device", torch.cuda.get_device_name()])
        writer.writerow(["hbm_copy_bytes_per_s", hbm])
        bandwidth_and_memory(writer, hbm, reps=10)
        leak(writer)
        if not args.no_fixed_sweep:
            baseline = importlib.import_module(args.baseline) if args.baseline else None
            rows = eager_sweep(args.out, baseline, reps=10)
            for key in ("ours_wall_over_torch", "ours_graph_over_torch", "base_wall_over_torch"):
                if key in rows[0]:
                    vals = [float(r[key]) for r in rows]
                    writer.writerow([f"fixed_sweep_{key}_mean", statistics.mean(vals)])
                    writer.writerow([f"fixed_sweep_{key}_max", max(vals)])
    if args.sweep:
        plot(args.out, sweep(args.out, args.sweep, args.reps))


if __name__ == "__main__":
    main()
