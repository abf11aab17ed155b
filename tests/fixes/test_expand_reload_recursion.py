"""expand-reload-recursion: the rule that predicts a re-run's binding, in-process; then a
graph with ``expand`` compiled through every genuine state and the fixed wheel before and
after ``importlib.reload`` of the backend's lowering module, kernels run in Triton's
interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.expand_reload_recursion import rebinds_from_inductor
from tests.conftest import run_at_states
from tests.genuine_states import COMMITS

NAME = "expand-reload-recursion"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
EQUAL = {"equal": True}


def test_rule_finds_the_binding_a_rerun_makes_last():
    imported = "from torch._inductor.lowering import expand as _orig_expand\n"
    assert rebinds_from_inductor(imported) is True
    assert rebinds_from_inductor(imported + "_orig_expand = saved\n") is False  # a stash wins
    assert rebinds_from_inductor("from torch._inductor.lowering import permute as _orig_expand\n") is False
    assert rebinds_from_inductor("x = 1\n") is False  # no binding at all


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "expand_reload_recursion", "reload")


@pytest.mark.parametrize("state", STATES)
def test_a_reload_keeps_the_state_and_every_state_builds_before_one(runs, state):
    res = runs[state]
    assert res["state_reloaded"] == res["state"]
    assert res["first"] == EQUAL  # before any reload the graph builds everywhere


def test_the_wheel_survives_a_reload(runs):
    res = runs[WHEEL]
    assert res["reloaded"] == res["reloaded_undone"] == EQUAL and res["probe_undone"] is False


@pytest.mark.parametrize("state", COMMITS)
def test_repaired_state_survives_a_reload_as_the_wheel_does(runs, state):
    """With npu_fixes the reloaded module is repaired again at once and the graph equals
    eager; after undo the reloaded module's expand calls itself until Python's limit."""
    res = runs[state]
    assert res["probe_reloaded"] is False and res["reloaded"] == EQUAL
    assert res["undone"] is True and res["probe_undone"] is True
    assert res["reloaded_undone"]["recursion"] is True, res["reloaded_undone"]
