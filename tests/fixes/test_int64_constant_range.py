"""int64-constant-range: int64 constants in kernels that hold int64 in int32, compiled through
every genuine state and both published wheels, kernels run in Triton's interpreter, against
eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import int64_constant_range as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
MASKED = ("masked-amax-negative", "masked-amin", "masked-argmax")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "int64_constant_range", "masked_reductions")


def test_the_rule_narrows_int64_extremes_and_refuses_other_values_int32_cannot_hold():
    assert fix.held(-(2 ** 63)) == -(2 ** 31) and fix.held(2 ** 63 - 1) == 2 ** 31 - 1
    assert [fix.held(v) for v in (0, -(2 ** 31), 2 ** 31 - 1, True, 1.5e20)] == [0, -(2 ** 31), 2 ** 31 - 1, True,
                                                                                 1.5e20]
    with pytest.raises(fix.Int64ConstantOutOfRange, match=r"constant 2147483648 .* cut it to -2147483648"):
        fix.held(2 ** 31)


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "-9223372036854775808, tl.int32")


@pytest.mark.parametrize("state", STATES)
def test_masked_int64_reductions_equal_eager_and_a_constant_past_int32_is_refused_by_name(runs, state):
    """As built every masked reduction's fill is int64's extreme in int32 code, which the
    interpreter refuses (a device cuts it to 0 or -1); with npu_fixes they equal eager, an
    int64 constant int32 holds is untouched, and one it cannot hold stops the compile with
    an error that names it."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in (*MASKED, "constant-past-int32"):
        assert "out of bounds for int32" in str(before[label]), (label, before[label])
    assert {label: after[label] for label in (*MASKED, "in-range-constant")} == dict.fromkeys(
        (*MASKED, "in-range-constant"), True), after
    assert before["in-range-constant"] is True
    assert after["constant-past-int32"].startswith("Int64ConstantOutOfRange: the int64 constant 1099511627776 ")
