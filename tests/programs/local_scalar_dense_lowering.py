"""Programs of tests/fixes/test_local_scalar_dense_lowering.py: graphs that use a float
``.item()`` with ``capture_scalar_outputs=True``, compiled through a state's backend, kernels
run in Triton's interpreter with the backend's launcher grid, compared with eager."""

from __future__ import annotations

import os

from tests.programs import host_load, main

NAME = "local-scalar-dense-lowering"


def _programs() -> dict:
    import torch

    return {
        "clamp-max-item": lambda x, y: torch.clamp(y, max=x.max().item()),
        "scale-by-item": lambda x, y: y * x.sum().item() + 1.0,  # builds at every state
    }


def run_all(codegen) -> dict:
    """Each program compiled and run on the interpreter device: equal to eager, or the error."""
    import torch
    import torch._dynamo.config as dynamo_config

    from npu_fixes.tools import interpret

    out = {}
    for label, fn in _programs().items():
        torch.manual_seed(0)
        x, y = torch.randn(8, 16), torch.randn(8, 16) * 4
        want = fn(x, y)
        with dynamo_config.patch(capture_scalar_outputs=True), interpret.cpu_device(codegen):
            try:
                got = torch.compile(fn)(x, y)
            except Exception as exc:  # noqa: BLE001 - recorded
                out[label] = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
                continue
        out[label] = {"equal": bool(torch.allclose(got, want))}
    return out


def item(location: str) -> dict:
    """The probe; the programs without npu_fixes; then with ``npu_fixes.apply()``: the
    fix's state, the probe and the programs again; then undo."""
    lowering = host_load(location).modules["lowering"]
    codegen = lowering.__name__.rsplit(".", 1)[0] + ".codegen.triton"
    import sys

    from npu_fixes.tools import interpret

    interpret.activate(sys.modules[codegen])
    import npu_fixes

    fix = npu_fixes.registry().fixes[NAME]
    first = fix.probe(lowering)
    result = {"probe_before": [first.defective, first.detail], "before": run_all(sys.modules[codegen])}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["probe_after"] = fix.probe(lowering).defective
    result["after"] = run_all(sys.modules[codegen])
    result["undone"] = npu_fixes.undo() > 0 and fix.probe(lowering).defective
    return result


if __name__ == "__main__":
    main(globals())
