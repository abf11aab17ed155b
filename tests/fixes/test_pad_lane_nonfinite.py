"""pad-lane-nonfinite: the lattice rule, then looped sums of products with a reciprocal, log
or rsqrt compiled through every genuine state and both published wheels, kernels run in
Triton's interpreter, against eager."""

from __future__ import annotations

import math

import pytest

from npu_fixes.fixes import pad_lane_nonfinite as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("times-reciprocal", "entropy", "times-rsqrt", "times-tanh", "reciprocal-scalar-grad")


def _as_built(name, facts):  # the lattice's default for an op it does not model
    return "fin" if all(f == "fin" or isinstance(f, tuple) and math.isfinite(f[1]) for f in facts) else "top"


def test_the_rule_calls_nothing_finite_that_is_not():
    assert fix.transformed("reciprocal", [("c", 0.0)], _as_built, "top") == ("c", math.inf)
    assert fix.transformed("log", [("c", 0.0)], _as_built, "top") == ("c", -math.inf)
    assert fix.transformed("log", [("c", 1.0)], _as_built, "top") == ("c", 0.0)
    assert math.isnan(fix.transformed("truediv", [("c", 0.0), ("c", 0.0)], _as_built, "top")[1])
    assert fix.transformed("rsqrt", [("c", 0.0)], _as_built, "top") == "top"  # not evaluated: unknown
    assert fix.transformed("reciprocal", ["fin"], _as_built, "top") == "top"
    assert fix.transformed("tanh", ["fin"], _as_built, "top") == "fin"  # finite to finite: as built
    assert fix.transformed("mul", [("c", 0.0), "fin"], lambda n, f: ("c", 0.0), "top") == ("c", 0.0)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "pad_lane_nonfinite", "sums")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "reciprocal(0), log(0), rsqrt(0) called finite")


@pytest.mark.parametrize("state", STATES)
def test_sums_are_nan_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert before["times-reciprocal"] is False and before["times-rsqrt"] is False, before
    assert before["times-tanh"] is True, before
    assert after == dict.fromkeys((*PROGRAMS, "tanh-unselected"), True), after


@pytest.mark.parametrize("state", STATES)
def test_a_sum_finite_on_pad_lanes_still_accumulates_without_a_select(runs, state):
    assert runs[state]["before"]["tanh-unselected"] is True and runs[state]["after"]["tanh-unselected"] is True
