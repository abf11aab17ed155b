"""infinite-integer-fill: the rule, then min and max reductions of integers converted to float
compiled through every genuine state and both published wheels, kernels run in Triton's
interpreter, against eager."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.fixes import infinite_integer_fill as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states, run_program
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
#: Wrong as built for want of this fix (as built the min ones stop first: min2-propagate-nan).
WRONG = ("int32-amin", "int64-amin", "int8-amin", "float-to-int-amin",
         "int32-negated-amax", "int64-negated-amax", "int8-negated-amax")
NEGATED_AMAX = WRONG[4:]
MIN2 = "TypeError: min() got an unexpected keyword argument 'propagate_nan'"


def test_the_rule_refuses_only_infinite_fills_of_values_a_type_on_their_way_cannot_hold():
    assert fix.allowed(float("inf"), [torch.int32]) is None
    assert fix.allowed(float("-inf"), [torch.bool]) is None
    assert fix.allowed(float("inf"), [torch.float32, torch.int32, torch.float32]) is None  # x.int().float()
    assert fix.allowed(float("inf"), [torch.float8_e4m3fn]) is None  # floating, but no infinity
    assert fix.allowed(float("-inf"), None) is None  # a load that cannot be read: the default
    assert fix.allowed(float("inf"), [torch.bfloat16, torch.float32]) == float("inf")
    assert fix.allowed(1.0, [torch.int64]) == 1.0
    assert fix.allowed(None, [torch.int64]) is None


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "infinite_integer_fill", "reductions")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "an int32 load reduced by min as float32 gets other=inf")


@pytest.mark.parametrize("state", STATES)
def test_reductions_of_converted_integers_are_wrong_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert {label: before[label] for label in NEGATED_AMAX} == dict.fromkeys(NEGATED_AMAX, False), before
    assert before["float-amin"] == (MIN2 if state in COMMITS else True), before
    assert before["int32-negated-amax-fills"] == ['float("inf")'], before
    assert {label: after[label] for label in (*WRONG, "float-amin")} == dict.fromkeys((*WRONG, "float-amin"), True)
    assert after["int32-negated-amax-fills"] == ["0.0"], after
    assert after["float-amin-fills"] == ['float("inf")'], after  # a float load keeps its fill


def test_the_other_fixes_alone_leave_the_reductions_wrong(genuine):
    res = run_program("infinite_integer_fill", "reductions", location=genuine("bafc50684"),
                      env={"NPU_FIXES": "0", "NPU_FIXES_DISABLE": "infinite-integer-fill"})
    after = res["after"]
    assert res["state"] == "disabled" and after["float-amin"] is True, res
    assert {label: after[label] for label in WRONG} == dict.fromkeys(WRONG, False), after
