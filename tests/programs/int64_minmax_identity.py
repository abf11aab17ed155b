"""Programs of tests/fixes/test_int64_minmax_identity.py: max and min reductions over int64
values compiled through a state's backend, kernels run in Triton's interpreter, compared
with eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "int64-minmax-identity"


def run_all(codegen) -> dict:
    """Each reduction: True where it equals eager, else the error the compile or kernel raised
    (the interpreter refuses a constant int32 cannot hold)."""
    import torch

    negatives = -(torch.arange(7 * 13).reshape(7, 13) % 11) - 1
    programs = {
        "amin-arange": (lambda x: x.amin(), torch.arange(20)),
        "amax-negative": (lambda x: x.amax(), negatives),
        "max-dim": (lambda x: x.max(1).values, negatives),
        "amin-long-rows": (lambda x: x.amin(1), torch.arange(4 * 5000).reshape(4, 5000) + 7),
    }
    out = {}
    for label, (fn, x) in programs.items():
        run = interpreted(codegen, fn, x.clone())
        out[label] = run["error"] if "error" in run else bool(torch.equal(run["result"], fn(x)))
    return out


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
