"""Programs of tests/test_import_order.py."""

from __future__ import annotations

import sys

from tests.programs import backend_targets, host_load, main


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


def end_state(order: str, location: str, targets: dict, site_dir: str | None = None) -> dict:
    """Host-load ``location`` with ``import npu_fixes`` in the place ``order`` says
    (npu_fixes-first, torch-first, after-load, after-activation, or autoload-pth: the
    .pth in ``site_dir`` arms it when torch imports); then the fixes' states, whether each
    backend target is still the tree's own unwrapped code, and (where npu_fixes came after
    the load) whether importing it kept the very objects the targets named before."""
    same_objects = None
    if order == "npu_fixes-first":
        import npu_fixes  # noqa: F401

        loaded = host_load(location)
    elif order == "torch-first":
        import torch  # noqa: F401

        import npu_fixes  # noqa: F401

        loaded = host_load(location)
    elif order == "autoload-pth":
        import site

        site.addsitedir(site_dir)
        import torch  # noqa: F401

        loaded = host_load(location)
    else:
        loaded = host_load(location)
        if order == "after-activation":
            activate(loaded)
        before = backend_targets(targets)
        import npu_fixes  # noqa: F401

        same_objects = {name: obj is before[name] for name, obj in backend_targets(targets).items()}
    return report(loaded, same_objects)


def report(loaded, same_objects: dict | None) -> dict:
    """The backend fixes' states and whether each target is pristine, with ``same_objects``."""
    import inspect

    import wrapt

    import npu_fixes
    from npu_fixes.fixes import all_fixes
    from npu_fixes.shim.fix import resolve_owner

    root = str(loaded.root)
    pristine = {}
    for fix in (f for f in all_fixes() if f.module.startswith("torch_npu.")):
        obj = inspect.getattr_static(*resolve_owner(sys.modules[fix.module], fix.targets[0]))
        pristine[fix.name] = (not isinstance(obj, wrapt.FunctionWrapper)
                              and obj.__code__.co_filename.startswith(root))
    return {"states": {r.name: r.state.value for r in npu_fixes.status() if r.name in pristine},
            "pristine": pristine, "same_objects": same_objects}


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


if __name__ == "__main__":
    main(globals())
