"""pad-lane-nonfinite: the lattice rule, then looped sums of products with a reciprocal, log
or rsqrt compiled through every genuine state and both published wheels, kernels run in
Triton's interpreter, against eager."""

from __future__ import annotations

import ast
import math

import pytest

from npu_fixes.fixes import pad_lane_nonfinite as fix
from tests.conftest import (
    FIXED_UPSTREAM,
    assert_probed_repaired_and_undone,
    run_at_states,
    run_program,
    wheel_install,
)
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("times-reciprocal", "entropy", "times-rsqrt", "times-tanh", "reciprocal-scalar-grad")
#: The programs NaN as built (the blocks each state chooses decide which sums have pad lanes).
NAN_AS_BUILT = {state: {"times-reciprocal", "times-rsqrt"} for state in STATES}
for _state in ("8bfbb9ed1", "95c9094da"):
    NAN_AS_BUILT[_state].add("reciprocal-scalar-grad")
for _state in ("f8802037a", "5ff81d9c5", "bafc50684", *FIXED_UPSTREAM):
    NAN_AS_BUILT[_state].add("entropy")


def _default(name, facts):
    """The backend lattice's answer for an op it does not model: finite for finite operands."""
    return "fin" if all(f == "fin" or isinstance(f, tuple) and math.isfinite(f[1]) for f in facts) else "top"


def _products(name, facts):
    """A lattice multiplying constants, as the backend's does in float64."""
    return ("c", facts[0][1] * facts[1][1])


def test_the_rule_calls_nothing_finite_that_is_not():
    assert _default("reciprocal", [("c", 0.0)]) == "fin"  # the defect
    assert fix.transformed("reciprocal", [("c", 0.0)], _default, "top") == "top"
    assert fix.transformed("log", ["fin"], _default, "top") == "top"
    assert fix.transformed("tanh", ["fin"], _default, "top") == "fin"  # finite to finite: as built
    # constants as float32 holds them: 1e48 is inf, so 0 times it is NaN (unknown), not 0
    assert fix.transformed("mul", [("c", 0.0), ("c", 1e48)], _products, "top") == "top"
    assert fix.transformed("mul", [("c", 3.0), ("c", 0.1)], _products, "top") == ("c", 0.30000001192092896)
    assert fix.transformed("exp", [("c", 100.0)], lambda n, f: ("c", math.exp(f[0][1])), "top") == ("c", math.inf)
    assert fix.transformed("mul", [("c", 0.0), ("c", 5.0)], _products, "top") == ("c", 0.0)


@pytest.mark.parametrize("state", STATES)
def test_the_ops_the_rule_trusts_the_lattice_with_are_those_it_models_at_each_state(genuine, state):
    root = wheel_install(state) if state in FIXED_UPSTREAM else genuine(state)
    source = (root / "torch_npu/_inductor/triton_experimental/codegen/triton.py").read_text()
    lattice = next(node for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.FunctionDef) and node.name == fix.TARGET)
    named = {node.value for node in ast.walk(lattice) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert named - {"c"} == fix.MODELLED  # "c": the constant fact's tag


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "pad_lane_nonfinite", "sums")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "reciprocal(0), log(0), rsqrt(0) called finite")


@pytest.mark.parametrize("state", STATES)
def test_sums_are_nan_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert {label for label in PROGRAMS if before[label] is not True} == NAN_AS_BUILT[state], before
    assert {label: after[label] for label in PROGRAMS} == dict.fromkeys(PROGRAMS, True), after


@pytest.mark.parametrize("state", STATES)
def test_only_a_sum_infinite_on_pad_lanes_gets_its_select_back(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert (before["times-tanh-select"], before["times-rsqrt-select"]) == (False, False), before
    assert (after["times-tanh-select"], after["times-rsqrt-select"]) == (False, True), after


def test_the_other_fixes_alone_leave_the_sums_nan(genuine):
    res = run_program("pad_lane_nonfinite", "sums", location=genuine("bafc50684"),
                      env={"NPU_FIXES": "0", "NPU_FIXES_DISABLE": "pad-lane-nonfinite"})
    assert res["state"] == "disabled" and res["after"] == res["before"], res
