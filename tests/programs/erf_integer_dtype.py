"""Programs of tests/fixes/test_erf_integer_dtype.py: ``erf`` of integer, bool and float
tensors compiled through a state's backend with its loader's decompositions, kernels run in
Triton's interpreter, compared with eager (dtype and values)."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "erf-integer-dtype"


def run_all(codegen) -> dict:
    """Each program: True where dtype and values equal eager's, else what differs."""
    import torch

    torch.manual_seed(0)
    programs = {
        "erf-int64": (lambda x: torch.erf(x) * 2, torch.arange(-3, 5)),
        "erf-bool": (lambda m: torch.erf(m) + 1, torch.rand(64) > 0.5),
        "erfc-int64": (lambda x: torch.erfc(x), torch.arange(-3, 5)),
        "erf-float32": (lambda x: torch.erf(x) * 2, torch.randn(64)),
    }
    out = {}
    for label, (fn, x) in programs.items():
        run = interpreted(codegen, fn, x)
        if "error" in run:
            out[label] = run["error"]
            continue
        got, want = run["result"], fn(x)
        out[label] = (True if got.dtype == want.dtype and torch.allclose(got, want, atol=1e-6)
                      else f"{got.dtype} {got[:4].tolist()} for {want.dtype} {want[:4].tolist()}")
    return out


def erfs(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
