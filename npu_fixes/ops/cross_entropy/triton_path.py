"""The Triton path: forward (partials, finalize, mean; on CUDA one launch) and backward."""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor

from . import tuning
from .direct_launch import fast_key, launch, load_kernels, raw_stream
from .launch_config import Launch, cached_config
from .sharding import Shard, gather_partials

# One int64 counter per (device, stream) for the forward kernel's last-program tail: zero
# between launches (the last program resets it), and launches on one stream never overlap.
SYNC_COUNTERS: dict[tuple[Any, ...], Tensor] = {}


def sync_counter(device: torch.device) -> Tensor:
    """A zeroed int64 counter for one forward launch on the current stream of ``device``."""
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            # Its own counter, zeroed by a memset node at every replay: graphs captured on one
            # stream may be replayed on several at once.
            return torch.zeros((), dtype=torch.int64, device=device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        if raw_stream is not None:
            stream = raw_stream(index)
        else:
            stream = torch.cuda.current_stream(index).cuda_stream
        key: tuple[Any, ...] = (index, stream)
    else:
        key = (device.type, device.index)
    counter = SYNC_COUNTERS.get(key)
    if counter is None:
        counter = SYNC_COUNTERS[key] = torch.zeros((), dtype=torch.int64, device=device)
    return counter


def device_guard(device: torch.device) -> Any:
    """``device`` made current for the launches (CUDA), where it is not already."""
    if device.type == "cuda" and device.index != torch.cuda.current_device():
        return torch.cuda.device(device)
    return nullcontext()


def forward(
    inp: Tensor,
    target: Tensor,
    eps: float,
    ignore_idx: int,
    shard: Shard | None,
    reduce_loss: bool = False,
    cfg: Launch | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Loss (per row ``(D0, D1)``, or the 0-d mean with ``reduce_loss``), lse per row, and
    ``1/max(count, 1)`` (0-d; ``None`` without ``reduce_loss``).

    One launch on devices with ``tuning.LAST_PROGRAM_TAIL`` (no group); otherwise the forward
    kernel, then the finalize kernel for split rows (after the partials are gathered across
    the group) and the mean kernel.
    """
    d0, d1, vocab = inp.shape
    n_rows = d0 * d1
    device = inp.device
    if cfg is None:
        cfg = cached_config(n_rows, vocab, device, None if shard is None else shard.largest)
    f32 = torch.float32
    loss = torch.empty((d0, d1), dtype=f32, device=device)
    lse = torch.empty(n_rows, dtype=f32, device=device)
    fused = cfg.splits == 1 and shard is None
    tail = shard is None and (reduce_loss or not fused) and tuning.LAST_PROGRAM_TAIL.get(device.type, False)
    part = loss if fused else torch.empty((cfg.splits, 4, n_rows), dtype=f32, device=device)
    if tail and reduce_loss:
        mean = torch.empty((), dtype=f32, device=device)
        inv_count = torch.empty((), dtype=f32, device=device)
    else:
        mean = inv_count = lse  # not written
    offset, total = (0, vocab) if shard is None else (shard.offset, shard.total)
    smooth = eps > 0.0
    x_strides, t_strides = inp.stride(), target.stride()
    args = (
        inp, *x_strides, target, *t_strides, loss, lse, part, mean, inv_count,
        sync_counter(device) if tail else lse,
        n_rows, d1, vocab, offset, total, cfg.chunk, cfg.splits, cfg.row_programs, eps, ignore_idx,
        cfg.block, x_strides[2] == 1, fused, smooth, tail, tail and reduce_loss, tuning.TAIL_BLOCK,
    )  # fmt: skip
    key = None
    if fast_key(device):  # the buffers allocated above are aligned; the caller's may not be
        key = ("fwd", device.index, cfg, fused, tail, reduce_loss, smooth, inp.dtype, x_strides,
               inp.data_ptr() & 15, target.dtype, t_strides, target.data_ptr() & 15, n_rows, d1, vocab,
               offset, total, ignore_idx)  # fmt: skip
    kernels = load_kernels()
    with device_guard(device):
        launch(kernels.ce_forward_kernel, (cfg.row_programs, cfg.splits), args, cfg.fwd_warps, key)
        if not fused and not tail:
            if shard is not None:
                part = gather_partials(part, shard)
            block_r = 128
            kernels.ce_finalize_kernel[(math.ceil(n_rows / block_r),)](
                part,
                target,
                *target.stride(),
                loss,
                lse,
                n_rows,
                d1,
                part.shape[0],
                total,
                eps,
                ignore_idx,
                BLOCK_R=block_r,
            )
    if not reduce_loss:
        return loss, lse, None
    if not tail:
        mean, inv_count = _mean(loss, target, ignore_idx)
    return mean, lse, inv_count


def _mean(loss: Tensor, target: Tensor, ignore_idx: int) -> tuple[Tensor, Tensor]:
    """Mean loss over non-ignored rows and ``1/max(count, 1)``, both 0-d (the mean kernel)."""
    mean = loss.new_empty(())
    inv_count = loss.new_empty(())
    with device_guard(loss.device):
        load_kernels().ce_mean_kernel[(1,)](
            loss,
            target,
            *target.stride(),
            mean,
            inv_count,
            loss.numel(),
            target.shape[1],
            ignore_idx,
            BLOCK_R=1024,
        )
    return mean, inv_count


def backward(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    scale: Tensor | None,
    eps: float,
    ignore_idx: int,
    offset: int,
    total: int,
    out: Tensor,
    cfg: Launch | None = None,
) -> Tensor:
    """Gradient w.r.t. ``inp`` (the slice at ``offset`` of a ``total``-entry vocabulary),
    written into ``out``."""
    d0, d1, vocab = inp.shape
    n_rows = d0 * d1
    if cfg is None:
        cfg = cached_config(n_rows, vocab, inp.device, None)
    go_strides = grad_loss.stride() if grad_loss.dim() == 2 else (0, 0)
    x_strides, g_strides, t_strides = inp.stride(), out.stride(), target.stride()
    has_scale = scale is not None
    args = (
        inp, *x_strides, out, *g_strides, target, *t_strides, lse, grad_loss, *go_strides,
        scale if has_scale else lse, n_rows, d1, vocab, offset, total, cfg.chunk, cfg.row_programs, eps,
        ignore_idx, cfg.block, has_scale, x_strides[2] == 1, g_strides[2] == 1,
    )  # fmt: skip
    device = inp.device
    key = None
    if fast_key(device):  # every tensor may come from the caller (the custom op's backward)
        key = ("bwd", device.index, cfg, inp.dtype, x_strides, inp.data_ptr() & 15, out.dtype, g_strides,
               out.data_ptr() & 15, target.dtype, t_strides, target.data_ptr() & 15, lse.data_ptr() & 15,
               grad_loss.dtype, go_strides, grad_loss.data_ptr() & 15, has_scale,
               scale.dtype if has_scale else None, scale.data_ptr() & 15 if has_scale else None,
               n_rows, d1, vocab, offset, total, ignore_idx)  # fmt: skip
    with device_guard(device):
        launch(load_kernels().ce_backward_kernel, (cfg.row_programs, cfg.splits), args, cfg.bwd_warps, key)
    return out
