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


def model_ir_ops(location: str, with_fixes: bool) -> dict:
    """BatchNormTagger (a ReLU after a BatchNorm) trained one step through the backend at
    ``location`` on CPU, as ``npu-fixes accuracy --interpret`` runs it, with or without
    npu_fixes: the kernels it launched, how many of them the host IR build takes, the min/max
    ops of their Triton IR counted, and the kernels' ``tl.minimum``/``tl.maximum`` calls."""
    import collections

    from npu_fixes.tools import accuracy, interpret
    from npu_fixes.tools.accuracy_models import MODELS

    accuracy.configure(None)
    codegen = accuracy.load_interpreted(location, with_fixes)
    model, inputs = MODELS["BatchNormTagger"]("cpu", 0)
    with interpret.cpu_device(codegen) as launches:
        _torch().compile(model)(**inputs)["loss"].backward()
    counts, sources, built = collections.Counter(), {launch.source for launch in launches}, 0
    for source in sources:
        try:  # the IR build types every pointer *fp32: kernels that index with loaded values fail it
            ir_text = triton_ir("@triton.jit\n" + re.sub(r"def \w+\(", "def kernel(", source, count=1))
        except Exception:  # noqa: BLE001 - counted as not built
            continue
        built += 1
        counts.update(IR_OPS.findall(ir_text))
    return {"kernels": len(sources), "built": built, "ir_ops": dict(counts),
            "minmax_calls": sorted(set(sum((MINMAX.findall(s) for s in sources), [])))}


if __name__ == "__main__":
    main(globals())
