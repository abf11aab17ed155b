"""The eager fast path (CUDA, one device): per-signature plans and direct launches.

An eager call on a CUDA tensor is host-bound below some 10-30M logits, so each microsecond of
host time per call counts there. Per input signature (shapes, strides, dtypes, address bits
of the caller's tensors, arguments and tunables) a plan holds the launch configuration, the
workspace layout and the compiled kernels; a call then does one allocation (lse, loss rows,
split partials, mean and 1/count share one fp32 workspace) and one direct launch per
direction. The first call of a signature launches through Triton's JIT with the very same
arguments (tensor views where the direct launch passes addresses) and keeps the compiled
kernel. Anything else (CPU/NPU, CUDA graph capture, NPU_FIXES_CE_CHECK=1, routing to
PyTorch, another current device, launch hooks, no FAST_LAUNCH) takes the general path.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ...shim import switches
from . import routing, tuning
from .direct_launch import fast_protocol, launcher, load_kernels, no_launch_hooks, raw_stream
from .launch_config import cached_config
from .routing import CE_CHECK, switch
from .triton_path import device_guard, sync_counter

_cuda_get_device = getattr(torch._C, "_cuda_getDevice", None)
_capturing_now = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)
_COUNTER_PTRS: dict[tuple[int, int], int] = {}  # (device, stream) -> address of its sync counter


class Plan:
    """What an eager forward+backward of one input signature needs, computed once."""

    __slots__ = ("bwd", "cfg", "fused", "fwd", "grid", "inv", "lse", "loss", "numel", "out_like", "part",
                 "rest", "reduce", "bwd_rest", "tail", "n_rows", "shape", "ws_like", "x_strides", "t_strides",
                 "vocab")


def _plan(inp: Tensor, n_rows: int, vocab: int, x_strides: tuple[int, ...], t_strides: tuple[int, ...],
          eps: float, reduce_loss: bool, ignore_idx: int, force: bool | None) -> Plan | None:
    """A new plan, or ``None`` where the general path must run (PyTorch route, no last-program
    tail: several launches)."""
    kind = inp.device.type
    if n_rows * vocab == 0 or (force is None and not routing.default_route(kind, vocab, n_rows)):
        return None
    cfg = cached_config(n_rows, vocab, inp.device, None)
    fused = cfg.splits == 1
    tail = reduce_loss or not fused
    if tail and not tuning.LAST_PROGRAM_TAIL.get(kind, False):
        return None
    p = Plan()
    p.cfg, p.fused, p.tail, p.reduce, p.n_rows, p.vocab = cfg, fused, tail, reduce_loss, n_rows, vocab
    p.shape, p.x_strides, p.t_strides = tuple(inp.shape), x_strides, t_strides
    p.grid = (cfg.row_programs, cfg.splits)
    rows = (n_rows + 3) // 4 * 4  # every piece starts 16-byte aligned, as the JIT saw it
    off = 0
    p.loss = None  # the per-token loss has its own tensor (it is returned)
    if reduce_loss:
        p.loss, off = 0, rows
    p.lse, off = off, off + rows
    p.part = p.loss if fused else off
    if not fused:
        off += 4 * cfg.splits * rows  # (S, 4, N) with N padded: the kernel's stride is N, within it
    p.inv = off if reduce_loss else p.lse
    p.numel = off + 4 if reduce_loss else off
    # What to allocate the workspace and the loss like: one fp32 element expanded to the plan's
    # sizes (reshaped where that is one element: an expanded one keeps its 0 strides), so that
    # ``torch.empty_like``, cheaper to call than ``new_empty`` with a dtype, gives contiguous
    # tensors on the input's device.
    one = torch.empty((), dtype=torch.float32, device=inp.device)
    p.ws_like, p.out_like = (
        one.reshape(shape) if math.prod(shape) == 1 else one.expand(shape)
        for shape in ((p.numel,), () if reduce_loss else p.shape[:2])
    )
    p.rest = (n_rows, p.shape[1], vocab, 0, vocab, cfg.chunk, cfg.splits, cfg.row_programs, eps, ignore_idx,
              cfg.block, x_strides[2] == 1, fused, eps > 0.0, tail, reduce_loss,
              tuning.TAIL_BLOCK)  # fmt: skip
    p.bwd_rest = (n_rows, p.shape[1], vocab, 0, vocab, cfg.chunk, cfg.row_programs, eps, ignore_idx,
                  cfg.block, reduce_loss, x_strides[2] == 1)  # fmt: skip
    p.fwd = None
    p.bwd = {}
    return p


PLANS: dict[tuple[Any, ...], Plan | None] = {}


def _counter_ptr(device: torch.device, index: int, stream: int) -> int:
    ptr = _COUNTER_PTRS.get((index, stream))
    if ptr is None:
        ptr = _COUNTER_PTRS[(index, stream)] = sync_counter(device).data_ptr()
    return ptr


def fast_forward(ctx: Any, inp: Tensor, target: Tensor, eps: float, reduce_loss: bool,
                 ignore_idx: int) -> Tensor | None:
    """The eager forward through a plan; ``None``: take the general path."""
    device = inp.device
    kind = "cuda" if inp.is_cuda else device.type
    if not tuning.FAST_LAUNCH.get(kind, False):
        return None
    force = None
    if not routing.switches_unset():
        force = switch(switches.CE_FORCE_TRITON)
        if force is False or switch(CE_CHECK):
            return None
    index = device.index
    stream = None
    if kind == "cuda":
        if _cuda_get_device() != index or _capturing_now() or not fast_protocol():
            return None
        stream = raw_stream(index)
    x_strides, t_strides = inp.stride(), target.stride()
    key = (inp.shape, x_strides, inp.dtype, inp.data_ptr() & 15, t_strides, target.dtype,
           target.data_ptr() & 15, eps, reduce_loss, ignore_idx, kind, index, force, tuning.WAVES,
           tuning.MAX_FUSED_BLOCK.get(kind), tuning.CUDA_WARPS["fwd"], tuning.CUDA_WARPS["bwd"],
           tuning.LAST_PROGRAM_TAIL.get(kind))  # fmt: skip
    try:
        plan = PLANS[key]
    except KeyError:
        d0, d1, vocab = inp.shape
        plan = _plan(inp, d0 * d1, vocab, x_strides, t_strides, eps, reduce_loss, ignore_idx, force)
        if len(PLANS) >= 4096:
            PLANS.clear()
        PLANS[key] = plan
    if plan is None:
        return None
    # The loss is returned: its own tensor (not a view of the saved workspace, which an in-place
    # change of the loss would then invalidate for the backward).
    ws = torch.empty_like(plan.ws_like)
    out = torch.empty_like(plan.out_like)
    known = plan.fwd
    if known is not None and no_launch_hooks(load_kernels().RUNTIME_KNOBS):
        w, o = ws.data_ptr(), out.data_ptr()
        loss_ptr, lse_ptr = (w, w + 4 * plan.lse) if reduce_loss else (o, w)
        known[0](
            plan.grid[0], plan.grid[1], 1, stream, *known[1], inp.data_ptr(), *x_strides,
            target.data_ptr(), *t_strides, loss_ptr, lse_ptr, loss_ptr if plan.fused else w + 4 * plan.part,
            o if reduce_loss else lse_ptr, w + 4 * plan.inv,
            _counter_ptr(device, index, stream) if plan.tail else lse_ptr, *plan.rest,
        )  # fmt: skip
    else:  # first call of this signature (or launch hooks): through the JIT, views for addresses
        loss_t = ws[plan.loss:] if reduce_loss else out
        lse_t = ws[plan.lse:]
        compiled = load_kernels().ce_forward_kernel[plan.grid](
            inp, *x_strides, target, *t_strides, loss_t, lse_t, loss_t if plan.fused else ws[plan.part:],
            out if reduce_loss else lse_t, ws[plan.inv:], sync_counter(device) if plan.tail else lse_t,
            *plan.rest, num_warps=plan.cfg.fwd_warps,
        )  # fmt: skip
        if plan.fwd is None and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
            plan.fwd = launcher(compiled)
    ctx.save_for_backward(inp, target, ws)
    ctx.plan = plan
    return out


def fast_backward(ctx: Any, plan: Plan, grad_loss: Tensor) -> Tensor:
    """The eager backward of a forward that took ``fast_forward`` (no create_graph)."""
    inp, target, ws = ctx.saved_tensors
    inplace_grad = ctx.opts[3]
    grad = inp.detach() if inplace_grad else torch.empty_like(inp)
    go_strides = grad_loss.stride() if grad_loss.dim() == 2 else (0, 0)
    g_strides = grad.stride()
    index = inp.device.index
    key = (grad_loss.dtype, go_strides, grad_loss.data_ptr() & 15, g_strides, grad.data_ptr() & 15, index)
    known = plan.bwd.get(key)
    x_strides, t_strides = plan.x_strides, plan.t_strides
    if known is not None and _cuda_get_device() == index and no_launch_hooks(load_kernels().RUNTIME_KNOBS):
        # (a compiled kernel: CUDA)
        w = ws.data_ptr()
        known[0](
            plan.grid[0], plan.grid[1], 1, raw_stream(index), *known[1], inp.data_ptr(), *x_strides,
            grad.data_ptr(), *g_strides, target.data_ptr(), *t_strides, w + 4 * plan.lse,
            grad_loss.data_ptr(), *go_strides, w + 4 * plan.inv, *plan.bwd_rest, g_strides[2] == 1,
        )  # fmt: skip
    else:
        with device_guard(inp.device):
            compiled = load_kernels().ce_backward_kernel[plan.grid](
                inp, *x_strides, grad, *g_strides, target, *t_strides, ws[plan.lse:], grad_loss, *go_strides,
                ws[plan.inv:], *plan.bwd_rest, g_strides[2] == 1, num_warps=plan.cfg.bwd_warps,
            )  # fmt: skip
        if key not in plan.bwd and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
            plan.bwd[key] = launcher(compiled)
    if inplace_grad:
        torch.autograd.graph.increment_version(grad)
    return grad


def saved_for_general_backward(ctx: Any) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """``(inp, target, lse, inv_count)`` of a forward that took ``fast_forward``."""
    inp, target, ws = ctx.saved_tensors
    plan = ctx.plan
    lse = ws[plan.lse : plan.lse + plan.n_rows]
    return inp, target, lse, ws[plan.inv] if plan.reduce else None
