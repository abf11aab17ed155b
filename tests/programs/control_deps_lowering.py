"""Programs of tests/fixes/test_control_deps_lowering.py (and the end-to-end frame that
tests/programs/index_put_dtype.py shares)."""

from __future__ import annotations

from tests.programs import host_load, main

STAND_INS = ("control_deps", "sort", "mul", "assert_scalar")


def scoped_registration(low, overrides: dict):
    """The live registration, scoped as the probes do: it runs with ``overrides`` of its
    globals (and an empty EXPLICIT_FALLBACK_LIST where the state has one)."""
    import inspect

    from npu_fixes.shim.scoped import with_globals

    if hasattr(low, "EXPLICIT_FALLBACK_LIST"):
        overrides = {**overrides, "EXPLICIT_FALLBACK_LIST": []}
    return with_globals(inspect.getattr_static(low, "_register_npu_inductor_fallbacks"), overrides)


def registered_then_repaired(low, fix, battery, compile_model, registered, standing,
                             standing_keys: tuple[str, str]) -> dict:
    """Stock CPU Inductor set to lower afresh every time (the C++ kernel cache stays), in
    one thread, without the autograd cache. The probe and ``battery()``; then, as the
    backend does at activation, the registration into Inductor's real table (first
    removing the decompositions of EXPLICIT_FALLBACK_LIST where a state has one: the
    torch_npu loader does that before activation, and stock make_fallback refuses an op
    that still has a decomposition), what ``registered()`` records of it, and
    ``compile_model()``. Where the probe says needed, the fix is installed with a fresh
    Patcher on that already-registered backend and everything runs again; then the real
    registration runs once more through the wrapper, and the patcher is undone.
    ``standing()`` (whether the fix's lowerings stand) is recorded under ``standing_keys``
    after the install and after the re-registration, and in "undone"."""
    import torch._functorch.config as functorch_config
    from torch._inductor import config
    from torch._inductor.decomposition import decompositions

    from npu_fixes.shim.patcher import Patcher

    config.fx_graph_cache = False  # lower afresh every time; the C++ kernel cache stays
    config.compile_threads = 1
    functorch_config.enable_autograd_cache = False
    register = low._register_npu_inductor_fallbacks
    result = {"probe_before": [fix.probe(low).defective, fix.probe(low).detail], "battery": battery()}
    for op in getattr(low, "EXPLICIT_FALLBACK_LIST", []):
        decompositions.pop(op, None)
    register()
    result.update(registered())
    result["e2e"] = compile_model()
    if result["probe_before"][0]:
        patcher = Patcher()
        fix.FIX.install(low, patcher)
        result["patched"] = len(patcher)
        result[standing_keys[0]] = standing()
        result["probe_after"] = [fix.probe(low).defective, fix.probe(low).detail]
        result["battery_after"] = battery()
        result["e2e_after"] = compile_model()
        low._register_npu_inductor_fallbacks()  # the real registration again, through the wrapper
        result[standing_keys[1]] = standing()
        result["undo"] = patcher.restore()
        result["undone"] = [low._register_npu_inductor_fallbacks is register, standing()]
    return result


def stand_in_ops() -> dict:
    """control_deps, an op every state makes a fallback (sort), a generated op (mul) and an
    op every state keeps (_assert_scalar)."""
    import torch
    from torch._inductor.fx_passes.control_dependencies import control_deps

    aten = torch.ops.aten
    return {"control_deps": control_deps, "sort": aten.sort.default, "mul": aten.mul.Tensor,
            "assert_scalar": aten._assert_scalar.default}


def scratch_registration(low, names, runs) -> dict:
    """The live registration, ``runs`` times, on a scratch table of stand-in lowerings of
    ``names``: per entry, whether the stand-in still stands ("kept"), and the
    registration's records of it ("records": make_fallback calls, FALLBACK_LIST entries)."""
    ops = stand_in_ops()
    table = {ops[n]: (lambda *a, **k: None) for n in names}
    originals, made, listed = dict(table), [], []

    def make_fallback(op, *a, **k):
        made.append(op)
        if op in table:
            table[op] = lambda *a, **k: "fallback"

    scoped = scoped_registration(low, {"lowerings": table, "make_fallback": make_fallback, "FALLBACK_LIST": listed})
    for _ in range(runs):
        scoped()
    return {n: {"kept": table[ops[n]] is originals[ops[n]],
                "records": [made.count(ops[n]), listed.count(ops[n])]} for n in names}


def battery(low) -> dict:
    """``scratch_registration`` once, twice in a row, and without control_deps."""
    out = {}
    for label, names, runs in [("once", STAND_INS, 1), ("twice", STAND_INS, 2),
                               ("without", [n for n in STAND_INS if n != "control_deps"], 1)]:
        for name, seen in scratch_registration(low, list(names), runs).items():
            out[f"{name}|{label}"] = seen
    return out


def compile_mlp() -> dict:
    """The two-dropout MLP compiled by stock CPU Inductor (where fallback_random=True makes
    Inductor insert control_deps), against eager with the same seed."""
    import torch
    import torch.nn.functional as F

    def mlp(x, w1, w2):
        return F.dropout(torch.relu(F.dropout(x, 0.3) @ w1), 0.3) @ w2

    torch._dynamo.reset()
    args = (torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8))
    with torch.no_grad():
        torch.manual_seed(0)
        eager = mlp(*args)
        torch.manual_seed(0)
        try:
            compiled = torch.compile(mlp)(*args)
        except Exception as exc:
            return {"compiled": False, "error": str(exc).splitlines()[:2]}
    return {"compiled": True, "equal": bool(torch.equal(eager, compiled))}


def own_lowering_stands() -> bool:
    from torch._inductor import lowering as L
    from torch._inductor.fx_passes.control_dependencies import control_deps

    return L.lowerings.get(control_deps) is L.control_deps_op_lowering


def end_to_end(location: str) -> dict:
    """With NPU_FIXES=0 nothing is armed: ``registered_then_repaired`` with the stand-in
    ``battery`` and the two-dropout MLP, fallback_random on; the registration records
    whether control_deps became a fallback and whether Inductor's own lowering stands."""
    low = host_load(location).modules["lowering"]
    from torch._inductor import config
    from torch._inductor.fx_passes.control_dependencies import control_deps

    from npu_fixes.fixes import control_deps_lowering as fix

    config.fallback_random = True
    return registered_then_repaired(
        low, fix, lambda: battery(low), compile_mlp,
        lambda: {"registered": [control_deps in low.FALLBACK_LIST, own_lowering_stands()]},
        own_lowering_stands, ("own_restored", "own_after_reregister"))


if __name__ == "__main__":
    main(globals())
