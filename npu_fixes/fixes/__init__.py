"""One module per defect; :func:`all_fixes` returns them in their fixed order: the five
torch_npu backend fixes, then the Transformer Engine drop-in."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..shim.fix import Fix

#: Names used by status, audit and ``NPU_FIXES_DISABLE``.
FIX_NAMES = (
    "rsplit-outer",
    "dualview-fold",
    "launch-grid",
    "boundary-downcast",
    "rng-capture-gate",
    "te-parallel-ce",
)


def all_fixes() -> tuple[Fix, ...]:
    """The fix records, in :data:`FIX_NAMES` order."""
    from . import (
        boundary_downcast,
        dualview_fold,
        launch_grid,
        rng_capture_gate,
        rsplit_outer,
        te_parallel_ce,
    )

    return (
        rsplit_outer.FIX,
        dualview_fold.FIX,
        launch_grid.FIX,
        boundary_downcast.FIX,
        rng_capture_gate.FIX,
        te_parallel_ce.FIX,
    )
