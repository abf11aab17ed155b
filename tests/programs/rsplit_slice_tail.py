"""Programs of tests/fixes/test_rsplit_slice_tail.py: sums over 2^16 elements (a length
Inductor drops the mask for) compiled through a state's backend, kernels run in Triton's
interpreter with the backend's launcher grid, compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "rsplit-slice-tail"
N = 2**16


def _programs() -> dict:
    """label -> (function, input): the reductions read the first N of N + 4096 elements
    (a view), so that a read past the tensor stays inside the buffer and shows as a value."""
    import torch

    torch.manual_seed(0)
    padded = torch.rand(N + 4096)[:N]
    return {
        "sum": (lambda x: x.sum(), padded),
        "mean": (lambda x: x.mean(), padded),
        "square-sum": (lambda x: (x * x).sum(), padded),
        "outer-sum": (lambda x: x.view(N, 8).sum(0), torch.rand(8 * N + 4096)[:8 * N]),
        "sum-exact-buffer": (lambda x: x.sum(), torch.rand(N)),  # a read past it leaves the buffer
        # controls: a length that keeps its mask, and one too short to be split
        "sum-masked": (lambda x: x.sum(), torch.rand(N + 512)),
        "sum-short": (lambda x: x.sum(), torch.rand(4096)),
    }


def run_all(codegen) -> dict:
    """Each program: equal to eager (and the launches' programs), or the error."""
    import torch

    out = {}
    for label, (fn, x) in _programs().items():
        run = interpreted(codegen, fn, x)
        out[label] = run if "error" in run else {
            "equal": bool(torch.allclose(run["result"], fn(x), rtol=1e-4, atol=1e-3)),
            "launches": [[launch.grid[0], launch.busy] for launch in run["launches"]]}
    return out


def tails(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
