"""Same end state whichever comes first: npu_fixes, torch, host-loaded backend, activation,
or the autoload .pth; fixed installs are left identical, pre-fix ones repaired."""

from __future__ import annotations

import pytest

from npu_fixes.shim import autoload as _autoload
from tests import genuine_states
from tests.conftest import FIXED_UPSTREAM, backend_targets, run_program, wheel_install

ORDERS = ("npu_fixes-first", "torch-first", "after-load", "after-activation", "autoload-pth")


#: The orders whose point is a process that has not imported torch yet: their first steps
#: (``first_steps``: npu_fixes or the .pth's autoload, then torch) made once in a fresh
#: interpreter, each program forked from there (``run_program``'s ``first_steps``). The others
#: import torch before npu_fixes anyway: a child of the fork server.
BEFORE_TORCH = ("npu_fixes-first", "autoload-pth")
#: What host-loading a backend imports first, whatever the location: Inductor (2.2 s of a
#: 3 s load). The server of those orders imports it once, after their first steps.
HOST_LOAD_IMPORTS = ("torch._inductor.lowering", "torch._inductor.codegen.triton",
                     "torch._inductor.runtime.triton_heuristics")


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    """A site folder with the autoload .pth, for the autoload-pth order."""
    folder = tmp_path_factory.mktemp("autoload-site")
    _autoload.enable(folder)
    return folder


def run_order(order: str, location, site_dir, fresh: bool = False) -> dict:
    """``order``'s end state (tests/programs/import_order.py); with ``fresh``, in a fresh
    interpreter that makes the order's first steps itself."""
    kwargs = {"order": order, "location": location, "targets": backend_targets(), "site_dir": str(site_dir)}
    if fresh or order not in BEFORE_TORCH:
        return run_program("import_order", "end_state", fresh=fresh, **kwargs)
    steps = f"from tests.programs.import_order import first_steps; first_steps({order!r}, {str(site_dir)!r})"
    return run_program("import_order", "end_state", first_steps=steps, preload=HOST_LOAD_IMPORTS, started=True,
                       **kwargs)


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_same_state_every_order(version, site_dir):
    """A published wheel: only the defects no published state has fixed are applied; every
    other target stays the very object it was."""
    needed = genuine_states.UNFIXED
    untouched = genuine_states.untouched(needed)
    absent = genuine_states.absent_at(version)
    results = {order: run_order(order, wheel_install(version), site_dir) for order in ORDERS}
    for order, res in results.items():
        assert res["states"] == {n: genuine_states.expected_state(n, needed, absent) for n in res["states"]}, \
            (order, res)
        assert res["pristine"] == untouched, (order, res)
        if res["same_objects"] is not None:
            assert res["same_objects"] == untouched, (order, res)


def test_prefix_copy_same_state_every_order(prefix_copy, site_dir):
    location, needed = prefix_copy("all"), frozenset(genuine_states.FIVE) | genuine_states.UNFIXED
    absent = genuine_states.absent_at("2.13.0")  # the copy's wheel
    for order in ORDERS:
        res = run_order(order, location, site_dir)
        assert res["states"] == {n: genuine_states.expected_state(n, needed, absent) for n in res["states"]}, \
            (order, res)
        assert res["pristine"] == genuine_states.untouched(needed), (order, res)


@pytest.mark.parametrize("state", genuine_states.COMMITS)
def test_genuine_state_same_state_every_order(genuine, state, site_dir):
    """A self-build of each genuine state: exactly its defects applied, the rest untouched."""
    location, needed = genuine(state), genuine_states.needed_at(state)
    untouched, absent = genuine_states.untouched(needed), genuine_states.absent_at(state)
    for order in ORDERS:
        res = run_order(order, location, site_dir)
        assert res["states"] == {n: genuine_states.expected_state(n, needed, absent) for n in res["states"]}, \
            (order, res)
        assert res["pristine"] == untouched, (order, res)
        if res["same_objects"] is not None:
            assert res["same_objects"] == untouched, (order, res)


@pytest.mark.parametrize("order", BEFORE_TORCH)
def test_first_steps_made_once_end_as_in_a_fresh_interpreter(genuine, site_dir, order):
    """A program forked after the order's first steps and Inductor's import (as the tests
    above run it) ends in the state a fresh interpreter making those steps itself, and
    importing Inductor where host-loading does, ends in."""
    location = genuine("8bfbb9ed1")
    fresh = run_order(order, location, site_dir, fresh=True)
    forked = run_order(order, location, site_dir)
    started_with = ["torch", "npu_fixes", "torch._inductor.lowering"]
    assert fresh.pop("imported_first") == [] and forked.pop("imported_first") == started_with
    assert forked == fresh and "applied" in fresh["states"].values(), (forked, fresh)


def test_backend_reload_gets_the_repairs_again(genuine):
    """``importlib.reload`` of the launcher module of a pre-fix state: the fresh code is
    repaired again at once, and status() says so only because the probes agree."""
    res = run_program("import_order", "reload_launcher", fresh=True, location=genuine("8bfbb9ed1"))
    assert res["new_class"] is True
    assert res["launch-grid"] == ["applied", False] and res["boundary-downcast"] == ["applied", False]
    assert res["undone"] >= 2 and res["grid_after_undo"] is True  # undo reaches the reloaded code


def test_reloading_each_backend_module_keeps_status_truthful(genuine):
    """At 8bfbb9ed1, each target module reloaded in turn: every fix applied at the load is
    applied again on the fresh code (its probe no longer sees the defect), never judged on
    a leftover of its earlier repair; after undo() each says ``undone`` and the defect is
    back."""
    from npu_fixes.tools.host import BACKEND_MODULES

    res = run_program("import_order", "reload_each", location=genuine("8bfbb9ed1"),
                      modules=list(BACKEND_MODULES))
    applied = res["applied"]
    assert len(applied) >= 5, res["load"]
    for short, after in res["reloads"].items():
        assert after["states"] == res["load"], short
        assert after["defective"] == dict.fromkeys(applied, False), short
    assert {n: res["undone"]["states"][n] for n in applied} == dict.fromkeys(applied, "undone")
    assert res["undone"]["defective"] == dict.fromkeys(applied, True)


@pytest.mark.parametrize("where", ["wheel:2.13.0", "wheel:2.14.0", "genuine:bafc50684", "genuine:8bfbb9ed1"])
def test_probes_leave_inductor_registries_and_modules_as_found(genuine, where):
    """Deciding every backend fix (probes that build a real GraphLowering among them) leaves
    Inductor's device registries, its once-per-process registration and the imported
    torch_npu modules as they were, so a plugin registering where none is registered still
    does; at every state and wheel some fixes are needed (on the wheels only those of the
    defects no published state has fixed)."""
    kind, _, name = where.partition(":")
    res = run_program("import_order", "traces", location=wheel_install(name) if kind == "wheel" else genuine(name))
    assert res["same"] == {"registries": True, "registered": True, "torch_npu": True}, res
    assert res["added"] == [] and res["plugin_registered"] is True, res
    assert "applied" in res["states"], res["states"]
