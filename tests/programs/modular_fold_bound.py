"""Programs of tests/fixes/test_modular_fold_bound.py: chains of reshapes and transposes
whose input index holds a modulo of a modulo, compiled through a state's backend, kernels
run in Triton's interpreter (every load bounds-checked), compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "modular-fold-bound"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error."""
    import torch

    def chain(a, b):
        return lambda x: x.reshape(a, b).t().reshape(2, a * b // 2).t().reshape(2, a * b // 2).sum(0)

    torch.manual_seed(0)
    programs = {
        "reshape-6x3": (chain(6, 3), (torch.randn(18),)),
        "reshape-10x3": (chain(10, 3), (torch.randn(30),)),
        "reshape-4x5": (chain(4, 5), (torch.randn(20),)),
        "transpose-sum": (lambda x: x.reshape(6, 3).t().sum(0), (torch.randn(18),)),
    }
    return against_eager(codegen, programs, lambda got, want: bool(torch.allclose(got, want)))

def chains(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
