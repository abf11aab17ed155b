"""split-fused-fixpoint: split a fused pointwise axis until its index is affine.

- **Defect**: in linearize mode ``_maybe_split_fused_axes`` splits a fused range-tree node
  read as ``x // c`` or ``x % c`` into an outer and an inner node, so that the index becomes
  a sum of node symbols times strides. It runs one round. Where one flat axis is read at two
  granularities (``x // 1024`` and ``x % 256``; reshape and permute chains such as
  ``x.view(4, 4, 4, 8).permute(0, 2, 1, 3).reshape(16, 32).t()``), the split at one
  granularity leaves the other inside the new inner node: ``(x3 % 4)``, ``(x3 // 4)`` reach
  the kernel's addresses. The backend's own notes say the NPU compiler lowers such an
  address to scalar or indirect accesses, and upstream's wheel names a wrong address formula
  it produced. On CPU the interpreter evaluates ``%`` and ``//`` exactly: the results are
  right either way, so the emitted index is the observable.
- **Where**: ``codegen.triton.NPUTritonKernel._maybe_split_fused_axes``.
- **Probe**: does a ``//`` or ``%`` of a free node survive the live method on
  ``1024 * (x // 1024) + x % 256`` over a 4096-long x range?
- **Fix**: after upstream's round, further rounds run while the index changes (at most five
  more, stopping if it comes back to an earlier form), as the wheel does, with the symbols
  of reduction trees held fixed: the wheel splits reduction nodes further too but changed
  their codegen with it, and the states' reduction codegen does not build such kernels
  (``NameError: name 'r0_3' is not defined``). Reduction indexes keep upstream's one round.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernel._maybe_split_fused_axes"
#: Rounds after upstream's first one (the wheel allows six in all).
EXTRA_ROUNDS = 5


def reduction_symbols(kernel: Any, index: Any) -> set[Any]:
    """The symbols of ``index`` that name nodes of a reduction range tree of ``kernel``."""
    nodes = kernel.range_tree_nodes
    return {s for s in index.free_symbols if s in nodes and nodes[s].root.is_reduction}


def residue(kernel: Any, index: Any) -> list[Any]:
    """The ``//`` and ``%`` terms of ``index`` whose operand is a free (unmapped) range-tree
    node: what a further split round would take."""
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    out = []
    for term in index.atoms(FloorDiv, ModularIndexing):
        node = kernel.range_tree_nodes.get(term.args[0])
        if node is not None and node.name not in node.root.tree_node_mapping:
            out.append(term)
    return out


def split_to_fixpoint(split_round: Callable[[Any], Any], kernel: Any, index: Any) -> Any:
    """``split_round`` (upstream's method, bound) once, then again while the index changes,
    reduction-tree symbols held fixed after the first round."""
    import sympy

    index = split_round(index)
    seen = [index]
    for _ in range(EXTRA_ROUNDS):
        held = {s: sympy.Dummy(s.name) for s in reduction_symbols(kernel, index)}
        new = split_round(index.xreplace(held)).xreplace({v: k for k, v in held.items()})
        if new in seen:
            break
        seen.append(new)
        index = new
    return index


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def fixpoint(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if instance is None:  # called through the class, the kernel first
            kernel, *rest = args
            index = rest[0] if rest else kwargs["index"]
            return split_to_fixpoint(lambda i: wrapped(kernel, i), kernel, index)
        return split_to_fixpoint(wrapped, instance, args[0] if args else kwargs["index"])

    patcher.wrap_path(module, TARGET, fixpoint)


def probe(module: types.ModuleType) -> Probe:
    """The live method on ``1024 * (x // 1024) + x % 256`` of a real kernel's 4096-long x
    range: does a ``//`` or ``%`` of a free node survive?"""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    with cpu_kernel(module, 4096) as (kernel, x0):
        one = sympy.Integer(1)
        index = 1024 * FloorDiv(x0, sympy.Integer(1024)) + ModularIndexing(x0, one, sympy.Integer(256))
        split = getattr(kernel, TARGET.rpartition(".")[2])(index)
        left = residue(kernel, split)
    if left:
        return Probe(True, f"_maybe_split_fused_axes({index}) gives {split}: "
                           f"{', '.join(sorted(map(str, left)))} of a fused node left in the address")
    return Probe(False, f"_maybe_split_fused_axes({index}) gives {split}")


FIX = Fix(
    name="split-fused-fixpoint",
    about=About(
        symptom=(
            "one flat axis read at two granularities (reshape and permute chains) keeps a `%` or `//` of a "
            "fused node in the kernel's addresses: a wrong address formula on the NPU, by upstream's notes"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("index",)},
)
