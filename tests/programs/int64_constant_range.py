"""Programs of tests/fixes/test_int64_constant_range.py: int64 constants in kernels that hold
int64 in int32, compiled through a state's backend, kernels run in Triton's interpreter,
compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "int64-constant-range"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error the compile or kernel raised
    (the interpreter refuses a constant int32 cannot hold; npu_fixes refuses one it cannot
    narrow)."""
    import torch

    negatives = -(torch.arange(6 * 9).reshape(6, 9) % 7) - 1
    mask = (torch.arange(6 * 9).reshape(6, 9) % 4) != 1
    programs = {
        "masked-amax-negative": (lambda x, m: torch.masked.amax(x, 1, mask=m), (negatives, mask)),
        "masked-amin": (lambda x, m: torch.masked.amin(x, 1, mask=m), (-negatives, mask)),
        "masked-argmax": (lambda x, m: torch.masked.argmax(x, 1, mask=m), (negatives, mask)),
        "in-range-constant": (lambda x: x * 1000 + 7, (negatives,)),
        "constant-past-int32": (lambda x: x + 2 ** 40, (negatives,)),
    }
    return against_eager(codegen, programs, lambda actual, expected: bool(torch.equal(actual, expected)))


def masked_reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
