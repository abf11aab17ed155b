"""Same end state whichever comes first: npu_fixes, torch, host-loaded backend, activation,
or the autoload .pth; fixed installs are left identical, pre-fix ones repaired."""

from __future__ import annotations

import pytest

from npu_fixes.shim import autoload as _autoload
from tests import genuine_states
from tests.conftest import FIXED_UPSTREAM, backend_targets, run_program, wheel_path

ORDERS = ("npu_fixes-first", "torch-first", "after-load", "after-activation", "autoload-pth")


def run_order(order: str, location, tmp_path) -> dict:
    """``order``'s end state (tests/programs/import_order.py) in a fresh interpreter."""
    if order == "autoload-pth":
        _autoload.enable(tmp_path)
    return run_program("import_order", "end_state", order=order, location=location,
                       targets=backend_targets(), site_dir=str(tmp_path))


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_same_state_every_order(version, tmp_path):
    results = {order: run_order(order, wheel_path(version), tmp_path) for order in ORDERS}
    for order, res in results.items():
        assert set(res["states"].values()) == {"not-needed"}, (order, res)
        assert all(res["pristine"].values()), (order, res)
        if res["same_objects"] is not None:
            assert all(res["same_objects"].values()), (order, res)


def test_prefix_copy_same_state_every_order(prefix_copy, tmp_path):
    location, needed = prefix_copy("all"), frozenset(genuine_states.FIVE)
    for order in ORDERS:
        res = run_order(order, location, tmp_path)
        assert res["states"] == {n: genuine_states.expected_state(n, needed) for n in res["states"]}, (order, res)
        assert res["pristine"] == genuine_states.untouched(needed), (order, res)


@pytest.mark.parametrize("state", genuine_states.COMMITS)
def test_genuine_state_same_state_every_order(genuine, state, tmp_path):
    """A self-build of each genuine state: exactly its defects applied, the rest untouched."""
    location, needed = genuine(state), genuine_states.needed_at(state)
    untouched = genuine_states.untouched(needed)
    for order in ORDERS:
        res = run_order(order, location, tmp_path)
        assert res["states"] == {n: genuine_states.expected_state(n, needed) for n in res["states"]}, (order, res)
        assert res["pristine"] == untouched, (order, res)
        if res["same_objects"] is not None:
            assert res["same_objects"] == untouched, (order, res)


def test_backend_reload_gets_the_repairs_again(genuine):
    """``importlib.reload`` of the launcher module of a pre-fix state: the fresh code is
    repaired again at once, and status() says so only because the probes agree."""
    res = run_program("import_order", "reload_launcher", location=genuine("8bfbb9ed1"))
    assert res["new_class"] is True
    assert res["launch-grid"] == ["applied", False] and res["boundary-downcast"] == ["applied", False]
    assert res["undone"] >= 2 and res["grid_after_undo"] is True  # undo reaches the reloaded code
