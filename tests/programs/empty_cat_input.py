"""Programs of tests/fixes/test_empty_cat_input.py: concats with empty inputs compiled
through a state's backend, kernels run in Triton's interpreter, compared with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "empty-cat-input"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error."""
    import torch

    programs = {
        "all-empty": (lambda a, b: torch.cat([a, b]) + 1, (torch.zeros(0, 3), torch.zeros(0, 3))),
        "tril-indices": (lambda x: torch.tril_indices(0, 3) + x.long(), (torch.zeros(1),)),
        "one-empty": (lambda a, b: torch.cat([a, b, b * 2]) + 1, (torch.zeros(0, 3), torch.randn(2, 3))),
    }
    out = {}
    for label, (fn, args) in programs.items():
        run = interpreted(codegen, fn, *args)
        out[label] = run["error"] if "error" in run else bool(torch.equal(run["result"], fn(*args)))
    return out


def concats(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
