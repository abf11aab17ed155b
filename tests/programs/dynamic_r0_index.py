"""Programs of tests/fixes/test_dynamic_r0_index.py: reductions over sizes passed as
arguments, compiled with ``dynamic=True`` through a state's backend, kernels run in Triton's
interpreter, compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "dynamic-r0-index"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error."""
    import torch

    def sliced_mean(x, n0, n1):  # the sweep's gen:144
        y = x.reshape(1024, 1024)[226::2].reshape(n0, n1)
        return y.float().mean([0, 1]) * 2 + 1

    def reshaped_sum(x, n0, n1):
        return x.reshape(n0, n1).sum()

    def rows_amax(x, n0, n1):
        return x.t().reshape(n0, n1).amax(dim=(0, 1))

    torch.manual_seed(0)
    programs = {
        "sliced-mean": (sliced_mean, (torch.rand(1, 1 << 20) > 0.5, 2688, 152)),
        "reshaped-sum": (reshaped_sum, (torch.randn(96, 70), 48, 140)),
        "transposed-amax": (rows_amax, (torch.randn(40, 66), 22, 120)),
    }
    return against_eager(codegen, programs, lambda got, want: bool(torch.allclose(got, want, rtol=1e-5, atol=1e-5)),
                         dynamic=True)


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
