"""promoted-epilogue (report): the codegen rules in-process, then at every genuine state and the
2.13.0 wheel the probe, the state and the epilogue the live promoted rewrite emits."""

from __future__ import annotations

import pytest

from tests.fixes.guards import STATES, check_probe_and_state, guard_runs, present

NAME = "promoted-epilogue"


@pytest.fixture(scope="module")
def runs(genuine):
    return guard_runs(genuine, NAME)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state_follow_the_catalogue(runs, state):
    check_probe_and_state(runs[state], NAME, state)


BEFORE_95C = [
    "    tmp0 = tl.load(in_ptr0 + (r0_1 + 8*x0), (r0_1mask) & xmask, other=0.0)",
    "    tmp1 = tl.load(in_ptr1 + (r0_1 + 8*r0_2 + 64*x0), (r0_1mask & r0_2mask) & xmask, other=0.0)",
    "    tmp2 = tmp0 * tmp1",
    "    tl.store(out_ptr0 + (x0), tmp3.broadcast_to(XBLOCK, real_block_r0_1, real_block_r0_2), xmask)",
]
AFTER_95C = [
    BEFORE_95C[0], BEFORE_95C[1],
    "    tmp2_broadcast_guard = tl.where(r0_2mask & xmask, tmp0, 0.0)",
    "    tmp2 = tmp2_broadcast_guard * tmp1",
    "    tl.store(out_ptr0 + x0, tmp3.broadcast_to(XBLOCK, 1, 1), xmask)",
]


def test_codegen_rules_tell_the_two_bodies_apart():
    from npu_fixes.fixes.promoted_epilogue import product_unmasked, store_keeps_reduction_blocks

    assert store_keeps_reduction_blocks(BEFORE_95C, (1, 2), 3) is True
    assert store_keeps_reduction_blocks(AFTER_95C, (1, 2), 3) is False
    assert store_keeps_reduction_blocks(BEFORE_95C[:3], (1, 2), 3) is None
    assert store_keeps_reduction_blocks(BEFORE_95C, (1, 2), 4) is None  # no rank-4 broadcast
    assert product_unmasked(BEFORE_95C, "tmp2", "tmp0", "r0_2mask") is True
    assert product_unmasked(AFTER_95C, "tmp2", "tmp0", "r0_2mask") is False
    assert product_unmasked(AFTER_95C, "tmp2", "tmp0", "r0_1mask") is None  # wrong mask
    assert product_unmasked(BEFORE_95C, "tmp9", "tmp0", "r0_2mask") is None
    inline = ["    tmp2 = tl.where(r0_2mask, tmp0, 0) * tmp1"]
    assert product_unmasked(inline, "tmp2", "tmp0", "r0_2mask") is False


def test_probe_detail_names_the_symptoms(runs):
    detail = runs["8bfbb9ed1"]["probe"][1]
    assert "0*inf NaN" in detail and "not reproduced" in detail


@pytest.mark.parametrize("state", STATES)
def test_epilogue_follows_the_catalogue(runs, state):
    from npu_fixes.fixes.promoted_epilogue import product_unmasked, store_keeps_reduction_blocks

    lines = runs[state]["epilogue"]
    old = present(NAME, state)
    assert store_keeps_reduction_blocks(lines, (1, 2), 3) is old
    assert product_unmasked(lines, "tmp2", "tmp0", "r0_2mask") is old
