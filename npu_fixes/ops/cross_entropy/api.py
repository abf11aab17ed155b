"""The public function :func:`parallel_cross_entropy` and the checks of its arguments."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from .autograd import apply, eager_cross_entropy, graph_break_cross_entropy
from .custom_ops import cross_entropy_fwd

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Target dtypes taken as class indices; each value means its integer value (compared with
# ignore_idx and the vocabulary only after widening to int64). The unsigned types wider than
# uint8 are left out: PyTorch supports few operations on them.
_TARGET_DTYPES = frozenset((torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8))
_PROCESS_GROUP = getattr(torch.distributed, "ProcessGroup", None)  # None without distributed


def validate(inp: Any, target: Any, label_smoothing: float) -> None:
    """Raises ``TypeError`` or ``ValueError`` for logits, targets or smoothing that
    :func:`parallel_cross_entropy` does not take."""
    if not isinstance(inp, Tensor) or not isinstance(target, Tensor):
        if inp is None or target is None:
            missing = "inp" if inp is None else "target"
            raise TypeError(f"parallel_cross_entropy() missing required argument: {missing!r}")
        raise TypeError(
            f"inp and target must be tensors, got {type(inp).__name__} and {type(target).__name__}"
        )
    if inp.dim() != 3:
        raise ValueError(f"inp must be 3-D (B, SQ, V) or (SQ, B, V), got shape {tuple(inp.shape)}")
    if inp.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"inp dtype must be float32, bfloat16 or float16, got {inp.dtype}")
    if target.dtype not in _TARGET_DTYPES:
        raise TypeError(
            f"target must hold integer class indices (int64, int32, int16, int8 or uint8), "
            f"got dtype {target.dtype}"
        )
    if target.shape != inp.shape[:2]:
        raise ValueError(
            f"target shape {tuple(target.shape)} must equal inp.shape[:2] = {tuple(inp.shape[:2])} "
            f"(inp shape {tuple(inp.shape)})"
        )
    if target.device != inp.device:
        raise ValueError(f"inp is on {inp.device} but target is on {target.device}")
    if inp.shape[2] == 0 and inp.shape[0] * inp.shape[1] > 0:
        raise ValueError(f"inp has an empty vocabulary dimension: shape {tuple(inp.shape)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}")


def _check_group(group: Any) -> None:
    if _PROCESS_GROUP is None or not isinstance(group, _PROCESS_GROUP):
        raise TypeError(
            "dist_process_group must be None or a torch.distributed.ProcessGroup, got "
            f"{type(group).__name__} {group!r}"
        )


def may_overlap(t: Tensor) -> bool:
    """Whether elements of ``t`` may share memory: a stride 0 on a dimension of size > 1,
    or strides that do not nest (each larger than the span of the smaller ones). False
    positives only for interleaved layouts that logits do not have."""
    reach = 0  # offset span of the dimensions with smaller strides
    for stride, size in sorted(zip(t.stride(), t.shape, strict=True)):
        if size > 1:
            if stride <= reach:  # stride 0 included
                return True
            reach += stride * (size - 1)
    return False


def _take_deprecated_input(inp: Tensor | None, _input: Tensor) -> Tensor:
    if inp is not None:
        raise TypeError("parallel_cross_entropy() got both 'inp' and its deprecated name '_input'")
    warnings.warn(
        "parallel_cross_entropy: the '_input' keyword is deprecated, pass 'inp' instead",
        FutureWarning,
        stacklevel=3,
    )
    return _input


def parallel_cross_entropy(
    inp: Tensor | None = None,
    target: Tensor | None = None,
    label_smoothing: float = 0.0,
    reduce_loss: bool = False,
    dist_process_group: Any = None,
    ignore_idx: int = -100,
    is_cg_capturable: bool = False,
    *,
    inplace_grad: bool = False,
    _input: Tensor | None = None,
) -> Tensor:
    """Cross entropy of logits ``inp`` against class indices ``target``, in fp32.

    Args:
        inp: logits ``(B, SQ, V)`` or ``(SQ, B, V)``, float32/bfloat16/float16, any strides.
        target: class indices of shape ``inp.shape[:2]``, any strides; ``ignore_idx``
            marks tokens that give loss 0 and a zero gradient. Dtype int64, int32, int16,
            int8 or uint8: every value means its integer value (it is widened to int64
            before any comparison, so a uint8 label 156 is class 156, never ``-100``
            wrapped around; an ``ignore_idx`` the dtype cannot hold ignores nothing).
            Other dtypes (floating point, bool, complex, uint16/32/64) raise ``TypeError``.
        label_smoothing: ``eps`` as in ``torch.nn.functional.cross_entropy``.
        reduce_loss: return the mean over non-ignored tokens (0-d; 0 when all are ignored)
            instead of the per-token loss of shape ``inp.shape[:2]``. The count stays on
            the device: no host sync in forward or backward.
        dist_process_group: vocabulary-parallel group: each rank passes its contiguous slice
            of the vocabulary as ``inp`` (slices may differ in size; rank order = slice
            order) and the same global ``target``. Every rank gets the loss of the whole
            vocabulary and the gradient of its slice. Per call: one all-gather of 16 bytes
            per token (and chunk, when rows are few); a group's first call also all-gathers
            the slice sizes (one host sync), which then stay fixed for that group. All ranks
            take the same path (Triton or PyTorch), the one their group's largest slice gets,
            so no further exchange is needed to agree on it. ``None`` or a one-rank group:
            single device; anything but ``None`` or a ``torch.distributed.ProcessGroup``
            raises ``TypeError``.
        ignore_idx: target value to skip.
        is_cg_capturable: accepted for Transformer Engine compatibility. Every call is CUDA
            graph capturable: nothing syncs with the host (the optional
            ``NPU_FIXES_CE_CHECK=1`` check is skipped during capture), except a group's
            first call, which a capture's warm-up makes.
        inplace_grad: write the gradient into ``inp``'s storage during backward, so no
            logits-sized buffer is allocated. Trade-off: the logits are destroyed by the
            backward, a second backward through the graph (``retain_graph``) raises, and the
            call is a graph break under ``torch.compile``. Default ``False`` keeps ``inp``
            intact and returns a fresh gradient tensor (extra memory: 8 bytes per token).
            An ``inp`` whose elements share memory (an ``expand()``-ed tensor, any stride 0)
            raises ``ValueError``: there is no room for a gradient in it.
        _input: deprecated name of ``inp`` (as in Transformer Engine); ``FutureWarning``.

    Softmax, loss and gradient are computed in fp32; the gradient
    ``(softmax - (1-eps)*onehot - eps/V) * grad_output`` is rounded once to ``inp.dtype``.
    A target outside ``[0, V)`` that is not ``ignore_idx`` gives NaN for its loss and
    gradient (never an out-of-bounds read); ``NPU_FIXES_CE_CHECK=1`` raises instead.
    Eager calls go through a plain ``autograd.Function`` (on CUDA: one kernel launch per
    direction, launched directly from a plan cached per input signature); under
    ``torch.compile`` the same kernels run as custom ops ``npu_fixes::cross_entropy_fwd/bwd``
    (no graph break, except with ``inplace_grad=True`` or a ``dist_process_group``). First derivatives
    only: differentiating the gradient (double backward) raises ``RuntimeError``.
    """
    del is_cg_capturable  # no host syncs after a group's first call: every call may be captured
    if _input is not None:
        inp = _take_deprecated_input(inp, _input)
    validate(inp, target, label_smoothing)
    if dist_process_group is not None:
        _check_group(dist_process_group)
    if inplace_grad and may_overlap(inp):
        raise ValueError(
            "inplace_grad=True needs an inp whose elements do not share memory, got strides "
            f"{inp.stride()} for shape {tuple(inp.shape)} (an expand()-ed or stride-0 tensor?); "
            "pass inplace_grad=False or inp.contiguous()"
        )
    eps, reduce_loss, ignore_idx = float(label_smoothing), bool(reduce_loss), int(ignore_idx)
    if not torch.compiler.is_compiling():
        if dist_process_group is None:  # the common case, without a further call
            return apply(inp, target, (eps, reduce_loss, ignore_idx, inplace_grad, None))
        group = dist_process_group
        return eager_cross_entropy(inp, target, eps, reduce_loss, ignore_idx, inplace_grad, group)
    args = (inp, target, eps, reduce_loss, ignore_idx, inplace_grad, dist_process_group)
    if inplace_grad or dist_process_group is not None:
        return graph_break_cross_entropy(*args)
    return cross_entropy_fwd(inp, target, eps, reduce_loss, ignore_idx)[0]
