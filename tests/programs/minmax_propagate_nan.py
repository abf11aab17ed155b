"""Programs of tests/fixes/test_minmax_propagate_nan.py."""

from __future__ import annotations

import re

from tests.programs import host_load, main
from tests.programs.rank_mismatch import activate, generate, triton_ir


def _torch():
    import torch

    return torch


#: label -> (function of one float tensor, shape): each lowers through ops.minimum/maximum.
PROGRAMS = {
    "relu": (lambda x: x.relu(), (64,)),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), (64,)),
    "hardtanh": (lambda x: _torch().nn.functional.hardtanh(x), (64,)),
    "maximum": (lambda x: _torch().maximum(x, 3.0 - x), (64,)),
    "minimum": (lambda x: _torch().minimum(x, 3.0 - x), (64,)),
    "amax-looped": (lambda x: x.amax(-1), (2, 65536)),  # the accumulation runs in a loop
}
MINMAX = re.compile(r"tl\.(?:minimum|maximum)\([^\n]*")
IR_OPS = re.compile(r"arith\.(?:minnumf|maxnumf|minimumf|maximumf)")


def kernels(mod) -> dict:
    """Each program's kernels as the live codegen (``mod``) generates them: their
    ``tl.minimum`` / ``tl.maximum`` calls and the min/max ops of their Triton IR."""
    out = {}
    for label, (fn, shape) in PROGRAMS.items():
        found = generate(mod, fn, shape)
        if "error" in found:
            out[label] = {"error": found["error"]}
            continue
        calls, ops = [], []
        for kernel in found["kernels"]:
            calls += MINMAX.findall(kernel["body"])
            ops += IR_OPS.findall(triton_ir("@triton.jit\n" + kernel["body"]))
        out[label] = {"calls": calls, "ir_ops": sorted(ops)}
    return out


def emitted(location: str) -> dict:
    """The backend activated; the probe; the kernels of PROGRAMS; then, where the probe
    says needed, the fix installed (a fresh Patcher), probe and kernels again, and undo."""
    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import minmax_propagate_nan as fix
    from npu_fixes.shim.patcher import Patcher

    activate(mod)
    first = fix.probe(mod)
    result = {"probe_before": [first.defective, first.detail], "before": kernels(mod)}
    if first.defective:
        patcher = Patcher()
        fix.FIX.install(mod, patcher)
        result["patched"] = len(patcher)
        after = fix.probe(mod)
        result["probe_after"] = [after.defective, after.detail]
        result["after"] = kernels(mod)
        result["undo"] = patcher.restore()
        result["probe_undone"] = fix.probe(mod).defective
    return result


if __name__ == "__main__":
    main(globals())
