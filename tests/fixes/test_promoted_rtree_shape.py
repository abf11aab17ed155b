"""promoted-rtree-shape: the rewrite of load lines in-process, then reductions over promoted
nodes compiled through every genuine state and the fixed wheel, kernels run in Triton's
interpreter with the backend's launcher grid, against eager and the wheel's loads
(tests/programs/promoted_rtree_shape.py)."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.promoted_rtree_shape import broadcast_load, leaves_of, slot_tokens
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "promoted-rtree-shape"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
#: A load in each whose pointer leaves out a promoted node its mask names.
BARRED = ("per-head-weighted", "over-batch", "over-batch-wide")
CONTROL = "per-row-permuted"
TOKENS = ["real_block_x5", "real_block_x4", "r0_3_blk", "r0_2_blk"]


def test_slot_tokens_split_the_collapsed_entry():
    assert slot_tokens("[real_block_x5, real_block_x4, r0_3_blk*r0_2_blk]", 2, 4) == TOKENS
    assert slot_tokens("[r0_2_blk*r0_1_blk, real_block_x0]", 0, 3) == ["r0_2_blk", "r0_1_blk", "real_block_x0"]
    assert slot_tokens("[r0_2_blk*r0_1_blk, real_block_x0]", 0, 4) is None  # rank does not match
    assert slot_tokens("[a, b", 0, 2) is None and slot_tokens("x", 0, 1) is None and slot_tokens("[a]", 3, 1) is None


def test_broadcast_load_widens_a_bar_only():
    line = "    tmp1 = tl.load(in_ptr1 + (r0_2), (r0_3mask & r0_2mask), eviction_policy='evict_last', other=0.0)"
    assert broadcast_load(line, ["r0_3", "r0_2"], TOKENS) == (
        "    tmp1 = tl.load(in_ptr1 + (tl.broadcast_to(r0_2, [real_block_x5, real_block_x4, r0_3_blk, r0_2_blk])), "
        "(r0_3mask & r0_2mask), eviction_policy='evict_last', other=0.0)")
    unchanged = [
        "tmp0 = tl.load(in_ptr0 + (r0_2 + 64*r0_3), (r0_3mask & r0_2mask), other=0.0)",  # both nodes
        "tmp1 = tl.load(in_ptr1 + (r0_2), None, eviction_policy='evict_last')",  # no mask
        "tmp1 = tl.load(in_ptr1 + (r0_2), xmask)",  # no node's mask
        "tmp1 = tl.load(in_ptr1 + tl.broadcast_to(r0_2, [a, b, c, d]), r0_3mask & r0_2mask)",  # done
        "tmp1 = tl.load(in_ptr1, r0_3mask)",  # no address to widen
        "tmp2 = tmp0 * tmp1",
    ]
    assert all(broadcast_load(text, ["r0_3", "r0_2"], TOKENS) is None for text in unchanged)


def test_leaves_from_either_signature():
    assert leaves_of({"leaf_names": ["r0_3", "r0_2"], "blk_node_names": ["x"]}) == ["r0_3", "r0_2"]
    assert leaves_of({"blk_node_names": ["real_block_r0_3", "r0_2_blk"]}) == ["r0_3", "r0_2"]


# -- genuine states and the fixed wheel ---------------------------------------------------
@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "promoted_rtree_shape", "battery")


def test_the_defect_is_at_every_commit():
    assert BEYOND[NAME] == set(COMMITS)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state(runs, state):
    run = runs[state]
    needed = state in BEYOND[NAME]
    assert run["probe_before"][0] is needed, run["probe_before"]
    assert run["state"] == ("applied" if needed else "not-needed")
    assert run["probe_after"] is False and run["undone"] is needed


def _bars(record: dict) -> list[str]:
    return [load["load"] for load in record["loads"] if load["bar"]]


@pytest.mark.parametrize("state", STATES)
def test_bars_without_and_broadcast_pointers_with(runs, state):
    """At every commit one load per program keeps a pointer narrower than its mask; with
    npu_fixes it is broadcast to the block and nothing else changes. Results equal eager
    either way: stock Triton broadcasts a pointer to its mask, triton-ascend does not."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in (*BARRED, CONTROL):
        assert before[label]["equal"] and after[label]["equal"], (label, before[label], after[label])
        assert not _bars(after[label]), (label, after[label])
        changed = [(b["load"], a["load"]) for b, a in zip(before[label]["loads"], after[label]["loads"], strict=True)
                   if b != a]
        assert [b for b, _ in changed] == _bars(before[label])
        assert all("tl.broadcast_to(" in a for _, a in changed)
    for label in BARRED:
        assert len(_bars(before[label])) == (1 if state in BEYOND[NAME] else 0), (label, before[label])
    assert not _bars(before[CONTROL])


def test_the_repaired_loads_are_the_wheels_at_bafc50684(runs):
    """bafc50684 emits the wheel's kernels for these programs but for the bar: with npu_fixes
    every load is the wheel's. (8bfbb9ed1 promotes with static tokens, ``real_block_r0_2``;
    the wheel does not promote the control.)"""
    for label in BARRED:
        assert runs["bafc50684"]["after"][label]["loads"] == runs[WHEEL]["before"][label]["loads"], label
