"""What the host's stock Triton frontend lacks of triton-ascend's language, for building the
backend's kernels to Triton IR on CPU (``rank_mismatch.triton_ir``)."""

from __future__ import annotations

import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers


@triton.jit
def max2(a, dim):
    """The backend's ``max2`` is ``tl.max(a, dim, propagate_nan=True)``, a keyword only
    triton-ascend's ``tl.max`` takes: here Inductor's own NaN-keeping max reduction (a
    ``tl.where``, no min/max op in the IR) stands in for it."""
    return tl.reduce(a, dim, triton_helpers.maximum)
