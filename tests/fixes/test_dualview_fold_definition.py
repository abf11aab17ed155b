"""dualview-fold-definition: reductions whose addresses the backend folds to the flat node of
their reduction tree, compiled with ``dynamic=True`` through every genuine state and the
published wheels, kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states, run_program
from tests.genuine_states import COMMITS

PROGRAMS = ("masked-and-sum", "centred-masked", "group-norm-gradients")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, (*COMMITS, *FIXED_UPSTREAM), "dualview_fold_definition", "folds")


@pytest.mark.parametrize("state", COMMITS)
def test_probe_finds_the_undefined_node_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "into r0_2 and writes no definition of it")


@pytest.mark.parametrize("state", FIXED_UPSTREAM)
def test_the_wheels_write_the_definitions_themselves(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is False and "from the kernel's reduction passes" in res["probe_before"][1]
    assert res["state"] == "not-needed" and res["after"] == dict.fromkeys(PROGRAMS, True), res


@pytest.mark.parametrize("state", COMMITS)
def test_every_program_equals_eager_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["after"] == dict.fromkeys(PROGRAMS, True), res
    assert all(res["before"][p] is not True for p in PROGRAMS[:2]), res["before"]


@pytest.mark.parametrize("state", ("8bfbb9ed1", "bafc50684"))
def test_with_every_other_fix_the_node_stays_undefined_or_stale(runs, genuine, state):
    """With this fix alone disabled: the compile stops at the undefined node, and where an
    earlier loop defined it the result is wrong or read out of bounds; at bafc50684 the
    group_norm gradients are silently wrong (as built too)."""
    out = run_program("dualview_fold_definition", "folds_without_this_fix", location=genuine(state),
                      env={"NPU_FIXES": "0", "NPU_FIXES_DISABLE": "dualview-fold-definition"})
    assert out["masked-and-sum"] == "NameError: name 'r0_2' is not defined"
    assert out["centred-masked"] is False or "OutOfBounds" in out["centred-masked"], out
    if state == "bafc50684":
        assert out["group-norm-gradients"] is False and runs[state]["before"]["group-norm-gradients"] is False
