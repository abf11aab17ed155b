"""downcast-workspace: the rule in-process, then integer, bool and float64 sums that the
backend splits across cores, compiled through every genuine state and both published wheels,
kernels run in Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.downcast_workspace import WORKSPACE, with_workspace
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
NARROWED = ("count-tokens", "mask-lengths", "int64-columns", "int32-sum", "float64-sum")
#: 8bfbb9ed1 splits only OUTER sums: its full and row sums run unsplit, and right.
UNSPLIT = {"8bfbb9ed1": {"count-tokens", "mask-lengths", "int32-sum", "float64-sum"}}


def test_the_workspace_is_added_only_where_it_is_narrowed():
    assert with_workspace({WORKSPACE: "*i64", "in_ptr0": "*i64"}, ["in_out_ptr0"]) == ["in_out_ptr0", WORKSPACE]
    assert with_workspace({WORKSPACE: "*fp64"}, ()) == [WORKSPACE]
    kept = ["x", WORKSPACE]
    assert with_workspace({WORKSPACE: "*i64"}, kept) is kept
    kept = ("in_out_ptr0",)
    assert with_workspace({"in_ptr0": "*i64"}, kept) is kept


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "downcast_workspace", "sums")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res)


@pytest.mark.parametrize("state", STATES)
def test_split_sums_wrong_as_built_and_right_with_npu_fixes(runs, state):
    """As built, every split sum whose workspace is narrowed (int64, int32, bool, float64)
    comes back wrong; with npu_fixes each equals eager, over the same launches. The float32
    sum (no narrowed workspace) is right either way."""
    before, after = runs[state]["before"], runs[state]["after"]
    unsplit = UNSPLIT.get(state, set())
    for label in NARROWED:
        assert before[label]["equal"] is (label in unsplit), (label, before[label])
        if label not in unsplit:
            assert before[label]["grids"] == after[label]["grids"] == [40, 40], label
    assert before["float32-sum"]["equal"] is True
    assert all(r["equal"] for r in after.values()), after
