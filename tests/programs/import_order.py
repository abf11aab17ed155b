"""Programs of tests/test_import_order.py."""

from __future__ import annotations

import sys

from tests.programs import backend_states, backend_targets, host_load, main, probes_now


def activate(loaded) -> None:
    """``triton_experimental._activate()``'s registration. Here it fills a private copy of
    Inductor's lowering table (stock Inductor on CPU rejects some of the NPU fallbacks next
    to its decompositions), and the module keeps that state: FALLBACK_LIST filled, table in
    place."""
    low = loaded.modules["lowering"]
    low.lowerings = dict(low.lowerings)
    low.make_fallback = lambda *a, **k: None
    low._register_npu_inductor_fallbacks()
    assert low.FALLBACK_LIST


def first_steps(order: str, site_dir: str | None = None) -> None:
    """What ``order`` does before the backend is loaded, the same for every location:
    npu_fixes-first imports npu_fixes, then torch (``host_load``'s first import);
    torch-first the other way round; autoload-pth adds ``site_dir`` (its .pth arms the
    autoload), then imports torch (which fires it). The other orders do nothing yet."""
    if order == "npu_fixes-first":
        import npu_fixes  # noqa: F401, I001 - before torch: the point of this order
        import torch  # noqa: F401
    elif order == "torch-first":
        import torch  # noqa: F401

        import npu_fixes  # noqa: F401
    elif order == "autoload-pth":
        import site

        site.addsitedir(site_dir)
        import torch  # noqa: F401


def end_state(order: str, location: str, targets: dict, site_dir: str | None = None, started: bool = False) -> dict:
    """Host-load ``location`` with ``import npu_fixes`` in the place ``order`` says
    (npu_fixes-first, torch-first, after-load, after-activation, or autoload-pth: the
    .pth in ``site_dir`` arms it when torch imports); then the fixes' states, whether each
    backend target is free of npu_fixes' code, and (where npu_fixes came after
    the load) whether importing it kept the very objects the targets named before.
    ``started``: this process has made ``first_steps(order)`` already (a child of a fork
    server that made them). ``imported_first``: which of torch, npu_fixes and Inductor's
    lowering this process held when the program began."""
    imported_first = [name for name in ("torch", "npu_fixes", "torch._inductor.lowering") if name in sys.modules]
    if not started:
        first_steps(order, site_dir)
    loaded = host_load(location)
    same_objects = None
    if order in ("after-load", "after-activation"):
        if order == "after-activation":
            activate(loaded)
        before = backend_targets(targets)
        import npu_fixes  # noqa: F401

        same_objects = {name: obj is before[name] for name, obj in backend_targets(targets).items()}
    return {**report(same_objects), "imported_first": imported_first}


def report(same_objects: dict | None) -> dict:
    """The backend fixes' states and whether each target is pristine (no wrapper, no code of
    npu_fixes; a target the state lacks counts as pristine), with ``same_objects``."""
    import inspect
    from pathlib import Path

    import wrapt

    import npu_fixes
    from npu_fixes.fixes import all_fixes
    from npu_fixes.shim.fix import TargetMissing, resolve_owner

    ours = str(Path(npu_fixes.__file__).parent)
    pristine = {}
    for fix in (f for f in all_fixes() if f.module.startswith("torch_npu.")):
        try:
            obj = inspect.getattr_static(*resolve_owner(sys.modules[fix.module], fix.targets[0]))
        except TargetMissing:
            pristine[fix.name] = True
            continue
        func = getattr(obj, "__func__", getattr(obj, "fn", obj))  # a staticmethod's, a JIT function's
        pristine[fix.name] = (not isinstance(obj, wrapt.FunctionWrapper)
                              and not func.__code__.co_filename.startswith(ours))
    return {"states": backend_states(), "pristine": pristine, "same_objects": same_objects}


def reload_launcher(location: str) -> dict:
    """``importlib.reload`` of the launcher module after ``import npu_fixes``: the states
    and probes of launch-grid and boundary-downcast on the fresh code, and undo's reach."""
    import importlib

    loaded = host_load(location)
    import npu_fixes
    from npu_fixes.fixes import boundary_downcast, launch_grid

    m = loaded.modules["npu_triton_heuristics"]
    before = m.NPUTritonCompileResult
    fresh = importlib.reload(m)
    states = {r.name: r.state.value for r in npu_fixes.status()}
    return {"new_class": fresh.NPUTritonCompileResult is not before,
            "launch-grid": [states["launch-grid"], launch_grid.probe(fresh).defective],
            "boundary-downcast": [states["boundary-downcast"], boundary_downcast.probe(fresh).defective],
            "undone": npu_fixes.undo(),
            "grid_after_undo": launch_grid.probe(fresh).defective}


#: The device registries of ``torch._inductor.codegen.common`` that GraphLowering fills.
INDUCTOR_REGISTRIES = ("device_codegens", "device_op_overrides_dict", "custom_backend_passes",
                       "custom_backend_codegen_configs")


def traces(location: str) -> dict:
    """Host-load ``location``, then ``import npu_fixes`` (every backend fix decided at once):
    whether Inductor's device registries, its registration cache and the imported
    ``torch_npu`` modules are as they were before; then whether a plugin that registers its
    backend for a device only where none is registered (torch's own idiom) still can."""
    import torch._inductor.codegen.common as common

    host_load(location)  # before npu_fixes is imported: importing it arms the fixes

    def snapshot() -> dict:
        return {"registries": {n: {k: id(v) for k, v in getattr(common, n).items()} for n in INDUCTOR_REGISTRIES},
                "registered": common.init_backend_registration.cache_info().currsize,
                "torch_npu": sorted(m for m in sys.modules if m.partition(".")[0] == "torch_npu")}

    before = snapshot()
    import npu_fixes

    after = snapshot()
    plugin = object()
    if common.get_scheduling_for_device("cpu") is None:
        common.register_backend_for_device("cpu", plugin, plugin)
    return {"same": {k: before[k] == after[k] for k in before},
            "added": sorted(set(after["torch_npu"]) - set(before["torch_npu"])),
            "plugin_registered": common.get_scheduling_for_device("cpu") is plugin,
            "states": sorted({r.state.value for r in npu_fixes.status()})}


def reload_each(location: str, modules: list[str]) -> dict:
    """With npu_fixes imported before the host load: ``importlib.reload`` of each backend
    module in ``modules`` in turn, then each time the states of the backend fixes and, for
    those applied at the load, whether the live probe sees the defect; then ``undo()``, the
    states and the probes once more."""
    import importlib

    import npu_fixes

    loaded = host_load(location)
    first = backend_states()
    applied = sorted(n for n, s in first.items() if s == "applied")
    result = {"load": first, "applied": applied, "reloads": {}}
    for short in modules:
        importlib.reload(loaded.modules[short])
        result["reloads"][short] = {"states": backend_states(), "defective": probes_now(applied)}
    npu_fixes.undo()
    result["undone"] = {"states": backend_states(), "defective": probes_now(applied)}
    return result


if __name__ == "__main__":
    main(globals())
