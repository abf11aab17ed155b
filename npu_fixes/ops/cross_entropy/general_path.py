"""The general path: forward and backward on the routed path (Triton or PyTorch), any
device, any group, with the optional target check. The eager fast path (eager_plans) falls
back to it."""

from __future__ import annotations

import torch
from torch import Tensor

from . import torch_path as torch_impl
from . import triton_path as triton_impl
from .routing import CE_CHECK, route, switch, use_triton
from .sharding import Shard


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _check_targets(target: Tensor, vocab: int, ignore_idx: int) -> None:
    target = target.long()  # compare integer values, not ignore_idx cast to a narrow dtype
    bad = (target != ignore_idx) & ((target < 0) | (target >= vocab))
    if bool(bad.any()):
        first = target[bad][0].item()
        raise ValueError(
            f"target holds {int(bad.sum())} value(s) outside [0, {vocab}) that are not "
            f"ignore_idx={ignore_idx}, e.g. {first}"
        )


def forward(
    inp: Tensor,
    target: Tensor,
    eps: float,
    reduce_loss: bool,
    ignore_idx: int,
    shard: Shard | None = None,
    triton_path: bool | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Loss (per token ``(D0, D1)`` or the 0-d mean), per-row lse, and 1/n_valid (0-d;
    ``None`` when not reducing).

    With a ``shard`` the loss and lse are those of the whole vocabulary, on every rank.
    ``triton_path``: the path (default: :func:`~.routing.route`).
    """
    if switch(CE_CHECK) and not _capturing(inp.device):
        _check_targets(target, inp.shape[-1] if shard is None else shard.total, ignore_idx)
    if triton_path is None:
        triton_path = route(inp, shard)
    if triton_path:
        return triton_impl.forward(inp, target, eps, ignore_idx, shard, reduce_loss)
    d0, d1, _ = inp.shape
    if target.dtype != torch.int64:
        target = target.long()  # once for the PyTorch path's comparisons (the kernels widen)
    if inp.numel() > 0:
        loss, lse = torch_impl.forward(inp, target, eps, ignore_idx, shard)
    else:
        loss = torch.zeros((d0 * d1,), dtype=torch.float32, device=inp.device)
        lse = torch.zeros((d0 * d1,), dtype=torch.float32, device=inp.device)
    if not reduce_loss:
        return loss.view(d0, d1), lse, None
    inv_count = 1.0 / (target != ignore_idx).sum().clamp(min=1).to(torch.float32)  # widened above
    return loss.sum() * inv_count, lse, inv_count


def backward(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor | None,
    eps: float,
    ignore_idx: int,
    out: Tensor | None,
    offset: int = 0,
    total: int | None = None,
    triton_path: bool | None = None,
) -> Tensor:
    """Gradient of the loss w.r.t. ``inp``; written into ``out`` when given.

    ``inp`` may be the slice starting at ``offset`` of a ``total``-entry vocabulary (default:
    the whole one); ``lse`` is the whole vocabulary's, so nothing is exchanged.
    ``triton_path``: the path (default: :func:`~.routing.use_triton`; the forward's choice
    from autograd).
    """
    total = inp.shape[-1] if total is None else total
    scale = inv_count if inv_count is not None and inv_count.dim() == 0 else None
    if inp.numel() == 0:
        return torch.zeros_like(inp) if out is None else out
    if use_triton(inp) if triton_path is None else triton_path:
        return triton_impl.backward(
            grad_loss,
            inp,
            target,
            lse,
            scale,
            eps,
            ignore_idx,
            offset,
            total,
            torch.empty_like(inp) if out is None else out,
        )
    grad = torch_impl.backward(grad_loss, inp, target, lse, scale, eps, ignore_idx, offset, total)
    return grad if out is None else out.copy_(grad)
