"""Programs of tests/fixes/test_upgrade_guards.py."""

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


def guarded(location: str) -> dict:
    """NPU_FIXES=0 keeps the registered fixes out; a Registry of the four guards decides
    them with the shim's own rules: the probes, states and patches, the heuristic battery
    before and after, and the codegen observations."""
    mods = host_load(location).modules
    from npu_fixes.fixes import nd_reduction as nd
    from npu_fixes.fixes import partial_view_fold as lm
    from npu_fixes.fixes import promoted_epilogue as cm
    from npu_fixes.fixes import slice_scatter_offset as ss
    from npu_fixes.shim.registry import Registry

    os.environ.pop("NPU_FIXES", None)
    heur, cg = mods["npu_triton_heuristics"], mods["codegen.triton"]
    targets = (("nd-reduction", heur, "reduction"), ("promoted-epilogue", cg, cm.TARGET),
               ("slice-scatter-offset", cg, "NPUTritonKernel"), ("partial-view-fold", cg, "NPUTritonScheduling"))
    original = {n: inspect.getattr_static(m, t) for n, m, t in targets}
    guards = ((nd.FIX, heur), (cm.FIX, cg), (ss.FIX, cg), (lm.FIX, cg))
    result = {"before": battery(heur)}
    result["probe"] = {f.name: [(p := f.probe(m)).defective, p.detail]
                       for f, m in guards}
    registry = Registry([f for f, _ in guards])
    records = {f.name: registry.evaluate(f, m) for f, m in guards}
    result["state"] = {n: [r.state.value, r.detail] for n, r in records.items()}
    result["patched"] = len(registry.patcher)
    result["identical"] = {n: inspect.getattr_static(m, t) is original[n] for n, m, t in targets}
    result["probe_after"] = [(p := nd.probe(heur)).defective, p.detail]
    result["after"] = battery(heur)
    result["restored"] = registry.patcher.restore()
    result["identical_after_restore"] = inspect.getattr_static(heur, "reduction") is original["nd-reduction"]
    result["offsets"] = ss.masked_offsets(cg)
    result["epilogue"] = [str(getattr(line, "line", line)) for line in cm.rewrite_epilogue(cg)]
    return result


if __name__ == "__main__":
    main(globals())
