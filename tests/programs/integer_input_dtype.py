"""Programs of tests/fixes/test_integer_input_dtype.py: ``erf`` and dropout's backward of
integer, bool and float tensors compiled through a state's backend with its loader's
decompositions, kernels run in Triton's interpreter, compared with eager (dtype and values)."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "integer-input-dtype"


def run_all(codegen) -> dict:
    """Each program: True where dtype and values equal eager's, else what differs."""
    import torch

    def dropout_backward(scale):
        return lambda g, m: torch.ops.aten.native_dropout_backward(g, m, scale) + 1

    torch.manual_seed(0)
    ints, keep = torch.arange(-3, 5), torch.rand(8) > 0.5
    programs = {
        "erf-int64": (lambda x: torch.erf(x) * 2, (ints,)),
        "erf-bool": (lambda m: torch.erf(m) + 1, (keep,)),
        "erfc-int64": (torch.erfc, (ints,)),
        "erf-float32": (lambda x: torch.erf(x) * 2, (torch.randn(64),)),
        "dropout-backward-int64-scale-0": (dropout_backward(0.0), (ints, keep)),
        "dropout-backward-int64-scale-1": (dropout_backward(1.0), (ints, torch.ones(8, dtype=torch.bool))),
        "dropout-backward-float32": (dropout_backward(2.0), (torch.randn(8), keep)),
    }
    def judge(got, want):
        if got.dtype == want.dtype and torch.allclose(got, want, atol=1e-6):
            return True
        return f"{got.dtype} {got[:4].tolist()} for {want.dtype} {want[:4].tolist()}"

    return against_eager(codegen, programs, judge)


def programs(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
