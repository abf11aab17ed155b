"""One module per defect; :data:`MODULES` is the one list of them, in their fixed order:
the five reported torch_npu backend fixes (downcast-strides just before boundary-downcast, the
guard int64-past-int32 just after it: on a target they share, the one applied first is the
innermost layer, and boundary-downcast's rebuilt wrapper replaces the layers below it), the other
upstream fixes of the same weeks,
the guards for defects only an upgrade removes, the fixes only the published wheels have,
the fixes of defects no published state has fixed, then the Transformer Engine drop-in.

Adding a fix is one module (named like the fix, with underscores) and one line here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..shim.fix import Fix

MODULES = (
    "rsplit_outer",
    "dualview_fold",
    "launch_grid",
    "downcast_strides",
    "boundary_downcast",
    "int64_past_int32",
    "rng_capture_gate",
    "control_deps_lowering",
    "constant_index_shape",
    "auto_blockify_option",
    "scalar_reduction_grid",
    "rank_mismatch",
    "range_symbol_canon",
    "index_put_dtype",
    "rsplit_nonsum",
    "safe_stride_order",
    "nd_reduction",
    "promoted_epilogue",
    "slice_scatter_offset",
    "minmax_propagate_nan",
    "min2_propagate_nan",
    "local_scalar_dense_lowering",
    "masked_index_zerodiv",
    "nonlinearize_grid",
    "int32_address_wrap",
    "expand_reload_recursion",
    "permuted_full_reduction",
    "triton36_launcher",
    "triton36_combine_attrs",
    "rsplit_nested_range",
    "rsplit_epilogue",
    "rsplit_slice_tail",
    "rsplit_inner_static",
    "split_fused_fixpoint",
    "promoted_rtree_shape",
    "partial_view_fold",
    "downcast_workspace",
    "view_lowerings",
    "int64_minmax_identity",
    "widened_load_tail",
    "empty_cat_input",
    "dynamic_r0_index",
    "flat_rnode_mask",
    "modular_fold_bound",
    "mixed_leaf_xmask",
    "integer_input_dtype",
    "safe_softmax_guard",
    "pad_lane_nonfinite",
    "infinite_integer_fill",
    "int64_constant_range",
    "dualview_fold_definition",
    "promoted_tile_mask",
    "axis_split_self_reference",
    "alias_size_args",
    "upsample_symbolic_sizes",
    "widened_load_inner_axis",
    "float64_as_float32",
    "reduction_dim_rewrite",
    "rsplit_bare_store",
    "int64_arithmetic",
    "te_parallel_ce",
)

#: Names used by status, audit and ``NPU_FIXES_DISABLE``.
FIX_NAMES = tuple(module.replace("_", "-") for module in MODULES)


def all_fixes() -> tuple[Fix, ...]:
    """The fix records, in :data:`MODULES` order."""
    return tuple(importlib.import_module(f"{__name__}.{module}").FIX for module in MODULES)
