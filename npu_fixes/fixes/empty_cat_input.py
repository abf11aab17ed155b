"""empty-cat-input: ``torch.cat`` of inputs with no elements along the concatenated dim
stops the compile.

- **Defect**: the backend's own concat lowering (``npu_cat_loop``, which every ``cat`` and
  the step-1 ``slice_scatter`` go through) builds a loop concat even where every input has
  zero size along the dim; the code generated for it takes positions modulo a width of 0:
  ``ZeroDivisionError: Modulo by zero`` when the graph compiles (``torch.cat`` of empty
  tensors, ``tril_indices``/``triu_indices`` of an empty range). Later states route every
  ``cat`` to the fallback.
- **Where**: ``lowering.npu_cat_loop``.
- **Probe**: the live lowering of a concat of two ``[0, 3]`` buffers in a CPU graph: does
  it build a loop concat of width 0? (Detected from the lowering's node, not compiled.)
- **Fix**: inputs of zero size along the dim (known at compile time) are left out: they add
  no element. One input left: its copy; none: a copy of the first input, which has the
  result's shape.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_graph

TARGET = "npu_cat_loop"


def _empty_along(inputs: list[Any], dim: int) -> list[bool]:
    from torch._inductor.virtualized import V

    return [V.graph.sizevars.statically_known_equals(inp.get_size()[dim], 0) for inp in inputs]


def without_empty(cat_loop: Callable[..., Any], inputs: list[Any], dim: int) -> Any:
    """The rule: ``cat_loop`` over the inputs that hold elements along ``dim``; a copy of
    the one left, or of the first input where none holds any (the result's shape then)."""
    from torch._inductor import lowering

    empty = _empty_along(inputs, dim)
    kept = [inp for inp, e in zip(inputs, empty, strict=True) if not e]
    if len(kept) == len(inputs):
        return cat_loop(inputs, dim)
    return lowering.clone((kept or inputs)[0]) if len(kept) <= 1 else cat_loop(kept, dim)


def _cat_ranges(node: Any) -> Any:
    """The ``cat_ranges`` of the loop-concat node under a lowering's result, or None."""
    while node is not None and not hasattr(node, "cat_ranges"):
        node = getattr(node, "data", None)
    return getattr(node, "cat_ranges", None)


def probe(module: types.ModuleType) -> Probe:
    """The live lowering of a concat of two empty inputs."""
    import torch
    from torch._inductor import ir

    with cpu_graph():
        inputs = [ir.TensorBox.create(ir.InputBuffer(
            name=f"probe_{i}", layout=ir.FixedLayout(torch.device("cpu"), torch.float32, [0, 3])))
            for i in range(2)]
        ranges = _cat_ranges(getattr(module, TARGET)(inputs, 0))
    if ranges is not None and all(start == end for start, end in ranges):
        width = f"a loop concat of width 0 (ranges {list(ranges)})"
        return Probe(True, f"a concat of two empty inputs is {width}: its code divides by the width "
                           "(ZeroDivisionError: Modulo by zero)")
    return Probe(False, "a concat of empty inputs is no loop concat of width 0")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def cat_loop(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) != 2 or kwargs:
            return wrapped(*args, **kwargs)
        return without_empty(wrapped, *args)

    patcher.wrap_path(module, TARGET, cat_loop)


FIX = Fix(
    name="empty-cat-input",
    about=About(
        symptom="`torch.cat` with an empty input (`tril_indices(0, 3)`) stops the compile: "
                "`ZeroDivisionError: Modulo by zero`",
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="leave empty tensors out of `torch.cat` in compiled code, or upgrade torch_npu",
        absent=frozenset({"95c9094da", "f8802037a", "5ff81d9c5", "bafc50684", "2.13.0", "2.14.0"}),
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("inputs", "dim")},
)
