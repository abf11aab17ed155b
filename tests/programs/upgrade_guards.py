"""Programs of the guards' tests: tests/fixes/test_nd_reduction.py, test_promoted_epilogue.py,
and test_slice_scatter_offset.py."""

from __future__ import annotations

import inspect
import os

from tests.programs import host_load, main

CASES = {
    "1d-inner": ({"x": 64, "r0_": 512}, "INNER"),
    "1d-outer": ({"x": 1024, "r0_": 64}, "OUTER"),
    "1d-default": ({"x": 8, "r0_": 100000}, "DEFAULT"),
    "1d-scalar": ({"x": 1, "r0_": 4096}, "INNER"),
    "2d": ({"x": 2, "r0_": 2, "r1_": 2}, "DEFAULT"),
    "2d-large": ({"x": 16, "r0_": 128, "r1_": 64}, "INNER"),
}


def call(heur, hints, hint):
    """The live ``reduction`` of ``heur`` (wrappers included) with ``cached_autotune``
    replaced by a scoped recorder: the candidate configs, or the NotImplementedError."""
    from torch._inductor.runtime.hints import ReductionHint

    from npu_fixes.shim.scoped import with_globals

    recorded = []
    live = with_globals(inspect.getattr_static(heur, "reduction"),
                        {"cached_autotune": lambda sizes, configs, **kw: recorded.append(configs) or "tuner"})
    meta = {"signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32",
                          **{f"{k}numel": "i32" for k in hints if k != "x"}}, "constants": {}}
    try:
        live(dict(hints), getattr(ReductionHint, hint), triton_meta=meta, inductor_meta={})
    except NotImplementedError as exc:
        return {"raised": type(exc).__name__, "nie": True, "text": str(exc),
                "cause": type(exc.__cause__).__name__ if exc.__cause__ else None}
    return {"configs": sorted(str(c) for c in recorded[0])}


def battery(heur):
    """Every case of the reduction heuristic, with tile_reductions off and on."""
    from torch._inductor import config

    out = {}
    for tile in (False, True):
        with config.patch({"triton.tile_reductions": tile}):
            for label, (hints, hint) in CASES.items():
                out[f"{label}|tile={tile}"] = call(heur, hints, hint)
    return out


def guarded(location: str, name: str) -> dict:
    """NPU_FIXES=0 keeps the registered fixes out; a Registry of the guard ``name`` alone
    decides it with the shim's own rules: the probe, state and patches, and that guard's
    observations (nd-reduction: the heuristic battery before and after; slice-scatter-offset:
    the masked offsets; promoted-epilogue: the rewritten epilogue)."""
    mods = host_load(location).modules
    from npu_fixes.fixes import nd_reduction as nd
    from npu_fixes.fixes import promoted_epilogue as pe
    from npu_fixes.fixes import slice_scatter_offset as ss
    from npu_fixes.shim.registry import Registry

    os.environ.pop("NPU_FIXES", None)
    heur, cg = mods["npu_triton_heuristics"], mods["codegen.triton"]
    module, attr, fix = {"nd-reduction": (heur, "reduction", nd.FIX),
                         "promoted-epilogue": (cg, pe.TARGET, pe.FIX),
                         "slice-scatter-offset": (cg, "NPUTritonKernel", ss.FIX)}[name]
    original = inspect.getattr_static(module, attr)
    result = {"before": battery(heur)} if name == "nd-reduction" else {}
    result["probe"] = [(p := fix.probe(module)).defective, p.detail]
    registry = Registry([fix])
    record = registry.evaluate(fix, module)
    result["state"] = [record.state.value, record.detail]
    result["patched"] = len(registry.patcher)
    result["identical"] = inspect.getattr_static(module, attr) is original
    if name == "nd-reduction":
        result["probe_after"] = [(p := nd.probe(heur)).defective, p.detail]
        result["after"] = battery(heur)
    result["restored"] = registry.patcher.restore()
    result["identical_after_restore"] = inspect.getattr_static(module, attr) is original
    if name == "slice-scatter-offset":
        result["offsets"] = ss.masked_offsets(cg)
    if name == "promoted-epilogue":
        result["epilogue"] = [str(getattr(line, "line", line)) for line in pe.rewrite_epilogue(cg)]
    return result


if __name__ == "__main__":
    main(globals())
