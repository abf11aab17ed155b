"""Programs of tests/fixes/test_downcast_workspace.py: integer, bool and float64 sums the
backend splits across cores, compiled through a state's backend, kernels run in Triton's
interpreter with the backend's launcher grid, compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "downcast-workspace"


def _programs() -> dict:
    """label -> (function, input)."""
    import torch

    torch.manual_seed(0)
    labels = torch.randint(0, 1000, (4, 1024))
    labels[torch.rand(4, 1024) < 0.25] = -100
    return {
        "count-tokens": (lambda t: (t != -100).sum(), labels),  # a loss's token count: bool -> int64
        "mask-lengths": (lambda m: m.sum(-1), (torch.rand(4, 4096) < 0.5).long()),
        "int64-columns": (lambda x: x.sum(0), torch.randint(-50, 50, (4096, 8))),
        "int32-sum": (lambda x: x.sum(), torch.randint(-50, 50, (8192,), dtype=torch.int32)),
        "float64-sum": (lambda x: x.sum(), torch.rand(8192, dtype=torch.float64)),
        # control: a float32 sum of the same size has no narrowed workspace
        "float32-sum": (lambda x: x.sum(), torch.rand(8192)),
    }


def run_all(codegen) -> dict:
    """Each program: whether it equals eager, and its launches' grids, or the error."""
    import torch

    out = {}
    for label, (fn, x) in _programs().items():
        run = interpreted(codegen, fn, x)
        if "error" in run:
            out[label] = run
            continue
        expected = fn(x)
        equal = (torch.allclose(run["result"], expected, rtol=1e-5) if expected.is_floating_point()
                 else torch.equal(run["result"], expected))
        out[label] = {"equal": bool(equal), "grids": [launch.grid[0] for launch in run["launches"]]}
    return out


def sums(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
