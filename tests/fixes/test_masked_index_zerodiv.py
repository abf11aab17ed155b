"""masked-index-zerodiv: the rule on one address in-process, then ``slice_scatter`` of
reshaped views compiled with dynamic shapes through every genuine state and the fixed wheel,
kernels run in Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.masked_index_zerodiv import clamp_on_zero_division
from tests.conftest import run_at_states
from tests.genuine_states import ABSENT, BEYOND, COMMITS

NAME = "masked-index-zerodiv"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
PROGRAMS = ("into-wider", "flat-into-longer")
#: Equal to eager on both shapes; the load's address clamped at both launches.
CLAMPED = {"equal": [True, True], "clamps": 2}


def test_rule_answers_clamp_only_for_a_division_by_zero():
    def divides(indexing):
        return 1 % indexing

    assert clamp_on_zero_division(divides, None, (0,), {}) is True
    assert clamp_on_zero_division(lambda indexing: False, None, (0,), {}) is False
    with pytest.raises(TypeError):  # any other error is the function's own
        clamp_on_zero_division(divides, None, ("0",), {})


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "masked_index_zerodiv", "scatter")


@pytest.mark.parametrize("state", STATES)
def test_a_state_without_the_check_is_left_as_it_is(runs, state):
    res = runs[state]
    if state in ABSENT[NAME]:  # no such function: nothing to probe, nothing changed
        assert res["probe_before"] is None and res["state"] == "absent" and res["after"] == res["before"]
        assert res["before"] == dict.fromkeys(PROGRAMS, {"equal": [True, True], "clamps": 0})
    else:
        assert res["probe_before"] is not None


def test_the_wheel_computes_both_programs(runs):
    """The reference. Its own graph folds ``into-wider``'s permuted view, so that address
    has no modulus by a size and is clamped; ``flat-into-longer``'s is not, where npu_fixes
    clamps it (a legitimate difference: the clamp moves only addresses below zero, which
    only masked-off lanes have)."""
    assert runs[WHEEL]["before"] == runs[WHEEL]["after"] == {
        "into-wider": CLAMPED, "flat-into-longer": {"equal": [True, True], "clamps": 0}}


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_computes_what_the_wheel_computes(runs, state):
    """Before: both compiles stop with ZeroDivisionError. After: both equal eager on two
    shapes of one dynamic compile, the address that divides by a size clamped; undo
    brings the defect back."""
    res = runs[state]
    for label in PROGRAMS:
        assert res["before"][label]["error"].startswith("ZeroDivisionError: integer"), (label, res["before"])
    assert res["after"] == dict.fromkeys(PROGRAMS, CLAMPED)
    assert res["probe_after"] is False and res["undone"] is True
