"""Programs of tests/fixes/test_auto_blockify_option.py."""

from __future__ import annotations

import functools
import itertools
import types

from tests.programs import host_load, main

OPTION = "auto_blockify_size"
NAMES = ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"]


def kernel(in_ptr0, out_ptr0, xnumel, XBLOCK):
    pass


FN = types.SimpleNamespace(fn=kernel, arg_names=NAMES, constexprs=[3], __name__="kernel")


def triton_meta(device) -> dict:
    """The 1D pointwise kernel's meta on ``device``."""
    return {"signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"},
            "device": device, "constants": {}, "configs": [{}]}


def describe(cfg) -> list:
    return [cfg.kwargs, getattr(cfg, "extra_options", None), cfg.num_warps, cfg.num_stages]


def battery(m) -> dict:
    """Builds the real 1D pointwise autotuner at 2^20, 2^30 and 2^33 elements, with and
    without autotune_enhance, then compiles every candidate through the real
    ``_precompile_config`` (real ASTSource; ``triton.compile`` records the kernel constants
    and the options it gets; the GPU driver switch is a no-op on CPU), runs the small-block
    fallback from a candidate with the option, and feeds cached_autotune (caching on,
    AutotuneCache recorded) lists that differ only in the option."""
    from unittest import mock

    import triton
    import triton.compiler.errors
    from torch._inductor.runtime import triton_helpers
    from torch._inductor.runtime.hints import DeviceProperties
    from torch._inductor.runtime.triton_heuristics import hash_configs as inductor_hash

    device = DeviceProperties(type="npu", index=0, multi_processor_count=48, cc="Ascend910B", warp_size=None)
    seen = []

    def record(src, target=None, options=None):
        seen.append({"constants": sorted(NAMES[k[0]] for k in src.constants),
                     "options": {k: options[k] for k in ("num_warps", "num_stages", OPTION) if k in options}})
        return types.SimpleNamespace()

    def outcome(run):
        seen.clear()
        try:
            run()
        except Exception as exc:
            return ["error", f"{type(exc).__name__}: {exc}"]
        return ["compiled", list(seen)]

    out = {}
    with mock.patch.object(triton, "compile", record), \
         mock.patch.object(triton_helpers, "set_driver_to_gpu", lambda: None), \
         mock.patch.object(triton.compiler.errors, "MLIRCompilationError", type("E", (Exception,), {}), create=True):
        for enhance, numel in itertools.product((True, False), (2**20, 2**30, 2**33)):
            with mock.patch.object(m, "autotune_enhance", enhance):
                tuner = m.pointwise({"x": numel}, triton_meta(device), filename="/tmp/npu_fixes_abo.py",
                                    inductor_meta={"force_disable_caches": True, "kernel_name": "k"})(FN)
            configs = list(tuner.configs)
            case = {"configs": [describe(c) for c in configs],
                    "compiled": [outcome(functools.partial(tuner._precompile_config, c)) for c in configs]}
            blockified = [c for c in configs if OPTION in c.kwargs or OPTION in (getattr(c, "extra_options", None) or {})]
            if blockified:
                tuner.configs = [blockified[-1]]
                case["fallback"] = outcome(tuner._compile_small_block_fallback)
            out[f"enhance={enhance}|numel={numel}"] = case
    hashes = []

    def kept(configs):
        cache = types.SimpleNamespace(create=lambda meta, filename, configs_hash: hashes.append(configs_hash))
        with mock.patch.object(m, "AutotuneCache", cache):
            tuner = m.cached_autotune({"x": 2**30}, configs, triton_meta=triton_meta(device), heuristic_type=None,
                                      filename="/tmp/npu_fixes_abo.py", inductor_meta={"kernel_name": "k"})(FN)
        return [describe(c) for c in tuner.configs]

    make, hint = m.npu_triton_config, {"x": 2**30}
    out["dedup"] = kept([make(hint, 1024), make(hint, 1024, auto_blockify_size=2),
                         make(hint, 1024, auto_blockify_size=2), make(hint, 1024, auto_blockify_size=4)])
    kept([make(hint, 1024), make(hint, 1024, auto_blockify_size=2)])
    kept([make(hint, 1024), make(hint, 1024, auto_blockify_size=4)])
    plain = [make(hint, 1024), make(hint, 2048)]
    kept(plain)
    out["hash"] = {"option_distinct": hashes[1] != hashes[2], "plain_is_inductors": hashes[3] == inductor_hash(plain)}
    return out


def targets(m, fix) -> list:
    """The objects the fix's targets name right now."""
    import inspect

    from npu_fixes.shim.fix import resolve_owner

    return [inspect.getattr_static(*resolve_owner(m, t)) for t in fix.FIX.targets]


def parts(m, fix) -> list:
    """The probe with the first 1..4 wrappers installed (each part is needed)."""
    from npu_fixes.shim.patcher import Patcher

    wrappers = [(fix.CONFIG_FN, fix.make_config), (fix.PRECOMPILE, fix.precompile),
                (fix.AUTOTUNE, fix.autotune), (fix.FALLBACK, fix.small_block_fallback)]
    found_parts = []
    for n in range(1, len(wrappers) + 1):
        p = Patcher()
        for target, wrapper in wrappers[:n]:
            p.wrap_path(m, target, wrapper)
        found = fix.probe(m)
        found_parts.append([found.defective, found.detail])
        p.restore()
    return found_parts


def probe_and_battery(location: str, run_battery: bool, with_parts: bool) -> dict:
    """The probe (and, with ``run_battery``, the battery) before and, where the probe says
    needed, after the fix is installed with a fresh Patcher and undone; whether every
    target is the original object at the end; with ``with_parts``, the ``parts``."""
    m = host_load(location).modules["npu_triton_heuristics"]
    from npu_fixes.fixes import auto_blockify_option as fix
    from npu_fixes.shim.patcher import Patcher

    result = {}
    first = targets(m, fix)
    before = fix.probe(m)
    result["probe"] = [before.defective, before.detail]
    if run_battery:
        result["battery"] = battery(m)
    if before.defective:
        patcher = Patcher()
        fix.FIX.install(m, patcher)
        after = fix.probe(m)
        result["probe_after"] = [after.defective, after.detail]
        if run_battery:
            result["battery_after"] = battery(m)
        result["undo"] = patcher.restore()
    result["untouched"] = all(a is b for a, b in zip(targets(m, fix), first, strict=False))
    if with_parts:
        result["parts"] = parts(m, fix)
    return result


if __name__ == "__main__":
    main(globals())
