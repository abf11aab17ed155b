"""Programs of tests/fixes/test_downcast_strides.py: int64 and float64 views with gaps read by
compiled code, through a state's backend, kernels run in Triton's interpreter with the
backend's launcher grid, compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "downcast-strides"


def _programs() -> dict:
    """label -> (function, input view)."""
    import torch

    torch.manual_seed(0)
    return {
        "every-other-row": (lambda x: x * 2, torch.randint(-1000, 1000, (1024, 8))[::2]),
        "first-columns": (lambda x: x + 1, torch.randint(0, 100, (512, 8))[:, :6]),
        "float64-rows": (lambda d: d * 2, torch.rand(768, 16, dtype=torch.float64)[::3]),
        # an output buffer whose elements overlap: the expand's strides (1, 0, 0)
        "expanded-output": (lambda x: x.expand(5, 5, 5), torch.randint(-1000, 1000, (5, 1, 1))),
        # control: a contiguous int64 input keeps its layout through the cast
        "contiguous": (lambda x: x * 2, torch.randint(-1000, 1000, (2048,))),
    }


def run_all(codegen) -> dict:
    """Each program: whether it equals eager, or the error (a read past the copy is one)."""
    import torch

    out = {}
    for label, (fn, x) in _programs().items():
        run = interpreted(codegen, fn, x)
        if "error" in run:
            out[label] = run
            continue
        expected = fn(x)  # float64 is computed in float32 by the kernels: equal to its rounding
        equal = (torch.allclose(run["result"], expected, rtol=1e-6) if expected.is_floating_point()
                 else torch.equal(run["result"], expected))
        out[label] = {"equal": bool(equal)}
    return out


def views(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
