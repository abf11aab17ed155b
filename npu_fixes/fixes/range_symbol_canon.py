"""range-symbol-canon: prepare_indexing hands on registered range symbols only.

- **Defect**: the linearize helpers of ``NPUTritonKernel.prepare_indexing`` can put plain
  ``sympy.Symbol`` look-alikes of range-tree symbols into an index: same name, but without
  the integer/nonnegative assumptions, so not the key in ``range_tree_nodes``. One source
  is ``_simplify_compound_indexing`` folding a fused node through its ``tree_node_mapping``
  (built from plain symbols in ``_apply_linearize``), another the dual-view fold (see
  dualview-fold). Codegen then stops with ``AssertionError: Unregistered range symbol:
  <name>``, and the trivial-modulo fold at the end of ``prepare_indexing``, which looks
  symbols up in ``var_ranges()``, skips every term that holds one (``x3 % 64 + x6``
  stays ``ModularIndexing(x5, 1, 64) + x6`` where the fixed release gives ``x5 + x6``).
- **Where**: ``codegen.triton.NPUTritonKernel._refactor_clamp_stride`` and
  ``NPUTritonKernel._fold_trivial_modular_indexing``, the last two passes of
  ``prepare_indexing`` (nothing else calls them). Wrapping these rather than
  ``prepare_indexing`` puts the registered symbols where the fixed release has them:
  before those passes, which look them up.
- **Probe**: does ``prepare_indexing`` (linearize on) return a look-alike for a stand-in
  kernel: a fused ``x3 -> x5 + 64*x6`` mapped with plain symbols, indexed by ``x3 % 64``; and
  the plain ``x5 + 64*x6`` itself?
- **Fix**: the index entering each of those two passes gets every symbol named like a
  ``range_tree_nodes`` key, but not that key, replaced by the key
  (:func:`canonical`); the passes run unchanged. So they see the registered symbols that
  the fixed release canonicalises right before them, and every ``prepare_indexing``
  result carries registered symbols only. Unlike the fixed release, this also happens
  with linearize off, where no helper makes look-alikes and an index holding one would
  fail in codegen.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import scoped_method

#: The passes at the end of ``prepare_indexing``, in the order it calls them.
TARGETS = ("NPUTritonKernel._refactor_clamp_stride", "NPUTritonKernel._fold_trivial_modular_indexing")


def lookalikes(expr: Any, registered: Iterable[Any]) -> dict[Any, Any]:
    """Free symbols of ``expr`` that are not registered but share a registered symbol's
    name, mapped to that symbol. ``registered``: the symbols, or a mapping keyed by them
    (``range_tree_nodes``)."""
    if not hasattr(expr, "free_symbols"):
        return {}
    known = registered if isinstance(registered, (Mapping, set, frozenset)) else set(registered)
    strays = [sym for sym in expr.free_symbols if sym not in known]
    if not strays:
        return {}
    by_name = {getattr(sym, "name", None): sym for sym in known}
    return {sym: by_name[sym.name] for sym in strays if getattr(sym, "name", None) in by_name}


def canonical(expr: Any, registered: Iterable[Any]) -> Any:
    """``expr`` with its look-alike range symbols replaced by the registered ones; the
    very same object where there is nothing to replace."""
    swap = lookalikes(expr, registered)
    return expr.xreplace(swap) if swap else expr


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def registered_input(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        through_class = instance is None  # called through the class with the kernel first
        kernel = args[0] if through_class else instance
        rest = args[1:] if through_class else args
        registered = getattr(kernel, "range_tree_nodes", None) or {}
        if rest:
            rest = (canonical(rest[0], registered), *rest[1:])
        elif "index" in kwargs:
            kwargs = {**kwargs, "index": canonical(kwargs["index"], registered)}
        return wrapped(*((kernel,) if through_class else ()), *rest, **kwargs)

    for target in TARGETS:
        patcher.wrap_path(module, target, registered_input)


# -- probe -------------------------------------------------------------------------------
class _Node:
    """Range-tree node stand-in with what Inductor's base ``prepare_indexing`` asks of one."""

    def __init__(self, name: str, divisor: int, length: int) -> None:
        import sympy

        self.name, self.divisor, self.length = name, sympy.Integer(divisor), sympy.Integer(length)

    def symbol(self) -> Any:
        from torch._inductor.utils import sympy_index_symbol

        return sympy_index_symbol(self.name)

    def precomputed_args(self) -> list[Any]:
        return []

    def codegen(self) -> None:
        pass


def fused_kernel(module: types.ModuleType) -> Any:
    """A pointwise kernel (no reduction) of the live class whose x tree has the fused node
    ``x3`` (1024) mapped to ``x5 + 64*x6`` with plain symbols, as ``_apply_linearize``
    maps it, next to the nodes ``x5`` (64) and ``x6`` (16, divisor 64)."""
    import sympy

    nodes = [_Node("x3", 1, 1024), _Node("x5", 1, 64), _Node("x6", 64, 16)]
    tree = types.SimpleNamespace(
        prefix="x", is_reduction=False, is_loop=False, tensor_dim=0, numel=sympy.Integer(1024),
        nodes={n.name: n for n in nodes}, var_list=[n.symbol() for n in nodes],
        var_ranges={n.symbol(): n.length for n in nodes},
        tree_node_mapping={"x3": sympy.Symbol("x5") + 64 * sympy.Symbol("x6")})
    for node in nodes:
        node.root = tree
    kernel = object.__new__(module.NPUTritonKernel)
    kernel.range_trees, kernel.range_tree_nodes = [tree], {n.symbol(): n for n in nodes}
    kernel.inside_reduction, kernel._axis_split_subs, kernel._npu_linearize = False, {}, True
    kernel.simplify_indexing = lambda index: index
    return kernel


def prepared(module: types.ModuleType, kernel: Any, index: Any) -> Any:
    """The live ``prepare_indexing`` of ``index`` on ``kernel`` (linearize on), under a
    stand-in graph."""
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    prepare = scoped_method(module.NPUTritonKernel, "prepare_indexing",
                            kernel, {"triton_codegen_linearize": True})
    graph = types.SimpleNamespace(sizevars=SizeVarAllocator())
    with V.set_graph_handler(graph), V.set_kernel_handler(kernel):  # type: ignore[arg-type]
        return prepare(index)


def probe(module: types.ModuleType) -> Probe:
    """Prepare ``x3 % 64`` (folded through the plain mapping) and the mapping's own plain
    ``x5 + 64*x6``, and look for look-alikes in the results."""
    import sympy
    from torch.utils._sympy.functions import ModularIndexing

    kernel = fused_kernel(module)
    syms = {s.name: s for s in kernel.range_tree_nodes}
    cases = {"x3 % 64": ModularIndexing(syms["x3"], sympy.Integer(1), sympy.Integer(64)),
             "plain x5 + 64*x6": sympy.Symbol("x5") + 64 * sympy.Symbol("x6")}
    for label, index in cases.items():
        result = prepared(module, kernel, index)
        stray = ", ".join(sorted(s.name for s in lookalikes(result, kernel.range_tree_nodes)))
        if stray:
            return Probe(True, f"prepare_indexing({label}) gives {result} with unregistered {stray}")
    return Probe(False, "prepare_indexing results carry registered range symbols only")


FIX = Fix(
    name="range-symbol-canon",
    about=About(
        symptom=(
            "`AssertionError: Unregistered range symbol: <name>` in codegen (look-alike symbols from the "
            "linearize helpers)"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=TARGETS,
    probe=probe,
    install=install,
    signatures={target: ("index",) for target in TARGETS},
)
