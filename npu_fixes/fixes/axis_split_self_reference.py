"""axis-split-self-reference: an axis split into a factor equal to its own length becomes its
own inner node, defined in terms of itself.

- **Defect**: three index rewrites (``_maybe_split_fused_axes``, ``_simplify_compound_indexing``
  and ``_maybe_split_strided_axis``) split a range-tree node of length ``L`` read as ``x // c``
  or ``x % c`` (or at a stride) into an inner node of ``c`` and an outer one of ``L / c``. They
  skip a split whose outer length is the integer 1, but not one whose length is a size
  expression that is known to equal ``c`` (``3*(s0//3)`` where ``s0`` is 3 to 5; under
  ``dynamic=True``, the backward of ``pixel_shuffle(x, 3)`` of 9 channels). The tree then
  gives back the node itself as the inner one, and the kernel defines it from itself:
  ``y4 = y4 + 3*y5``, ``UnboundLocalError: cannot access local variable 'y4'`` (or the value
  an earlier line left in it). The published wheels' rewrites do the same (the probe), but
  their ``pixel_shuffle`` kernels are built another way and are right: no program of ours
  reaches the defect there.
- **Where**: ``codegen.triton.NPUTritonKernel`` ``_maybe_split_fused_axes``,
  ``_simplify_compound_indexing``, ``_maybe_split_strided_axis``.
- **Probe**: the live ``_maybe_split_fused_axes`` on ``x0 // 3 + x0 % 3`` in a CPU kernel
  whose x range is ``3*(s0//3)``, ``s0`` from 3 to 5: is ``x0`` mapped to an expression of
  ``x0``?
- **Fix**: while each of the three runs, the graph's ``statically_known_multiple_of(L, c)``
  answers no where ``L`` is known to equal ``c`` (a "not known" answer is always a safe one):
  no split is made, and the index keeps ``x0 // 3`` and ``x0 % 3``, which are right.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

METHODS = ("_maybe_split_fused_axes", "_simplify_compound_indexing", "_maybe_split_strided_axis")
TARGETS = tuple(f"NPUTritonKernel.{method}" for method in METHODS)
QUERY = "statically_known_multiple_of"


@contextlib.contextmanager
def no_split_into_itself(sizevars: Any) -> Iterator[None]:
    """``sizevars.statically_known_multiple_of(length, factor)`` answers False where
    ``length`` is known to equal ``factor``, until the block ends."""
    if QUERY in vars(sizevars):  # a rewrite called inside another: already answering so
        yield
        return
    known_multiple = getattr(sizevars, QUERY)

    def multiple_leaving_more_than_one(length: Any, factor: Any) -> bool:
        return not sizevars.statically_known_equals(length, factor) and known_multiple(length, factor)

    setattr(sizevars, QUERY, multiple_leaving_more_than_one)
    try:
        yield
    finally:
        delattr(sizevars, QUERY)


def self_referencing(tree: Any) -> dict[str, Any]:
    """The nodes of ``tree`` whose mapping names the node itself."""
    return {name: expr for name, expr in tree.tree_node_mapping.items()
            if name in {s.name for s in getattr(expr, "free_symbols", ())}}


def probe(module: types.ModuleType) -> Probe:
    """The live ``_maybe_split_fused_axes`` on ``x0 // 3 + x0 % 3`` over an x range of
    ``3*(s0//3)``, ``s0`` from 3 to 5."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    three = sympy.Integer(3)
    with cpu_kernel(module, 3 * FloorDiv(s0, three), {s0: (3, 5)}) as (kernel, x0):
        index = FloorDiv(x0, three) + ModularIndexing(x0, sympy.Integer(1), three)
        split = kernel._maybe_split_fused_axes(index)
        cycles = self_referencing(kernel.range_trees[0])
    if cycles:
        return Probe(True, f"_maybe_split_fused_axes({index}) over 3*(s0//3) gives {split} and maps "
                           + ", ".join(f"{name} <- {expr}" for name, expr in cycles.items()))
    return Probe(False, f"_maybe_split_fused_axes({index}) over 3*(s0//3) gives {split}, no node "
                        "defined from itself")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    from torch._inductor.virtualized import V

    def without_self_split(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        with no_split_into_itself(V.graph.sizevars):
            return wrapped(*args, **kwargs)

    for target in TARGETS:
        patcher.wrap_path(module, target, without_self_split)


FIX = Fix(
    name="axis-split-self-reference",
    about=About(
        symptom=(
            "under `dynamic=True` an axis whose length is known to equal the factor it is split by "
            "(the backward of `pixel_shuffle(x, 3)` of 9 channels) is defined from itself: "
            "`UnboundLocalError: cannot access local variable 'y4'`"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="compile with `dynamic=False`, or mark the size static (`torch._dynamo.mark_static`)",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=TARGETS,
    probe=probe,
    install=install,
    signatures=dict.fromkeys(TARGETS, ("index",)),
)
