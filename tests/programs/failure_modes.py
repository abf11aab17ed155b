"""Programs of tests/fixes/test_failure_modes.py."""

from __future__ import annotations

import os

from tests.programs import backend_targets, host_load, main, standalone_host


def probe_explodes(*args, **kwargs):
    """Stands in for what dualview-fold's probe calls."""
    raise RuntimeError("probe exploded")


def install_explodes(*args, **kwargs):
    """Stands in for launch-grid's install."""
    raise RuntimeError("install exploded")


def report(location: str, targets: dict, exploding_probe: bool = False) -> dict:
    """Load with fixes off (after making dualview-fold's probe raise, with
    ``exploding_probe``), then turn them on and apply: each backend fix's state and whether
    its target is the object loaded."""
    os.environ["NPU_FIXES"] = "0"
    standalone_host()
    if exploding_probe:
        from npu_fixes.fixes import dualview_fold

        dualview_fold.FIX.probe.__globals__["fold_once"] = probe_explodes
    loaded = host_load(location)
    host = standalone_host()
    assert set(loaded.modules) == {*host.BACKEND_MODULES, *host.LOADER_MODULES}
    del os.environ["NPU_FIXES"]
    before = backend_targets(targets)  # npu_fixes not armed yet: the backend as loaded
    import npu_fixes

    npu_fixes.apply()
    same = {name: obj is before[name] for name, obj in backend_targets(targets).items()}
    return {"states": {r.name: [r.state.value, r.detail] for r in npu_fixes.status() if r.name in same},
            "same": same}


def install_fails(location: str) -> list:
    """npu_fixes armed, launch-grid's install made to raise, then the backend loaded (the
    hook fires inside the import): the modules loaded, and launch-grid's state and detail."""
    standalone_host()
    import npu_fixes
    from npu_fixes.fixes import launch_grid

    object.__setattr__(launch_grid.FIX, "install", install_explodes)
    loaded = host_load(location)
    rec = {r.name: r for r in npu_fixes.status()}["launch-grid"]
    return [sorted(loaded.modules), rec.state.value, rec.detail]


if __name__ == "__main__":
    main(globals())
