"""rsplit-nonsum: the cross-core r-axis split is only used for ``sum`` reductions.

- **Defect**: ``_npu_rsplit_outer_applicable`` checks that the kernel has one reduction and
  that it is not a Welford, but not which reduction it is. The combine kernel of the split
  always adds the per-core partials, so an OUTER ``max``/``min``/``prod``/``argmax`` that
  gets split returns the sum of partial results: silently wrong values, no error.
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable`` (the same predicate as
  rsplit-outer, which looks at outputs and tree shape and lets every type through).
- **Probe**: does the predicate accept an OUTER ``max`` kernel? (one live output, one flat
  reduction node, hf_Bert sizes 2048 -> 768).
- **Fix**: a kernel is handed to the predicate only if every reduction node it holds is a
  ``sum``; any other kernel, or one whose reduction types cannot be read, is not split (it
  then compiles without the split, as any rejected kernel does). For ``sum`` kernels the
  predicate decides as before.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import TARGET, narrow_predicate, predicate_accepts

#: The one reduction type whose partials the split's combine step may add up.
ADDITIVE = "sum"


def split_allowed(upstream: bool, reduction_types: Sequence[Any] | None) -> bool:
    """The corrected decision: upstream's, narrowed to kernels whose reductions are all
    ``sum``. ``None`` or an empty list (types unknown) rejects."""
    return bool(upstream and reduction_types and all(t == ADDITIVE for t in reduction_types))


def reduction_types(kernel: Any) -> list[Any] | None:
    """The ``reduction_type`` of each reduction node of a live kernel; None when they
    cannot be read."""
    try:
        return [node.node.data.reduction_type for node in kernel.features.reduction_nodes()]
    except Exception:  # noqa: BLE001 - unreadable: the caller rejects
        return None


def kernel_allows_split(kernel: Any) -> bool:
    """:func:`split_allowed` on a live kernel with upstream's verdict taken as yes: whether
    every reduction it holds is a ``sum``."""
    return split_allowed(True, reduction_types(kernel))


# -- probe -------------------------------------------------------------------------------
def stand_in_kernel(module: types.ModuleType, rtype: str) -> types.SimpleNamespace:
    """An OUTER reduction kernel of hf_Bert sizes (2048 rows into a 1x768 output) with one
    live output and one flat reduction node: every check but the type lets it split."""
    import sympy

    NS = types.SimpleNamespace
    reduction = NS(node=NS(data=NS(reduction_type=rtype)))
    features = NS(
        get_reduction_hint=lambda: module.ReductionHint.OUTER,
        scheduler_nodes=lambda: [reduction],
        reduction_nodes=lambda: [reduction],
        reduction_numel=sympy.Integer(2048),
    )
    x_tree = NS(is_reduction=False, is_loop=False, tree_node_mapping={},
                nodes={"x0": NS(name="x0", length=sympy.Integer(768))})
    r_tree = NS(is_reduction=True, is_loop=False, tree_node_mapping={},
                nodes={"r0_1": NS(name="r0_1", length=sympy.Integer(2048))})
    return NS(inside_reduction=True, features=features, range_trees=[x_tree, r_tree],
              args=NS(output_buffers={"buf1": "out_ptr0"}, inplace_buffers={}))


def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about the stand-in kernel as an OUTER ``max`` (the ``sum``
    form is asked too, for the detail only). A predicate that raises makes the probe raise:
    the registry reports the fix ``failed`` (the audit an error) and leaves the target alone."""
    accepts_max = predicate_accepts(module, stand_in_kernel(module, "max"))
    accepts_sum = predicate_accepts(module, stand_in_kernel(module, ADDITIVE))
    if accepts_max:
        return Probe(True, f"{TARGET} accepts an OUTER max kernel: its partials would be added")
    control = "accepts" if accepts_sum else "also rejects"
    return Probe(False, f"{TARGET} rejects an OUTER max kernel ({control} the same kernel as sum)")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, kernel_allows_split)


FIX = Fix(
    name="rsplit-nonsum",
    about=About(
        symptom=(
            "silently wrong OUTER `max`/`min`/`prod`/`argmax` reductions: the cross-core split's combine adds"
            " the partials"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
