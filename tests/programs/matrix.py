"""Programs of tests/test_matrix.py."""

from __future__ import annotations

from tests.programs import backend_targets, main, standalone_host


def repaired(targets: dict) -> dict:
    """Host-load the installed torch_npu, snapshot the backend targets before ``import
    npu_fixes`` (the install as it is), apply, and report the states and which targets are
    the same objects as before."""
    host = standalone_host()
    loaded = host.load(host.installed_location())
    before = backend_targets(targets)
    import npu_fixes

    npu_fixes.apply()
    after = backend_targets(targets)
    return {"version": loaded.version,
            "states": {r.name: r.state.value for r in npu_fixes.status() if r.name in after},
            "same": {name: obj is before[name] for name, obj in after.items()}}


if __name__ == "__main__":
    main(globals())
