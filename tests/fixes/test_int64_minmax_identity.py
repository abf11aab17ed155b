"""int64-minmax-identity: max and min reductions over int64 values compiled through every
genuine state and both published wheels, kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("amin-arange", "amax-negative", "max-dim", "amin-long-rows")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "int64_minmax_identity", "reductions")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "-9223372036854775808")


@pytest.mark.parametrize("state", STATES)
def test_int64_identity_refused_as_built_and_results_equal_eager_with_npu_fixes(runs, state):
    """As built, every kernel fills its int32 accumulator with int64's extreme, which the
    interpreter refuses (a device's frontend cuts it to 32 bits); with npu_fixes each
    result equals eager."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in PROGRAMS:
        assert "out of bounds for int32" in str(before[label]), (label, before[label])
    assert after == dict.fromkeys(PROGRAMS, True), after
