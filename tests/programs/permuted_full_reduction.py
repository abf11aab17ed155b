"""Programs of tests/fixes/test_permuted_full_reduction.py: full reductions of permuted
views compiled through a state's backend, kernels run in Triton's interpreter with the
backend's launcher grid, compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "permuted-full-reduction"


def _programs() -> dict:
    """label -> (function, input shape)."""
    def t(x):
        return x.view(64, 16).t()

    return {
        "sum": (lambda x: t(x).reshape(-1).sum(), (1024,)),
        "amax": (lambda x: t(x).reshape(-1).amax(), (1024,)),
        "sum+1": (lambda x: t(x).reshape(-1).sum() + 1, (1024,)),
        "permute3-sum": (lambda x: x.view(8, 16, 8).permute(2, 0, 1).reshape(-1).sum(), (1024,)),
        # controls: built right at every state
        "keepdim-sum": (lambda x: t(x).sum((0, 1), keepdim=True), (1024,)),
        "2d-t-sum": (lambda x: x.t().sum(), (32, 48)),
    }


def run_all(codegen) -> dict:
    """Each program: equal to eager, or the error."""
    import torch

    out = {}
    for label, (fn, shape) in _programs().items():
        torch.manual_seed(0)
        x = torch.randn(shape)
        run = interpreted(codegen, fn, x)
        out[label] = run if "error" in run else {
            "equal": bool(torch.allclose(run["result"], fn(x), rtol=1e-4, atol=1e-4))}
    return out


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
