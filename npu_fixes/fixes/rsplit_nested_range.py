"""rsplit-nested-range: no cross-core split of an OUTER sum whose reduction runs in nested loops.

- **Defect**: the cross-core r-axis split gives each vector core a range ``r0_lo..r0_hi``,
  but an OUTER reduction whose range tree keeps two or more free nodes is emitted as nested
  loops over the whole range: every core sums everything and the combine kernel adds the
  40 partials, 40 times the right value, no error. Example: ``(a.view(4, 512, 32) *
  b[None]).sum(dim=(0, 1))`` (a per-feature gradient through a term broadcast over the
  batch). ``_npu_rsplit_outer_applicable`` does not look at the tree's shape for the OUTER
  hint (upstream's guard of the nested-loop code covers the INNER hint only).
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable``.
- **Probe**: does the predicate accept an OUTER ``sum`` kernel with two free reduction nodes?
  (hf_Bert sizes, one live output, nodes 512 x 4). The probe asks the predicate only: a
  state whose codegen honoured the range in nested loops would still be called defective
  (no such state is known), and would only lose the split, never a right result.
- **Fix**: for the OUTER hint the split is accepted only if upstream accepts it and the
  reduction tree has exactly one free node (nodes aliased in ``tree_node_mapping`` do not
  count); any doubt rejects. A rejected kernel compiles unsplit.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import TARGET, narrow_predicate, outer_sum_kernel, predicate_accepts


def free_reduction_nodes(range_trees: Any) -> int:
    """Nodes of the reduction range trees that are not aliases (``tree_node_mapping``)."""
    count = 0
    for tree in range_trees:
        if tree.is_reduction:
            mapping = getattr(tree, "tree_node_mapping", None) or {}
            count += sum(1 for name in tree.nodes if name not in mapping)
    return count


def split_allowed(upstream: bool, outer_hint: bool, free_nodes: int | None) -> bool:
    """The corrected decision; a ``None`` count (could not tell) rejects an OUTER kernel."""
    return upstream and (not outer_hint or free_nodes == 1)


def kernel_allows_split(module: types.ModuleType, kernel: Any) -> bool:
    """:func:`split_allowed` on a live kernel with upstream's verdict taken as yes; any
    error rejects."""
    try:
        outer = kernel.features.get_reduction_hint() == module.ReductionHint.OUTER
        return split_allowed(True, outer, free_reduction_nodes(kernel.range_trees) if outer else None)
    except Exception:  # noqa: BLE001 - in doubt, no split
        return False


def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about an OUTER sum kernel with one live output whose reduction
    has two free nodes (512 x 4), after checking it accepts the same kernel with one."""
    output = {"buf0": "out_ptr0"}
    if not predicate_accepts(module, outer_sum_kernel(module, output)):
        raise RuntimeError(f"{TARGET} rejects the one-node control kernel: probe not valid")
    if predicate_accepts(module, outer_sum_kernel(module, output, (("r0_1", 512), ("r0_2", 4)))):
        return Probe(True, f"{TARGET} splits an OUTER sum whose reduction has two free nodes")
    return Probe(False, f"{TARGET} rejects an OUTER sum whose reduction has two free nodes")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, lambda kernel: kernel_allows_split(module, kernel))


FIX = Fix(
    name="rsplit-nested-range",
    about=About(
        symptom=(
            "silently wrong sums: an OUTER sum over two or more free reduction nodes (a term broadcast over "
            "the batch, BigBird-style block products) comes out 40 times too large"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
