"""partial-view-fold: a second view of part of an x tree stays a tile axis of its own, and the
kernel iterates the product of both views.

- **Defect**: where a permute or a slice makes one flat x range carry two decompositions (the
  basis the loads use, another the stores or a fused node use), ``_fold_dual_decomp`` maps the
  second onto the basis only where it covers the whole range. A second view of a span of it
  stays free: ``x.transpose(0, 1)`` of ``[15, 257, 17]`` under a ``slice_scatter`` and a
  ``prod(0)`` keeps ``x4`` (3855, the span of ``x1`` (257) and ``x2`` (15)) as a tile axis
  beside them; the kernel's loops run over 17 x 257 x 15 x 3855 lanes for 65535 elements, the
  same value stored 3855 times (no result within 300 s in Triton's interpreter; on a device,
  thousands of times the work). The probe's ``64 x 64`` view inside a basis node of 4096 (the
  shape the wheel's notes give for BigBird; our BigBird-style programs did not reach it) is the
  same case. The wheel rewrote the fold to take such spans; two more changes it made in the
  same pass (a composite index as a mapping key, constants at the rank before a split) are
  not part of this fix: no program of ours or of the corpus has shown a symptom of them.
- **Where**: ``codegen.triton.NPUTritonScheduling._fold_dual_decomp`` (the wheels replaced it:
  absent there).
- **Probe**: the live fold on a stand-in x tree of 262144 with the basis
  ``x1 (64) * x0 (4096)`` and a second view ``x3 (64) * x2 (64)`` of x0's span: are x2 and x3
  left unmapped?
- **Fix**: after upstream's fold, each free node on a chain of second-view nodes that starts and
  ends on boundaries of the basis (a complete chain of basis nodes) is mapped onto the basis
  through the same two tables upstream uses for a complete second view (the tree's mapping and
  the header's definitions): to the basis nodes it spans (``x4 = x1 + 257*x2``) where its ends
  are boundaries of basis nodes, else to ``//`` and ``%`` of the basis's flat index.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, WHEELS, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_graph

TARGET = "NPUTritonScheduling._fold_dual_decomp"


def fold_spans(sizevars: Any, tree: Any, basis_names: set[str], mapping: dict,
               matcher: dict) -> dict[str, Any]:
    """Map each free node of ``tree`` that lies on a chain of non-basis nodes from one
    boundary of the basis to another onto the basis (``mapping``: node name -> expression;
    ``matcher``: the header line defining it); returns what was mapped. Nothing where the
    free basis nodes do not form a complete chain of ``tree``."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    equal = sizevars.statically_known_equals
    free = [n for n in tree.nodes.values() if n.name not in mapping]
    basis = sorted((n for n in free if n.name in basis_names),
                   key=lambda n: sizevars.optimization_hint(n.divisor))
    others = [n for n in free if n.name not in basis_names]
    reach = sympy.Integer(1)
    for node in basis:
        if not equal(node.divisor, reach):
            return {}
        reach = node.divisor * node.length
    if not (basis and others and equal(reach, tree.numel)):
        return {}
    ends = [n.divisor * n.length for n in basis]
    on_span: set[str] = set()

    def follow(start: Any, at: Any, chain: tuple[str, ...]) -> None:
        for node in others:
            end = node.divisor * node.length
            if node.name in chain or not equal(node.divisor, at) or equal(end, at):
                continue
            if any(equal(end, b) for b in ends) and not equal(end, start):
                on_span.update((*chain, node.name))
            else:
                follow(start, end, (*chain, node.name))

    for node in basis:
        follow(node.divisor, node.divisor, ())
    flat = sum((sympy.Symbol(n.name) * n.divisor for n in basis), sympy.Integer(0))
    mapped = {}
    for node in (n for n in others if n.name in on_span):
        end, at, digits = node.divisor * node.length, node.divisor, []
        for b in basis:
            if equal(b.divisor, at) and not equal(at, end):
                digits.append(b)
                at = b.divisor * b.length
        if digits and equal(at, end):
            expr = sum((sympy.Symbol(b.name) * sizevars.simplify(b.divisor / node.divisor) for b in digits),
                       sympy.Integer(0))
        elif equal(end, tree.numel):
            expr = FloorDiv(flat, node.divisor)
        else:
            expr = ModularIndexing(flat, node.divisor, node.length)
        mapping[node.name] = mapped[node.name] = expr
        matcher[f"{node.name} = {node.name}index"] = f"{node.name} = {expr}"
    return mapped


def stand_in_tree(nodes: list[tuple[str, int, int]], numel: int) -> Any:
    """An x range tree of ``numel`` with the nodes ``(name, divisor, length)``, as the folds read it."""
    import sympy

    ns = types.SimpleNamespace
    return ns(nodes={n: ns(name=n, divisor=sympy.Integer(d), length=sympy.Integer(length))
                     for n, d, length in nodes}, numel=sympy.Integer(numel), is_reduction=False, prefix="x")


def fold_partial_view(module: types.ModuleType) -> dict[str, str]:
    """The mapping the live fold gives the stand-in tree (the basis ``x1 (64) * x0 (4096)``,
    a second view ``x3 (64) * x2 (64)`` of x0's span)."""
    import sympy

    tree = stand_in_tree([("x0", 1, 4096), ("x1", 4096, 64), ("x2", 1, 64), ("x3", 64, 64)], 262144)
    basis = ([sympy.Symbol("x1"), sympy.Symbol("x0")], [64, 4096])
    mapping: dict = {}
    cls = module.NPUTritonScheduling
    with cpu_graph():
        cls._fold_dual_decomp(object.__new__(cls), types.SimpleNamespace(), tree, basis, mapping, {})
    return {str(k): str(v) for k, v in mapping.items()}


def probe(module: types.ModuleType) -> Probe:
    """Run the live fold on the stand-in tree: is the second view of x0's span folded?"""
    mapping = fold_partial_view(module)
    if {"x2", "x3"} <= mapping.keys():
        return Probe(False, f"_fold_dual_decomp folds a second view of part of the basis onto it: {mapping}")
    return Probe(True, "_fold_dual_decomp leaves a second view of part of the basis (x3 * 64 + x2 inside "
                       "x0's 4096) as tile axes of their own: the kernel iterates the product of both views")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    from torch._inductor.virtualized import V

    def fold(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if len(args) == 5 and not kwargs:
            _, tree, tree_expr, mapping, matcher = args
            fold_spans(V.graph.sizevars, tree, {str(v) for v in tree_expr[0]}, mapping, matcher)
        return result

    patcher.wrap_path(module, TARGET, fold)


FIX = Fix(
    name="partial-view-fold",
    old_names=("linearize-misc",),
    about=About(
        symptom=(
            "a second view of part of an x range (a transpose under a `slice_scatter` and a reduction) "
            "stays a tile axis of its own: the kernel iterates the product of both views, thousands of "
            "times the work"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="none known: upgrade torch_npu",
        absent=frozenset(WHEELS),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel", "tree", "tree_expr", "tree_node_mapping", "matcher")},
)
