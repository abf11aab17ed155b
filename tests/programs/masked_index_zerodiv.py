"""Programs of tests/fixes/test_masked_index_zerodiv.py: ``slice_scatter`` of a reshaped
view compiled with dynamic shapes through a state's backend (a masked load whose address
takes a modulus by a size symbol), kernels run in Triton's interpreter with the backend's
launcher grid, compared with eager."""

from __future__ import annotations

import os

from tests.programs import host_load, innermost, main

NAME = "masked-index-zerodiv"


def _shuffled(x):
    """Pairs of rows interleaved: the view's address takes ``% s`` and ``// s`` of sizes."""
    return x.reshape(x.shape[0] // 2, 2, -1).transpose(1, 2).reshape(x.shape[0] // 2, -1)


def _into_wider(x):
    import torch

    rows, cols = x.shape[0] // 2, 2 * x.shape[1]
    return torch.slice_scatter(torch.zeros(rows, cols + 2), _shuffled(x), 1, 1, cols + 1) + 1


def _flat_into_longer(x):
    import torch

    return torch.slice_scatter(torch.zeros(x.numel() + 2), x.t().reshape(-1), 0, 1, x.numel() + 1) + 1


#: label -> function; each compiled with ``dynamic=True``.
PROGRAMS = {"into-wider": _into_wider, "flat-into-longer": _flat_into_longer}


def run_all(codegen) -> dict:
    """Each program on two shapes (one compile, a dynamic one): equal to eager, how many
    addresses of loads its kernels clamp with ``tl.maximum``; or the error."""
    import torch

    from npu_fixes.tools import interpret

    out = {}
    for label, fn in PROGRAMS.items():
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=True)
        equal = []
        with interpret.cpu_device(codegen) as launches:
            try:
                for shape in ((8, 12), (6, 10)):
                    x = torch.randn(shape)
                    equal.append(bool(torch.equal(compiled(x), fn(x))))
            except Exception as exc:  # noqa: BLE001 - recorded
                out[label] = {"error": innermost(exc)}
                continue
        out[label] = {"equal": equal, "clamps": sum(line.count("tl.maximum(") for launch in launches
                                                    for line in launch.source.splitlines() if "tl.load(" in line)}
    return out


def scatter(location: str) -> dict:
    """The probe (None where the function does not exist); the programs without npu_fixes;
    then with ``npu_fixes.apply()``: the fix's state, the probe and the programs again."""
    codegen = host_load(location).modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    import npu_fixes

    fix = npu_fixes.registry().fixes[NAME]
    present = hasattr(codegen, "_masked_index_needs_nonnegative_clamp")
    first = fix.probe(codegen) if present else None
    result = {"probe_before": [first.defective, first.detail] if first else None, "before": run_all(codegen)}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["after"] = run_all(codegen)
    if present:
        result["probe_after"] = fix.probe(codegen).defective
        result["undone"] = npu_fixes.undo() > 0 and fix.probe(codegen).defective
    return result


if __name__ == "__main__":
    main(globals())
