"""Programs of tests/test_interpret.py that compile through a host-loaded backend."""

from __future__ import annotations

from tests.programs import host_load, interpreted, main


def nan_reductions(location: str) -> dict:
    """``amax``/``amin`` of rows holding a NaN, compiled through the backend at ``location``,
    kernels in the interpreter: label -> whether the result equals eager's, NaN included."""
    import torch

    from npu_fixes.tools import interpret

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    x = torch.rand(4, 64)
    x[1, 7] = x[3, 0] = float("nan")
    out = {}
    for label, fn in {"amax": lambda t: t.amax(-1), "amin": lambda t: t.amin(-1),
                      "max-of-all": lambda t: t.max()}.items():
        run = interpreted(codegen, fn, x)
        out[label] = run if "error" in run else bool(torch.allclose(run["result"], fn(x), equal_nan=True))
    return out


if __name__ == "__main__":
    main(globals())
