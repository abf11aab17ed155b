"""int64-arithmetic (guard): int64 arithmetic inside a kernel at every genuine commit and the
2.13.0 and 2.14.0 wheels, kernels run in Triton's interpreter, against eager
(tests/programs/int64_arithmetic.py)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, "2.13.0", "2.14.0")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "int64_arithmetic", "guarded")


@pytest.mark.parametrize("state", STATES)
def test_a_value_past_int32_wraps_as_built_and_stops_the_compile_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and "computed as torch.int32" in res["probe_before"][1]
    assert res["state"] == "guarded" and res["undone"] is True, res
    before, after = res["before"], res["after"]
    assert isinstance(before["flat-offsets"], int) and before["flat-offsets"] > 1000, before
    assert re.match(r"Int64ArithmeticOutOfRange: the kernel fused_\w+ computes integer values past int32 "
                    r"\(tmp\d+ in \[0, 2491264512\]\)", after["flat-offsets"]), after
    assert before["row-offsets"] is True and after["row-offsets"] is True  # in int32's range
    # int64's minimum as a fill is not refused (as built the constant stops the kernel: that is
    # int64-constant-range's, which npu_fixes repairs)
    assert after["masked-max"] is True, after
