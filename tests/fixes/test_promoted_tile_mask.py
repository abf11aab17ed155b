"""promoted-tile-mask: the rewrite of load lines in-process, then reductions with a load of an
outer dimension alone compiled with ``dynamic=True`` through every genuine state and both
published wheels, kernels run in Triton's interpreter, against eager
(tests/programs/promoted_tile_mask.py)."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import promoted_tile_mask as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states, run_program
from tests.genuine_states import COMMITS

NAME = "promoted-tile-mask"
STATES = (*COMMITS, *FIXED_UPSTREAM)
#: A load in each indexed by the outer tiled node alone: the weight ``w[r0_2]``, the bias ``b[r0_2]``.
DEFECTIVE = ("weighted-sum", "biased-mean")
CONTROL = "plain-sum"
PROGRAMS = (*DEFECTIVE, CONTROL)
OUT_OF_BOUNDS = "OutOfBounds: "
TILED = ["r0_2", "r0_1"]
#: The load of ``w[r0_2]`` (``b[r0_2]``) with npu_fixes at every state (as built: mask ``None``).
WEIGHT = "tl.load(in_ptr1 + r0_2, r0_2mask, eviction_policy='evict_last')"


def test_tile_masked_ands_the_missing_tile_mask_into_a_load():
    assert fix.tile_masked("        tmp1 = tl.load(in_ptr1 + (r0_2), None, eviction_policy='evict_last')", TILED) == (
        "        tmp1 = tl.load(in_ptr1 + (r0_2), r0_2mask, eviction_policy='evict_last')")
    assert fix.tile_masked("    tmp1 = tl.load(in_ptr2 + (r0_2 + x0*(ks0 // 2)), x0mask, other=0.0)", TILED) == (
        "    tmp1 = tl.load(in_ptr2 + (r0_2 + x0*(ks0 // 2)), (x0mask) & r0_2mask, other=0.0)")
    assert fix.tile_masked("tmp1 = tl.load(in_ptr1 + r0_2, eviction_policy='evict_last')", TILED) == (
        "tmp1 = tl.load(in_ptr1 + r0_2, r0_2mask, eviction_policy='evict_last')")  # no mask at all
    assert fix.tile_masked("tmp1 = tl.load(in_ptr1 + r0_2, mask=x0mask)", TILED) == (
        "tmp1 = tl.load(in_ptr1 + r0_2, mask=(x0mask) & r0_2mask)")
    assert fix.tile_masked("tmp0 = tl.load(in_ptr0 + (r0_1 + ks0*r0_2), x0mask)", TILED) == (
        "tmp0 = tl.load(in_ptr0 + (r0_1 + ks0*r0_2), (x0mask) & r0_2mask & r0_1mask)")


def test_tile_masked_leaves_a_masked_load_and_one_of_no_tiled_node():
    unchanged = [
        "tmp0 = tl.load(in_ptr0 + (r0_1 + ks0*r0_2), (r0_2mask & r0_1mask) & x0mask, other=0.0)",  # has both
        "tmp1 = tl.load(in_ptr1 + (r0_2), r0_2mask, eviction_policy='evict_last')",  # has its own
        "tmp1 = tl.load(in_ptr1 + (x0), x0mask)",  # no tiled node
        "tmp1 = tl.load(in_ptr1 + (r0_3), None)",  # a node without a tile loop
        "tmp1 = tl.load(in_ptr1 + (x0 + 2*r0_index), r0_mask & x0mask)",  # another tree's flat index
        "tmp2 = tmp0 * r0_2",  # no load
        "tl.store(out_ptr0 + (r0_2), tmp1, None)",  # a store
    ]
    assert [fix.tile_masked(line, TILED) for line in unchanged] == [None] * len(unchanged)


def test_only_a_dynamic_rewrite_has_tiled_nodes():
    loop_nodes = [("r0_2", 1, None, "r0_2numel"), ("r0_1", 2, None, "r0_1numel")]
    assert fix.tiled_nodes({"dynamic": True, "loop_nodes": loop_nodes}) == TILED
    assert fix.tiled_nodes({"dynamic": False, "loop_nodes": loop_nodes}) == []
    assert fix.tiled_nodes({"dynamic": True, "loop_nodes": None}) == []


# -- genuine states and the published wheels ----------------------------------------------
@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "promoted_tile_mask", "battery")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "keeps no r0_1mask")


def _untiled(record: dict) -> list[str]:
    return [load["load"] for load in record["loads"] if load["untiled"]]


@pytest.mark.parametrize("state", STATES)
def test_out_of_bounds_as_built_and_equal_to_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in DEFECTIVE:
        assert str(before[label]["equal"]).startswith(OUT_OF_BOUNDS), (label, before[label])
    for label in PROGRAMS:
        assert after[label]["equal"] is True and not _untiled(after[label]), (label, after[label])
    assert before[CONTROL]["equal"] is True
    assert after[CONTROL]["loads"] == before[CONTROL]["loads"], "a load with every tile mask is left as it is"
    for label in DEFECTIVE:  # the weight's (the bias's) load gets the tile mask of its node
        assert WEIGHT in [load["load"] for load in after[label]["loads"]], (label, after[label])


@pytest.mark.parametrize("state", ("8bfbb9ed1", "bafc50684", "2.13.0"))
def test_every_other_fix_leaves_the_programs_out_of_bounds(genuine, state):
    from tests.conftest import wheel_install

    location = wheel_install(state) if state in FIXED_UPSTREAM else genuine(state)
    res = run_program("promoted_tile_mask", "battery", location=location,
                      env={"NPU_FIXES": "0", "NPU_FIXES_DISABLE": NAME})
    after = res["after"]
    assert res["state"] == "disabled" and after[CONTROL]["equal"] is True, res
    for label in DEFECTIVE:
        assert str(after[label]["equal"]).startswith(OUT_OF_BOUNDS), (label, after[label])
