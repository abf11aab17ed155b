"""Guards for the defects no run-time repair can fix: nd-reduction, promoted-epilogue,
slice-scatter-offset and partial-view-fold. Rules in-process; then, at every genuine state and
the 2.13.0 wheel, one fresh interpreter runs the four probes and the registry's decision,
and for nd-reduction the reduction heuristic before and after the guard."""

from __future__ import annotations

import pickle

import pytest

from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS

GUARDS = ("nd-reduction", "promoted-epilogue", "slice-scatter-offset", "partial-view-fold")
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
#: Upstream commit that fixed each defect, named by the probe's detail where it is present.
FIXED_IN = {"nd-reduction": "e1863287d", "promoted-epilogue": "95c9094da",
            "slice-scatter-offset": "95c9094da", "partial-view-fold": "2.13.0 wheel"}


# -- rules ----------------------------------------------------------------------------------

def test_nd_rule_counts_reduction_trees():
    from npu_fixes.fixes import nd_reduction as nd

    assert nd.reduction_prefixes({"x": 8, "r0_": 4, "r1_": 2}) == ["r0_", "r1_"]
    assert nd.is_nd_reduction({"x": 8, "r0_": 4, "r1_": 2})
    assert nd.is_nd_reduction({"r0_": 4, "r1_": 2, "r2_": 2})
    for hints in ({"x": 8, "r0_": 4}, {"x": 8, "y": 4}, {"r0_": 4}, None, [("r0_", 1), ("r1_", 1)]):
        assert not nd.is_nd_reduction(hints), hints


def test_nd_rule_replaces_only_the_known_failure():
    from npu_fixes.fixes import nd_reduction as nd

    nd_hints = {"x": 2, "r0_": 2, "r1_": 2}
    bare = NotImplementedError(f"size_hints: {nd_hints}")
    clear = nd.guarded_error(nd_hints, bare)
    assert isinstance(clear, nd.NdReductionUnsupported)
    assert isinstance(clear, NotImplementedError) and isinstance(clear, RuntimeError)
    text = str(clear)
    assert "torch._inductor.config.triton.tile_reductions" in text and "e1863287d" in text
    assert "2.13.0" in text and "False" in text
    assert nd.guarded_error({"x": 2, "r0_": 4}, bare) is None  # not an ND reduction
    assert nd.guarded_error(nd_hints, ValueError("other")) is None  # another failure
    assert nd.guarded_error(nd_hints, clear) is None  # already the clear error
    # compile workers send exceptions back pickled: type and text survive
    again = pickle.loads(pickle.dumps(clear))
    assert type(again) is nd.NdReductionUnsupported and str(again) == text


def test_nd_guard_on_a_stand_in_module(make_module):
    import importlib

    from npu_fixes.fixes import nd_reduction as nd
    from npu_fixes.shim.patcher import Patcher

    name = make_module("nd_stand_in", """
        def reduction(size_hints, reduction_hint=False, triton_meta=None, filename=None,
                      inductor_meta=None):
            if inductor_meta == "fail":
                raise ValueError("other failure")
            if len(size_hints) != 2:
                raise NotImplementedError(f"size_hints: {size_hints}")
            return ("configs", dict(size_hints), reduction_hint)
        """)
    module = importlib.import_module(name)
    original = module.reduction
    patcher = Patcher()
    nd.install(module, patcher)
    assert module.reduction is not original
    assert module.reduction({"x": 2, "r0_": 4}, "INNER") == ("configs", {"x": 2, "r0_": 4}, "INNER")
    with pytest.raises(ValueError, match="other failure"):
        module.reduction({"x": 2, "r0_": 2, "r1_": 2}, inductor_meta="fail")
    with pytest.raises(NotImplementedError, match="size_hints") as bare:  # one tree, x/y tiles
        module.reduction({"x": 2, "y": 2, "r0_": 2})
    assert not isinstance(bare.value, nd.NdReductionUnsupported)
    with pytest.raises(nd.NdReductionUnsupported, match="tile_reductions") as clear:
        module.reduction(size_hints={"x": 2, "r0_": 2, "r1_": 2})
    assert isinstance(clear.value.__cause__, NotImplementedError)
    assert patcher.restore() == 1 and module.reduction is original


def test_offset_rule_evaluates_emitted_indexes():
    from npu_fixes.fixes.slice_scatter_offset import offset_at

    lane0 = {"x0": 0}
    assert offset_at("(-3) + x0", lane0) == -3
    assert offset_at("tl.maximum((-3) + x0, 0)", lane0) == 0
    assert offset_at("triton_helpers.div_floor_integer((-3) + x0,  2)", lane0) == -2
    assert offset_at("tl.maximum(triton_helpers.div_floor_integer((-3) + x0,  2), 0)", lane0) == 0
    assert offset_at("5 + 2*x0", {"x0": 3}) == 11
    for unjudged in ("x1 + 3", "tl.load(x0)", "x0.__class__", "(-3) + x0 <", "x0 if x0 else 1",
                     "tl.maximum(x0, 0.5)", "[x0]"):
        assert offset_at(unjudged, lane0) is None, unjudged


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


