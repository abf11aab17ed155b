"""Programs of tests/fixes/test_nonlinearize_grid.py: reductions compiled through a
state's backend with ``codegen_linearize`` off and on, kernels run in Triton's interpreter
with the backend's launcher grid, compared with eager."""

from __future__ import annotations

import os

from tests.programs import host_load, innermost, main

NAME = "nonlinearize-grid"
#: label -> (function, shape)
PROGRAMS = {
    "sum": (lambda x: x.sum(-1), (64, 128)),
    "sum-long": (lambda x: x.sum(-1), (512, 256)),
    "amax": (lambda x: x.amax(-1), (96, 64)),
}


def run_all(codegen, linearize: bool) -> dict:
    """Each program compiled with the codegen's setting at ``linearize``: equal to eager
    and the grids launched; or the error."""
    import torch

    from npu_fixes.tools import interpret

    codegen.triton_codegen_linearize = codegen.ncfg.codegen_linearize = linearize
    out = {}
    for label, (fn, shape) in PROGRAMS.items():
        torch._dynamo.reset()
        x = torch.randn(shape)
        with interpret.cpu_device(codegen) as launches:
            try:
                got = torch.compile(fn)(x)
            except Exception as exc:  # noqa: BLE001 - recorded
                out[label] = {"error": innermost(exc)}
                continue
        out[label] = {"equal": bool(torch.allclose(got, fn(x), atol=1e-4)),
                      "grids": [launch.grid[0] for launch in launches]}
    codegen.triton_codegen_linearize = codegen.ncfg.codegen_linearize = True
    return out


def grid(location: str) -> dict:
    """The probe; the programs with the setting off, without npu_fixes; then with
    ``npu_fixes.apply()``: the guard's state, the programs with the setting off and on."""
    loaded = host_load(location)
    codegen, heuristics = loaded.modules["codegen.triton"], loaded.modules["npu_triton_heuristics"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    import npu_fixes

    first = npu_fixes.registry().fixes[NAME].probe(heuristics)
    result = {"probe_before": [first.defective, first.detail], "off_before": run_all(codegen, False)}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["off_after"] = run_all(codegen, False)
    result["on_after"] = run_all(codegen, True)
    return result


if __name__ == "__main__":
    main(globals())
