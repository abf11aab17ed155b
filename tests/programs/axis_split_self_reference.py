"""Programs of tests/fixes/test_axis_split_self_reference.py: ``pixel_shuffle`` and
``pixel_unshuffle`` under ``dynamic=True``, forward and backward, compiled through a state's
backend, kernels run in Triton's interpreter, compared with eager; and the three live index
rewrites on an axis whose length is known to equal the split factor."""

from __future__ import annotations

from tests.programs import innermost, interpreted_with_npu_fixes, main

NAME = "axis-split-self-reference"
#: Channels and factor of each ``pixel_shuffle`` program: 9 channels by 3 leave one output
#: channel, and the backward's kernel an axis whose length, a size expression, is known to
#: equal its split factor; 18 by 3 and 8 by 2 leave two.
SHAPES = {"shuffle-9-by-3": (9, 3), "shuffle-18-by-3": (18, 3), "shuffle-8-by-2": (8, 2)}


def shuffled(codegen, channels: int, factor: int, backward: bool) -> object:
    """``pixel_shuffle`` of ``[1, channels, 2, 2]`` by ``factor`` compiled with
    ``dynamic=True`` (with ``backward``: the input's gradient of a weighted sum): True where it
    equals eager, else the error."""
    import torch

    from npu_fixes.tools import interpret

    torch.manual_seed(0)
    x = torch.randn(1, channels, 2, 2)
    weight = torch.randn(1, channels // factor ** 2, 2 * factor, 2 * factor)

    def run(fn):
        leaf = x.clone().requires_grad_(backward)
        out = fn(leaf, factor)
        return torch.autograd.grad((out * weight).sum(), leaf)[0] if backward else out

    torch._dynamo.reset()
    try:
        with interpret.cpu_device(codegen):
            compiled = run(torch.compile(torch.nn.functional.pixel_shuffle, dynamic=True))
    except Exception as exc:  # noqa: BLE001 - recorded
        return innermost(exc)
    return bool(torch.equal(compiled, run(torch.nn.functional.pixel_shuffle)))


def rewrites(codegen) -> dict:
    """Each of the three index rewrites, live, over an x range of ``L = c*(s0//3)`` with
    ``s0`` from 3 to 5 (``L`` known to equal ``c``): the mapping of each node defined from
    itself afterwards (empty where none is)."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    from npu_fixes.fixes.axis_split_self_reference import METHODS, self_referencing
    from npu_fixes.fixes.shared.codegen_kernel import cpu_kernel

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    out = {}
    for method in METHODS:
        factor = sympy.Integer(8 if method == "_maybe_split_strided_axis" else 3)
        with cpu_kernel(codegen, factor * FloorDiv(s0, 3), {s0: (3, 5)}) as (kernel, x0):
            index = (2 * x0 if method == "_maybe_split_strided_axis"
                     else FloorDiv(x0, factor) + ModularIndexing(x0, sympy.Integer(1), factor))
            getattr(kernel, method)(index)
            out[method] = {name: str(expr) for name, expr in self_referencing(kernel.range_trees[0]).items()}
    return out


def run_all(codegen) -> dict:
    out = {f"{label}-{way}": shuffled(codegen, *shape, way == "backward")
           for label, shape in SHAPES.items() for way in ("forward", "backward")}
    out["rewrites"] = rewrites(codegen)
    return out


def pixel_shuffles(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