# -- genuine states and the wheel ----------------------------------------------------------

# NPU_FIXES=0 keeps the registered fixes out; a Registry of the four guards decides them
# with the shim's own rules. The heuristic battery (tests/programs/upgrade_guards.py) calls
# the live `reduction` (wrappers included) with `cached_autotune` replaced by a scoped
# recorder, so the candidate configs are compared, with tile_reductions off and on.


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, probed and guarded in a fresh interpreter."""
    roots = {s: genuine(s) for s in COMMITS}
    roots[WHEEL] = wheel_install(WHEEL)
    return {s: run_program("upgrade_guards", "guarded", env={"NPU_FIXES": "0"}, location=root)
            for s, root in roots.items()}


def present(name: str, state: str) -> bool:
    return state in BEYOND[name]


def test_presence_table_is_what_the_guards_expect():
    assert BEYOND["nd-reduction"] == {"8bfbb9ed1", "95c9094da"}
    assert BEYOND["promoted-epilogue"] == BEYOND["slice-scatter-offset"] == {"8bfbb9ed1"}
    assert BEYOND["partial-view-fold"] == set(COMMITS)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state_follow_the_presence_table(runs, state):
    res = runs[state]
    for name in GUARDS:
        defective, detail = res["probe"][name]
        assert defective is present(name, state), (name, detail)
        state_value, state_detail = res["state"][name]
        if present(name, state):
            assert state_value == "upgrade-needed" and state_detail == detail
            assert FIXED_IN[name] in detail and "2.13.0 wheel" in detail and "upgrade" in detail
        else:
            assert state_value == "not-needed", (name, state_detail)
    # only the nd-reduction guard installs anything, and only where its defect is
    assert res["patched"] == int(present("nd-reduction", state))
    assert res["identical"] == {name: name != "nd-reduction" or not present(name, state)
                                for name in GUARDS}
    assert res["restored"] == res["patched"] and res["identical_after_restore"]


def test_probe_details_name_the_symptoms(runs):
    old = runs["8bfbb9ed1"]["probe"]
    assert "NotImplementedError: size_hints: {'x': 2, 'r0_': 2, 'r1_': 2}" in old["nd-reduction"][1]
    assert "Cannot broadcast" in old["nd-reduction"][1] and "tile_reductions" in old["nd-reduction"][1]
    assert "0*inf NaN" in old["promoted-epilogue"][1] and "not reproduced" in old["promoted-epilogue"][1]
    assert "expected offsets to be non-negative" in old["slice-scatter-offset"][1]
    assert "not reproduced" in old["slice-scatter-offset"][1]
    assert "_fold_dual_decomp leaves a second view" in old["partial-view-fold"][1]
    assert "not reproduced" in old["partial-view-fold"][1]
    assert "_fold_redundant_range_tree_decomposition folds" in runs[WHEEL]["probe"]["partial-view-fold"][1]


@pytest.mark.parametrize("state", sorted(BEYOND["nd-reduction"]))
def test_nd_guard_turns_the_failure_into_the_clear_error(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert before.keys() == after.keys()
    nd_cases = {k for k in before if k.startswith("2d")}
    for key in nd_cases:  # the heuristic's own failure, with tile_reductions off or on
        assert before[key]["raised"] == "NotImplementedError" and before[key]["cause"] is None
        assert before[key]["text"].startswith("size_hints: {")
        assert after[key]["raised"] == "NdReductionUnsupported" and after[key]["nie"]
        assert after[key]["cause"] == "NotImplementedError"
        assert "tile_reductions" in after[key]["text"] and "e1863287d" in after[key]["text"]
    # everything else is untouched, whatever the setting
    assert {k: after[k] for k in before if k not in nd_cases} == {
        k: before[k] for k in before if k not in nd_cases}
    assert all("configs" in before[k] and before[k]["configs"] for k in before if k not in nd_cases)
    assert runs[state]["probe_after"][0] is True and "guard on" in runs[state]["probe_after"][1]


@pytest.mark.parametrize("state", [s for s in STATES if s not in BEYOND["nd-reduction"]])
def test_fixed_heuristic_takes_nd_reductions_and_is_left_alone(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert after == before
    assert all(case["configs"] for case in before.values())


@pytest.mark.parametrize("state", STATES)
def test_codegen_observations_match_the_presence_table(runs, state):
    res = runs[state]
    offsets = res["offsets"]
    assert set(offsets) == {"start=3", "start=3,step=2"}
    values = {label: value for label, (_, value) in offsets.items()}
    if present("slice-scatter-offset", state):
        assert values == {"start=3": -3, "start=3,step=2": -2}
    else:
        assert values == {"start=3": 0, "start=3,step=2": 0}
    from npu_fixes.fixes.promoted_epilogue import product_unmasked, store_keeps_reduction_blocks

    lines = res["epilogue"]
    old = present("promoted-epilogue", state)
    assert store_keeps_reduction_blocks(lines, (1, 2), 3) is old
    assert product_unmasked(lines, "tmp2", "tmp0", "r0_2mask") is old
