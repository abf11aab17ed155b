"""nd-reduction (guard): the reduction heuristic's rules in-process, then at every genuine state and
the 2.13.0 wheel the probe, the state and the heuristic before and after the guard."""

from __future__ import annotations

import pickle

import pytest

from tests.fixes.guards import STATES, check_probe_and_state, guard_runs, present

NAME = "nd-reduction"


@pytest.fixture(scope="module")
def runs(genuine):
    return guard_runs(genuine, NAME)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state_follow_the_catalogue(runs, state):
    check_probe_and_state(runs[state], NAME, state)


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


def test_probe_detail_names_the_symptom_and_the_setting(runs):
    detail = runs["8bfbb9ed1"]["probe"][1]
    assert "NotImplementedError: size_hints: {'x': 2, 'r0_': 2, 'r1_': 2}" in detail
    assert "Cannot broadcast" in detail and "tile_reductions" in detail


# The heuristic battery (tests/programs/upgrade_guards.py) calls the live `reduction` (wrappers
# included) with `cached_autotune` replaced by a scoped recorder, so the candidate configs are
# compared, with tile_reductions off and on.

@pytest.mark.parametrize("state", [s for s in STATES if present(NAME, s)])
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


@pytest.mark.parametrize("state", [s for s in STATES if not present(NAME, s)])
def test_fixed_heuristic_takes_nd_reductions_and_is_left_alone(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert after == before
    assert all(case["configs"] for case in before.values())


