"""rsplit-inner-static: no cross-core split of an INNER sum over several static reduction nodes.

- **Defect**: from 95c9094da the cross-core r-axis split also takes INNER sums (a few rows,
  2048 or more elements each). Where the reduction keeps two or more free nodes, it is meant
  to split one node of symbolic length, whose loop and ``<node>numel`` argument the codegen
  emits. With static lengths over the tile cap, the promotion marks the looped nodes as
  "dynamic" too, the split picks one, and the kernel names a ``r0_2numel`` it never defines:
  ``NameError: name 'r0_2numel' is not defined`` stops the compile. Where no node is picked,
  the split still fires and every core sums the whole range (with ``rtree_real_block=False``:
  ``NameError: name 'r0_2' is not defined``). A per-head sum is enough:
  ``x.view(4, 64, 8, 64).permute(0, 2, 1, 3).reshape(32, 4096).sum(-1)``.
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable``, asked before
  ``_apply_linearize`` marks the kernel as a split candidate and again after it.
- **Probe**: does the predicate accept an INNER ``sum`` kernel whose reduction has two free
  static nodes? (768 rows, nodes 64 x 32).
- **Fix**: for the INNER hint with two or more free reduction nodes, the split is accepted
  only if upstream accepts it, real-block promotion is on and a free node has a symbolic
  length whose size hint reaches the vector core count (the node upstream's pick can take
  and its codegen splits). Otherwise the kernel compiles unsplit. The verdict depends only
  on the kernel's tree, so both of upstream's questions get the same answer. Any doubt
  rejects.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import TARGET, narrow_predicate, outer_sum_kernel, predicate_accepts


def split_allowed(upstream: bool, inner_hint: bool, free_nodes: int, splittable_node: bool,
                  real_block: bool) -> bool:
    """The corrected decision: an INNER kernel over several free reduction nodes is split
    only where one of them is a symbolic node the split can take (``splittable_node``) and
    the tree is promoted (``real_block``)."""
    if not upstream:
        return False
    if not inner_hint or free_nodes == 1:
        return True
    return splittable_node and real_block


def _splittable(length: Any, cores: int) -> bool:
    """A node length that is symbolic, with a size hint of at least ``cores``."""
    import sympy
    from torch._inductor.virtualized import V

    if isinstance(length, (int, sympy.Integer)):
        return False
    return int(V.graph.sizevars.optimization_hint(length)) >= cores


def kernel_allows_split(module: types.ModuleType, kernel: Any) -> bool:
    """:func:`split_allowed` on a live kernel with upstream's verdict taken as yes; any
    error rejects."""
    try:
        inner = kernel.features.get_reduction_hint() == module.ReductionHint.INNER
        free = [node for tree in kernel.range_trees if tree.is_reduction
                for name, node in tree.nodes.items()
                if name not in (getattr(tree, "tree_node_mapping", None) or {})]
        if not inner or len(free) == 1:
            return split_allowed(True, inner, len(free), False, False)
        cores = module.device_props.get_npu_vector_core_count()
        splittable = any(_splittable(node.length, cores) for node in free)
        return split_allowed(True, inner, len(free), splittable, bool(module.ncfg.rtree_real_block))
    except Exception:  # noqa: BLE001 - in doubt, no split
        return False


def inner_sum_kernel(module: types.ModuleType, reduction_nodes: tuple[tuple[str, int], ...]) -> Any:
    """:func:`~.shared.rsplit.outer_sum_kernel` (768 rows, a reduction of 2048, one live
    output) with the INNER hint."""
    kernel = outer_sum_kernel(module, {"buf0": "out_ptr0"}, reduction_nodes)
    kernel.features.get_reduction_hint = lambda: module.ReductionHint.INNER
    return kernel


def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about an INNER sum kernel whose reduction has two free static
    nodes (64 x 32), after checking it accepts the same kernel with one node."""
    if not predicate_accepts(module, inner_sum_kernel(module, (("r0_1", 2048),))):
        return Probe(False, f"{TARGET} does not split INNER sums")
    if predicate_accepts(module, inner_sum_kernel(module, (("r0_2", 64), ("r0_3", 32)))):
        return Probe(True, f"{TARGET} splits an INNER sum whose reduction has two free static nodes")
    return Probe(False, f"{TARGET} rejects an INNER sum whose reduction has two free static nodes")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, lambda kernel: kernel_allows_split(module, kernel))


FIX = Fix(
    name="rsplit-inner-static",
    about=About(
        symptom=(
            "a per-head sum (`x.permute(0, 2, 1, 3).reshape(B * H, S * D).sum(-1)`) stops the compile: "
            "`NameError: name 'r0_2numel' is not defined`"
        ),
        present=EVERYWHERE - {"8bfbb9ed1"},
        fixed_in=NOT_FIXED,
        workaround="none known: upgrade torch_npu (none: no published state has the fix)",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
