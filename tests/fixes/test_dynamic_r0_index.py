"""dynamic-r0-index: reductions over sizes passed as arguments, compiled with
``dynamic=True`` through every genuine state and both published wheels, kernels run in
Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("sliced-mean", "reshaped-sum", "transposed-amax")
#: The programs whose kernel promotes a tree with a node of run-time size.
DEFECTIVE = ("sliced-mean", "transposed-amax")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "dynamic_r0_index", "reductions")


@pytest.mark.parametrize("state", COMMITS)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "div_floor_integer(r0_index")


@pytest.mark.parametrize("state", COMMITS)
def test_compile_stops_as_built_and_results_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in DEFECTIVE:
        assert before[label] == "NameError: name 'r0_index' is not defined", (label, before[label])
    assert before["reshaped-sum"] is True, "a reduction that promotes no tree compiles as built"
    assert after == dict.fromkeys(PROGRAMS, True), after


@pytest.mark.parametrize("state", FIXED_UPSTREAM)
def test_the_wheels_compile_them_and_are_left_alone(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is False and res["state"] == "not-needed"
    assert res["before"] == res["after"] == dict.fromkeys(PROGRAMS, True), res


def test_plain_definition_rewrites_only_a_tree_nodes_printed_division():
    from npu_fixes.fixes import dynamic_r0_index as fix

    line = "            r0_1 = triton_helpers.div_floor_integer(r0_index,  ks0)"
    assert fix.plain_definition(line, "r0_") == "            r0_1 = r0_index // ks0"
    assert fix.plain_definition("    r0_2 = triton_helpers.remainder_integer(r0_index, ks1)", "r0_") == (
        "    r0_2 = r0_index % ks1")
    assert fix.plain_definition(line, "r1_") is None, "another tree's prefix"
    assert fix.plain_definition("    x1 = triton_helpers.div_floor_integer(x_index,  ks0)", "r0_") is None
    assert fix.plain_definition("    tmp0 = triton_helpers.div_floor_integer(r0_index,  ks0)", "r0_") is None
    assert fix.plain_definition("    r0_1 = triton_helpers.div_floor_integer(r0_index + 1,  ks0)", "r0_") is None
