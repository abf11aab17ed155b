"""dualview-fold-definition: the reduction node a dual-view fold puts into an address is never
defined in the loop that reads it.

- **Defect**: Inductor writes the definition of each range-tree node an address names
  (``r0_1 = r0_index // ks0``) while it prepares the index; only then does the backend's
  ``_fold_dualview_reduction_index`` turn the chain ``r0_0 + ks0*r0_1`` into the flat node
  ``r0_2``, whose definition nobody writes. Where no earlier access of the loop named it,
  the compile stops (``NameError: name 'r0_2' is not defined``: ``torch.where(m, x, 0.0)``
  and its sum under ``dynamic=True``, OpInfo ``masked.std``/``masked.var`` backward); where
  an earlier loop of the kernel defined it, the loop reads that loop's last value: out of
  bounds or silently wrong (``native_group_norm`` backward, ``x - x.sum()`` times a mask).
- **Where**: ``codegen.triton.NPUTritonKernel._fold_dualview_reduction_index``.
- **Probe**: where the promoted rewrite takes the nodes' definitions from the body's lines
  (the wheels write them from the kernel's records of its loops), the live fold in a CPU
  kernel with nodes ``r0_0`` (8), ``r0_1`` (8 x 8) and the flat ``r0_2`` (64), asked for
  ``r0_0 + 8*r0_1``: does it return ``r0_2`` and write no definition of it?
- **Fix**: after the fold, each range-tree node it put into the address (named in the result,
  not in the index it was given) gets its definition written, as Inductor writes it for the
  nodes it sees (once per loop: Inductor caches it).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_reduction_kernel, emitted
from .shared.promoted import definitions_from_passes

TARGET = "NPUTritonKernel._fold_dualview_reduction_index"


def introduced_nodes(kernel: Any, before: Any, after: Any) -> list[Any]:
    """The range-tree nodes of ``kernel`` named in ``after`` and not in ``before``."""
    names = {s.name for s in getattr(before, "free_symbols", ())}
    nodes = {node.name: node for tree in kernel.range_trees for node in tree.nodes.values()}
    return [nodes[s.name] for s in getattr(after, "free_symbols", ())
            if s.name not in names and s.name in nodes]


def probe(module: types.ModuleType) -> Probe:
    """The live fold of ``r0_0 + 8*r0_1`` in a CPU kernel whose reduction tree has the flat
    node ``r0_2`` of their 64 elements."""
    import sympy

    if definitions_from_passes(module):
        return Probe(False, "the promoted rewrite writes the nodes' definitions from the kernel's reduction "
                            "passes, not from the body's lines")
    with cpu_reduction_kernel(module) as kernel:
        tree = next(t for t in kernel.range_trees if t.is_reduction)
        low, high = (tree.lookup(sympy.Integer(d), sympy.Integer(8)).symbol() for d in (1, 8))
        flat = tree.lookup(sympy.Integer(1), sympy.Integer(64)).symbol()
        kernel.inside_reduction = True
        folded = kernel._fold_dualview_reduction_index(low + 8 * high)
        text = emitted(kernel)
    if {s.name for s in folded.free_symbols} != {flat.name}:
        return Probe(False, f"the fold leaves {low + 8 * high} as {folded}")
    if f"{flat.name} = " in text:
        return Probe(False, f"the fold of {low + 8 * high} to {folded} writes its definition")
    return Probe(True, f"the fold turns {low + 8 * high} into {folded} and writes no definition of it "
                       f"(NameError '{flat.name}', or the value of an earlier loop)")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def fold(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        folded = wrapped(*args, **kwargs)
        if len(args) == 1 and not kwargs:
            for node in introduced_nodes(instance, args[0], folded):
                node.codegen()
        return folded

    patcher.wrap_path(module, TARGET, fold)


FIX = Fix(
    name="dualview-fold-definition",
    about=About(
        symptom=(
            "a reduction whose address the backend folds to its flat node stops the compile with "
            "`NameError: name 'r0_2' is not defined` (`dynamic=True`, `torch.masked` std/var backward), or "
            "reads a stale index: out-of-bounds loads and wrong `group_norm` gradients"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="compile with `dynamic=False`, or set "
                   "`torch_npu._inductor.triton_experimental.config.fold_dualview_rnode = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("index",)},
)
