"""Programs of tests/fixes/test_widened_load_tail.py: strided slices and selects whose loads
the backend widens, compiled through a state's backend, kernels run in Triton's
interpreter (every load bounds-checked), compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "widened-load-tail"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error (an out-of-bounds load)."""
    import torch

    torch.manual_seed(0)
    programs = {
        "rope-odd-lanes": (lambda x: x[..., 1::2] * 2, (torch.randn(4, 8, 64),)),
        "grid-column-1": (lambda g: g[..., 1] * 2.5 + 2, (torch.randn(2, 5, 26, 2),)),
        "select-times": (lambda x, y: x[:, 1:2] * y, (torch.randn(33, 2), torch.randn(33, 5))),
        "grid-sample": (lambda a, g: torch.nn.functional.grid_sample(a, g, align_corners=False),
                        (torch.randn(1, 1, 6, 6), torch.rand(1, 5, 26, 2) * 2 - 1)),
    }
    out = {}
    for label, (fn, args) in programs.items():
        run = interpreted(codegen, fn, *args)
        out[label] = run["error"] if "error" in run else bool(torch.allclose(run["result"], fn(*args), atol=1e-5))
    return out


def loads(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
