"""The autograd functions of the eager calls, and the double-backward guard."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor

from . import eager_plans, general_path
from .routing import route
from .sharding import shard

DOUBLE_BACKWARD = (
    "parallel_cross_entropy: double backward is not supported (its backward is not itself "
    "differentiable); use torch.nn.functional.cross_entropy for second derivatives"
)


class NoDoubleBackward(torch.autograd.Function):
    """Identity on a gradient built with ``create_graph=True``, tied to the tensors it came
    from (``sources``): differentiating it raises instead of giving a wrong second derivative
    or autograd's "does not require grad"."""

    @staticmethod
    def forward(ctx: Any, grad: Tensor, *sources: Tensor) -> Tensor:
        return grad

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[None, ...]:
        raise RuntimeError(DOUBLE_BACKWARD)


class CrossEntropyFunction(torch.autograd.Function):
    """Eager autograd (cheaper to dispatch than the custom op); same forward and backward.
    ``opts``: ``(label_smoothing, reduce_loss, ignore_idx, inplace_grad, shard)``, one argument
    rather than five (each argument costs ``apply`` host time)."""

    @staticmethod
    def forward(ctx: Any, inp: Tensor, target: Tensor, opts: tuple[Any, ...]) -> Tensor:
        ctx.opts = opts
        label_smoothing, reduce_loss, ignore_idx, inplace_grad, group_shard = opts
        if group_shard is None:
            loss = eager_plans.fast_forward(ctx, inp, target, label_smoothing, reduce_loss, ignore_idx)
            if loss is not None:
                return loss
        ctx.plan = None
        ctx.triton_path = triton_path = route(inp, group_shard)  # the backward takes the forward's path
        loss, lse, inv_count = general_path.forward(
            inp, target, label_smoothing, reduce_loss, ignore_idx, group_shard, triton_path
        )
        # With inplace_grad, saving inp lets autograd's version check reject a second
        # backward (inp then holds the gradient) instead of reading overwritten logits.
        ctx.save_for_backward(inp, target, lse, inv_count)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor | None, None, None]:
        plan = ctx.plan
        create_graph = torch.is_grad_enabled()  # only under backward(create_graph=True)
        if plan is not None:
            if not create_graph:
                return eager_plans.fast_backward(ctx, plan, grad_loss), None, None
            inp, target, lse, inv_count = eager_plans.saved_for_general_backward(ctx)
            triton_path = True
        else:
            inp, target, lse, inv_count = ctx.saved_tensors
            triton_path = ctx.triton_path
        eps, _, ignore_idx, inplace_grad, group_shard = ctx.opts
        offset, total = (0, None) if group_shard is None else (group_shard.offset, group_shard.total)
        out = inp.detach() if inplace_grad else None
        with torch.no_grad() if create_graph else nullcontext():
            grad = general_path.backward(
                grad_loss, inp, target, lse, inv_count, eps, ignore_idx, out, offset, total, triton_path
            )
        if out is not None:
            torch.autograd.graph.increment_version(out)
        if create_graph:
            grad = NoDoubleBackward.apply(grad, inp, grad_loss)
        return grad, None, None


_c_apply = super(torch.autograd.Function, CrossEntropyFunction).apply  # the C++ apply


def apply(inp: Tensor, target: Tensor, opts: tuple[Any, ...]) -> Tensor:
    """``CrossEntropyFunction.apply``, without the Python wrapper's own work where functorch
    transforms are off (it binds defaults for ``setup_context`` style functions, which this is
    not, and unwraps dead functorch wrappers, which a tensor only is inside a transform)."""
    if torch._C._are_functorch_transforms_active():
        return CrossEntropyFunction.apply(inp, target, opts)
    return _c_apply(inp, target, opts)


def eager_cross_entropy(
    inp: Tensor,
    target: Tensor,
    label_smoothing: float,
    reduce_loss: bool,
    ignore_idx: int,
    inplace_grad: bool,
    group: Any,
) -> Tensor:
    """An eager call with a process group: its shard first (exchanged at the group's first call)."""
    group_shard = shard(group, inp.shape[-1], inp.device)
    return apply(inp, target, (label_smoothing, reduce_loss, ignore_idx, inplace_grad, group_shard))


# Under torch.compile: a graph break for what the custom ops cannot express (collectives on a
# process group object, writing the gradient into the input).
graph_break_cross_entropy = torch.compiler.disable(eager_cross_entropy)
