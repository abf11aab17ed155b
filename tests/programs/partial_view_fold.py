"""Programs of tests/fixes/test_partial_view_fold.py: a transpose under a ``slice_scatter`` and a
product over the first dimension (a program of the sweep's generator, smaller), compiled
through a state's backend, kernels run in Triton's interpreter, compared with eager, with the
lanes each kernel's tile loops run over."""

from __future__ import annotations

import re

from tests.programs import host_load, interpreted, interpreted_with_npu_fixes, main

NAME = "partial-view-fold"
#: The constant length of each tile axis of an x range, in a kernel's source.
TILE_AXIS = re.compile(r"^\s*x\d+numel : tl\.constexpr = (\d+)$", re.M)


def lanes(source: str) -> int:
    """How many lanes the tile loops of a kernel's x axes run over: the product of their lengths."""
    out = 1
    for length in TILE_AXIS.findall(source):
        out *= int(length)
    return out


def transposed_scatter_prod(x):
    import torch

    y = x.transpose(0, 1)
    y = torch.slice_scatter(y, torch.ones_like(y[:, :, 2::2]), 2, 2, None, 2)
    r = y.prod(0, keepdim=True)
    return r - r.mean()


def run_all(codegen) -> dict:
    """The program on ``[3, 65, 17]`` (the second view: the 65 x 3 = 195 elements of two basis
    nodes): whether it equals eager, and the lanes of its first kernel (the pointwise one,
    3315 elements)."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(3, 65, 17)
    run = interpreted(codegen, transposed_scatter_prod, x)
    if "error" in run:
        return {"error": run["error"]}
    return {"equal": bool(torch.allclose(run["result"], transposed_scatter_prod(x), rtol=1e-4, atol=1e-4)),
            "lanes": lanes(run["launches"][0].source)}


def folds(location: str) -> dict:
    """The program through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


def as_built(location: str) -> dict:
    """The program through the backend at ``location`` as built (a wheel: its own fold)."""
    from npu_fixes.tools import interpret

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    return run_all(codegen)


if __name__ == "__main__":
    main(globals())
