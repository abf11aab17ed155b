"""``make_launcher`` probes: launch a stand-in full-reduction kernel through the live
launcher and read the grids it asks for (scalar-reduction-grid, nonlinearize-grid,
triton36-launcher)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from ...shim.stand_in_kernel import StandInBinary, launched_grids, stand_in_binary, stand_in_result

TARGET = "NPUTritonCompileResult.make_launcher"
NODES_KEY = "npu_num_x_nodes"


def reduction_kernel() -> StandInBinary:
    """A stand-in binary for ``kernel(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK, R0_BLOCK)``
    (the last two constexpr): a full reduction to one value."""
    return stand_in_binary(["in_ptr0", "out_ptr0", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"], [4, 5])


def launched_grid(module: types.ModuleType, meta: Mapping[str, Any], xblock: int, xnumel: int) -> list[int]:
    """The grids the live launcher of :func:`reduction_kernel` (``XBLOCK=xblock``,
    ``R0_BLOCK=64``, inductor meta ``meta``) asks for on 48 cores, launched with ``xnumel``."""
    result = stand_in_result(module, reduction_kernel(), {"XBLOCK": xblock, "R0_BLOCK": 64}, meta)
    return launched_grids(result, {"xnumel": xnumel})
