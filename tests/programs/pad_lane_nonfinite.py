"""Programs of tests/fixes/test_pad_lane_nonfinite.py: looped sums of products with a
reciprocal, log or rsqrt (reduced lengths not a multiple of the block), compiled through a
state's backend, kernels run in Triton's interpreter, compared with eager."""

from __future__ import annotations

import re

from tests.programs import against_eager, interpreted, interpreted_with_npu_fixes, main, step_equals_eager

NAME = "pad-lane-nonfinite"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager (a NaN where eager has none is not), else the
    error; and for the sums of ``g * tanh(x)`` (finite on pad lanes) and ``g * rsqrt(x)``
    (infinite there) whether the accumulation keeps its select (``<label>-select``)."""
    import torch

    torch.manual_seed(0)
    g, x = torch.randn(4, 1000), torch.randn(4, 1000) + 3
    p = torch.softmax(torch.randn(3, 1001), -1)

    programs = {
        "times-reciprocal": (lambda g, x: (g * x.reciprocal()).sum(-1), (g, x)),
        "entropy": (lambda p: -(p * p.log()).sum(-1), (p,)),
        "times-rsqrt": (lambda g, x: (g * x.abs().rsqrt()).sum(-1), (g, x)),
        "times-tanh": (lambda g, x: (g * x.tanh()).sum(-1), (g, x)),
    }
    out = against_eager(codegen, programs, lambda got, want: bool(torch.allclose(got, want, atol=1e-4)))
    out["reciprocal-scalar-grad"] = reciprocal_scalar_grad(codegen)
    for label in ("times-tanh", "times-rsqrt"):
        fn, args = programs[label]
        run = interpreted(codegen, fn, *args)
        out[f"{label}-select"] = any(re.search(r"_tmp\d+ = tl\.where\(", launch.source) for launch in run["launches"])
    return out


def reciprocal_scalar_grad(codegen) -> bool | str:
    """``1 / y * c`` compiled (``1 / y`` is a reciprocal), its backward for a scalar ``c``
    (``sum(w * 1/y)``) and ``y``: True where both gradients equal eager's, else the error."""
    import torch

    torch.manual_seed(0)
    c, y, w = torch.tensor(2.0, requires_grad=True), (torch.rand(10, 5) + 0.5).requires_grad_(), torch.randn(10, 5)

    def grads(fn):
        return torch.autograd.grad((fn(c, y) * w).sum(), (c, y))

    def fn(c, y):
        return 1 / y * c

    return step_equals_eager(codegen, grads, fn, atol=1e-4)


def sums(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
