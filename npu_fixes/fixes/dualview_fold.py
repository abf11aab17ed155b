"""dualview-fold: the folded dual-view reduction index uses the registered range symbol.

- **Defect**: when the flat alias of a dual-view reduction block is absent from the
  address, ``_fold_dualview_reduction_index`` folds the alias chain into a fresh plain
  ``sympy.Symbol``; it prints like the range-tree symbol but lacks its integer/nonnegative
  assumptions, so it is not the key in ``range_tree_nodes`` (hf_DistilBert backward
  ``buf352``: ``AssertionError: Unregistered range symbol: r0_1``).
- **Where**: ``codegen.triton.NPUTritonKernel._fold_dualview_reduction_index``.
- **Probe**: does the fold of ``r0_2 + 512*r0_3`` (reduction nodes ``r0_1`` 2048, ``r0_2``
  512, ``r0_3`` 4x512) yield an ``r0_1`` that is not ``node.symbol()``?
- **Fix**: the fold runs unchanged; afterwards every symbol it introduced that is named
  like a range-tree node but is not that node's registered symbol is replaced by the
  registered one. Symbols already present in the input index are left alone.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import ScopedAttributes, with_globals

TARGET = "NPUTritonKernel._fold_dualview_reduction_index"


def registered_symbols(range_trees: Iterable[Any]) -> dict[str, Any]:
    """Node name -> the symbol Inductor registered for it, over all range trees."""
    return {node.name: node.symbol() for tree in range_trees for node in tree.nodes.values()}


def lookalikes(expr: Any, before: Iterable[Any], registered: Mapping[str, Any]) -> dict[Any, Any]:
    """Symbols of ``expr`` not in ``before`` that are named like a registered symbol but
    are not it, mapped to the registered symbol."""
    old = set(before)
    return {
        sym: registered[sym.name]
        for sym in expr.free_symbols - old
        if sym.name in registered and sym != registered[sym.name]
    }


def reregister(expr: Any, before: Iterable[Any], registered: Mapping[str, Any]) -> Any:
    """The corrected result: ``expr`` with its new look-alike symbols made registered."""
    swap = lookalikes(expr, before, registered)
    return expr.xreplace(swap) if swap else expr


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def fold(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if instance is None:  # called through the class with a non-kernel ``self``
            instance, args = args[0], args[1:]
        index = args[0] if args else kwargs["index"]
        if result is index:
            return result
        return reregister(result, index.free_symbols, registered_symbols(instance.range_trees))

    patcher.wrap_path(module, TARGET, fold)


# -- probe -------------------------------------------------------------------------------
class _Node:
    def __init__(self, name: str, divisor: int, length: int) -> None:
        import sympy

        self.name, self.divisor, self.length = name, sympy.Integer(divisor), sympy.Integer(length)

    def symbol(self) -> Any:
        from torch._inductor.utils import sympy_index_symbol

        return sympy_index_symbol(self.name)


def distilbert_kernel() -> types.SimpleNamespace:
    """Stand-in of the hf_DistilBert ``buf352`` kernel: reduction block ``r0_1`` (2048)
    also viewed as ``r0_2`` (512) x ``r0_3`` (4, divisor 512)."""
    nodes = {n.name: n for n in (_Node("r0_1", 1, 2048), _Node("r0_2", 1, 512),
                                 _Node("r0_3", 512, 4))}
    tree = types.SimpleNamespace(is_reduction=True, nodes=nodes)
    return types.SimpleNamespace(inside_reduction=True, range_trees=[tree])


def fold_once(module: types.ModuleType, kernel: Any, index: Any) -> Any:
    """Run the live fold (gate on) on ``kernel`` under a stand-in graph."""
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    graph = types.SimpleNamespace(sizevars=SizeVarAllocator())
    fold = with_globals(inspect.getattr_static(module.NPUTritonKernel, "_fold_dualview_reduction_index"),
                        {"ncfg": ScopedAttributes(module.ncfg, fold_dualview_rnode=True)})
    with V.set_graph_handler(graph):  # type: ignore[arg-type]
        return fold(kernel, index)


def probe(module: types.ModuleType) -> Probe:
    """Fold ``r0_2 + 512*r0_3`` and compare the flat symbol with the registered one."""
    kernel = distilbert_kernel()
    syms = registered_symbols(kernel.range_trees)
    result = fold_once(module, kernel, syms["r0_2"] + 512 * syms["r0_3"])
    names = {s.name for s in result.free_symbols}
    if names != {"r0_1"}:
        raise RuntimeError(f"fold of r0_2 + 512*r0_3 gave {result}: probe not valid")
    if lookalikes(result, (), syms):
        return Probe(True, "fold yields an r0_1 that is not the registered range symbol")
    return Probe(False, "fold yields the registered r0_1 range symbol")


FIX = Fix(
    name="dualview-fold",
    about=About(
        symptom="`AssertionError: Unregistered range symbol: r0_1` compiling a backward (hf_DistilBert)",
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("index",)},
)
