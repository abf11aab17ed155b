"""Custom ops ``npu_fixes::cross_entropy_fwd/bwd``: the general path under ``torch.compile``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from . import general_path
from .autograd import DOUBLE_BACKWARD


@torch.library.custom_op("npu_fixes::cross_entropy_fwd", mutates_args=())
def cross_entropy_fwd(
    inp: Tensor, target: Tensor, label_smoothing: float, reduce_loss: bool, ignore_idx: int
) -> tuple[Tensor, Tensor, Tensor]:
    loss, lse, inv_count = general_path.forward(inp, target, label_smoothing, reduce_loss, ignore_idx)
    return loss, lse, loss.new_empty((0,)) if inv_count is None else inv_count


@cross_entropy_fwd.register_fake
def _fwd_fake(
    inp: Tensor, target: Tensor, label_smoothing: float, reduce_loss: bool, ignore_idx: int
) -> tuple[Tensor, Tensor, Tensor]:
    d0, d1, _ = inp.shape
    f32 = {"dtype": torch.float32, "device": inp.device}
    lse = torch.empty((d0 * d1,), **f32)
    if reduce_loss:
        return torch.empty((), **f32), lse, torch.empty((), **f32)
    return torch.empty((d0, d1), **f32), lse, torch.empty((0,), **f32)


@torch.library.custom_op("npu_fixes::cross_entropy_bwd", mutates_args=())
def cross_entropy_bwd(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor,
    label_smoothing: float,
    ignore_idx: int,
) -> Tensor:
    return general_path.backward(grad_loss, inp, target, lse, inv_count, label_smoothing, ignore_idx, None)


@cross_entropy_bwd.register_fake
def _bwd_fake(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor,
    label_smoothing: float,
    ignore_idx: int,
) -> Tensor:
    return torch.empty_like(inp)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor, Tensor]) -> None:
    inp, target, label_smoothing, _, ignore_idx = inputs
    _, lse, inv_count = output
    ctx.save_for_backward(inp, target, lse, inv_count)
    ctx.label_smoothing = label_smoothing
    ctx.ignore_idx = ignore_idx
    ctx.mark_non_differentiable(lse, inv_count)


def _fwd_backward(
    ctx: Any, grad_loss: Tensor, _grad_lse: Any, _grad_inv: Any
) -> tuple[Tensor, None, None, None, None]:
    inp, target, lse, inv_count = ctx.saved_tensors
    grad = cross_entropy_bwd(grad_loss, inp, target, lse, inv_count, ctx.label_smoothing, ctx.ignore_idx)
    return grad, None, None, None, None


cross_entropy_fwd.register_autograd(_fwd_backward, setup_context=_setup_context)


def _no_setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    pass


def _bwd_backward(ctx: Any, grad: Tensor) -> None:
    raise RuntimeError(DOUBLE_BACKWARD)


cross_entropy_bwd.register_autograd(_bwd_backward, setup_context=_no_setup)
