"""widened-load-inner-axis: selects under a condition on the kernel's inner axis compiled
through genuine states and both published wheels, kernels run in Triton's interpreter,
against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import widened_load_inner_axis as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states

#: 95c9094da..bafc50684 share the rewrite; 8bfbb9ed1 skips the loads that show it.
STATES = ("8bfbb9ed1", "95c9094da", "bafc50684", *FIXED_UPSTREAM)
LOUD_AT = ("95c9094da", "bafc50684")
SILENT_AT = ("95c9094da", "bafc50684", *FIXED_UPSTREAM)
RIGHT = {"slice-backward-of-a-select": True, "select-times": True, "select-times-widened": True,
         "circular-conv-training": True, "pad-circular-backward": ["pass", ""]}
SHAPES = "Cannot make_shape_compatible: incompatible dimensions at index 1"


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "widened_load_inner_axis", "loads")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "a select under a condition on x0 is widened along x0")


@pytest.mark.parametrize("state", STATES)
def test_selects_under_a_condition_fail_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert before["slice-backward-of-a-select"] is (state not in SILENT_AT), before
    if state in LOUD_AT:
        assert SHAPES in before["circular-conv-training"] and SHAPES in before["pad-circular-backward"][1], before
        assert before["pad-circular-backward"][0] == "run-time-error", before
    else:
        assert before["circular-conv-training"] is True and before["pad-circular-backward"] == ["pass", ""], before
    assert before["select-times"] is True and before["select-times-widened"] is True, "the control, as built"
    assert after == RIGHT, after


def test_the_rule_follows_the_inner_axis_through_assignments():
    body = ["x0offset = (group_base + i) % x0_blocks * real_block_x0",
            "x1offset = (group_base + i) // x_cumblk_1 % x1_blocks * real_block_x1",
            "x0index = x0offset + tl.arange(0, real_block_x0)[None, :]",
            "x0 = x0index",
            "x1index = x1offset + tl.arange(0, real_block_x1)[:, None]",
            "x1 = x1index",
            "x1mask = x1index < x1numel",
            "tmp0 = (x0).to(tl.int32)",
            "tmp1 = tmp0 < 1",
            "tmp2 = tl.load(in_ptr0 + (3 + 4*x1), tmp1 & x1mask, other=0.0)",
            "tmp3 = tl.load(in_ptr0 + (tl.broadcast_to(3 + 4*x1, [real_block_x1, real_block_x0])), x1mask)",
            "tmp4 = tl.load(in_ptr0 + (3 + 4*x1), x1mask)",
            "tmp5 = tl.load(in_ptr1 + (2*x0 + 8*x1), x0mask & x1mask)",
            "tmp6 = tl.load(in_ptr1 + (2*x0 + 8*x1), tmp1 & x0mask & x1mask)"]
    assert fix.varying_loads(body, "x0", "x") == {"tmp2", "tmp3", "tmp6"}
    # along x1 every load indexes x1 itself, and only x1's own mask varies along it
    assert fix.varying_loads(body, "x1", "x") == set()
