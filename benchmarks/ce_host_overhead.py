"""Host time of one cross entropy call and where it goes, on a CUDA GPU.

Small problems and small training steps are bound by the host: what counts there is the CPU
time a call spends before its kernels are queued. Printed, side by side in one run:

* host microseconds per forward+backward call (tiny shape, so the GPU never holds the host
  back) for ours, PyTorch's and Liger's (when importable);
* the pieces of ours: each Triton launch alone, the tensor allocations, the argument checks;
* a cProfile of ours, top entries by own time;
* device time (CUDA-graph replay) and eager time at the training shape of
  ``examples/ce_long_run.py`` (16 x 256 x 32000, bf16), PyTorch in bf16 and upcast to fp32.

    python benchmarks/ce_host_overhead.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
from ce_benchmark import graph_ms, liger_cross_entropy, make, step_liger, step_ours, step_torch, time_ms

from npu_fixes.ops import cross_entropy as ce
from npu_fixes.ops import cross_entropy_kernels as k


def host_us(fn: Callable[[], object], calls: int = 500) -> float:
    """Median over 5 rounds of host microseconds per call (the GPU is synced between rounds)."""
    rounds = []
    for _ in range(6):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(rounds[1:])[2]


def pieces(x: torch.Tensor, t: torch.Tensor) -> list[tuple[str, float]]:
    """Host time of the parts of one reducing forward+backward of ours."""
    n, v = t.numel(), x.shape[-1]
    cores = ce._num_cores(x.device)
    cfg = ce._launch_config(n, v, "cuda", cores)
    loss = torch.empty(n, device="cuda")
    lse = torch.empty(n, device="cuda")
    mean = torch.empty((), device="cuda")
    inv = torch.empty((), device="cuda")
    grad = torch.empty_like(x)
    go = torch.ones((), device="cuda")
    xd = x.detach()

    def fwd() -> None:
        k.ce_forward_kernel[(cfg.row_programs, cfg.splits)](
            xd, *xd.stride(), t, *t.stride(), loss, lse, loss, n, t.shape[1], v, 0, v, cfg.chunk,
            cfg.splits, cfg.row_programs, 0.0, -100, BLOCK=cfg.block, V_CONTIG=True, FUSED=True,
            SMOOTH=False, num_warps=cfg.fwd_warps)

    def mean_kernel() -> None:
        k.ce_mean_kernel[(1,)](loss, t, *t.stride(), mean, inv, n, t.shape[1], -100, BLOCK_R=1024)

    def bwd() -> None:
        k.ce_backward_kernel[(cfg.row_programs, cfg.splits)](
            xd, *xd.stride(), grad, *grad.stride(), t, *t.stride(), lse, go, 0, 0, inv, n,
            t.shape[1], v, 0, v, cfg.chunk, cfg.row_programs, 0.0, -100, BLOCK=cfg.block,
            HAS_SCALE=True, X_CONTIG=True, G_CONTIG=True, num_warps=cfg.bwd_warps)

    def allocs() -> None:
        torch.empty(n, dtype=torch.float32, device="cuda")
        torch.empty(n, dtype=torch.float32, device="cuda")
        loss.new_empty(())
        loss.new_empty(())
        torch.empty_like(xd)

    return [
        ("forward kernel launch", host_us(fwd)),
        ("mean kernel launch", host_us(mean_kernel)),
        ("backward kernel launch", host_us(bwd)),
        ("5 tensor allocations", host_us(allocs)),
        ("argument checks (_validate)", host_us(lambda: ce._validate(x, t, 0.0))),
        ("launch config", host_us(lambda: ce._launch_config(n, v, "cuda", cores))),
    ]


class _Identity(torch.autograd.Function):
    """A Python autograd function that does nothing: the cost of the mechanism alone."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        return grad


@triton.jit
def _noop_kernel(x_ptr):
    pass


def layers(x: torch.Tensor, t: torch.Tensor) -> list[tuple[str, float]]:
    """Host time of ours, layer by layer, against PyTorch's and the bare mechanisms."""
    v = x.shape[-1]
    xd = x.detach()
    fwd = ce._forward(xd, t, 0.0, True, -100)
    small = torch.randn(16, device="cuda", requires_grad=True)

    def ours_forward_only() -> None:
        ce.parallel_cross_entropy(x, t, reduce_loss=True)

    def ours_backward_only() -> None:
        ce._backward(torch.ones((), device="cuda"), xd, t, fwd[1], fwd[2], 0.0, -100, None)

    return [
        ("ours fwd+bwd (autograd.grad)", host_us(step_ours(x, t))),
        ("ours fwd+bwd (loss.backward)",
         host_us(lambda: ce.parallel_cross_entropy(x, t, reduce_loss=True).backward())),
        ("ours forward, graph built", host_us(ours_forward_only)),
        ("ours _forward, no autograd", host_us(lambda: ce._forward(xd, t, 0.0, True, -100))),
        ("ours _backward, no autograd", host_us(ours_backward_only)),
        ("torch fwd+bwd (loss.backward)", host_us(
            lambda: F.cross_entropy(x.view(-1, v), t.view(-1), ignore_index=-100).backward())),
        ("torch forward, graph built", host_us(
            lambda: F.cross_entropy(x.view(-1, v), t.view(-1), ignore_index=-100))),
        ("identity Function fwd+bwd", host_us(lambda: _Identity.apply(small).sum().backward())),
        ("C++ only clone fwd+bwd", host_us(lambda: small.clone().sum().backward())),
        ("empty Triton kernel launch", host_us(lambda: _noop_kernel[(1,)](small))),
    ]


def main() -> None:
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    x, t = make(1, 16, 1024, torch.float32)
    contenders = {"ours": step_ours(x, t), "torch": step_torch(x, t)}
    if liger_cross_entropy is not None:
        contenders["liger"] = step_liger(x, t)
    print("\n# host us per forward+backward call, shape 1x16x1024 fp32, reduce_loss")
    for name, fn in contenders.items():
        fn()
        print(f"{name:8s} {host_us(fn):8.1f}")
    print("\n# host us, layer by layer")
    for name, us in layers(x, t):
        print(f"{name:30s} {us:8.1f}")
    print("\n# host us of the pieces of ours")
    for name, us in pieces(x, t):
        print(f"{name:30s} {us:8.1f}")

    prof = cProfile.Profile()
    ours = contenders["ours"]
    prof.enable()
    for _ in range(300):
        ours()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    print("\n# cProfile of 300 calls of ours, by own time\n" + text.getvalue())

    print("# training shape 16x256x32000 bf16, reduce_loss: device ms (graph replay), eager ms")
    x, t = make(16, 256, 32000, torch.bfloat16)
    v = x.shape[-1]
    shapes = {
        "ours (bf16 in)": step_ours(x, t),
        "torch bf16": step_torch(x, t),
        "torch fp32 upcast": lambda: torch.autograd.grad(
            F.cross_entropy(x.view(-1, v).float(), t.view(-1), ignore_index=-100), x
        ),
    }
    for name, fn in shapes.items():
        print(f"{name:20s} {graph_ms(fn, 20):7.3f} {time_ms(fn, 20):7.3f}")


if __name__ == "__main__":
    main()
