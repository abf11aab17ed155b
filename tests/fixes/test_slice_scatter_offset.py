"""slice-scatter-offset (report): the offset rule in-process, then at every genuine state and the
2.13.0 wheel the probe, the state and the masked offsets the codegen emits."""

from __future__ import annotations

import pytest

from tests.fixes.guards import STATES, check_probe_and_state, guard_runs, present

NAME = "slice-scatter-offset"


@pytest.fixture(scope="module")
def runs(genuine):
    return guard_runs(genuine, NAME)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state_follow_the_catalogue(runs, state):
    check_probe_and_state(runs[state], NAME, state)


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


def test_probe_detail_names_the_symptom(runs):
    detail = runs["8bfbb9ed1"]["probe"][1]
    assert "expected offsets to be non-negative" in detail and "not reproduced" in detail


@pytest.mark.parametrize("state", STATES)
def test_masked_offsets_follow_the_catalogue(runs, state):
    offsets = runs[state]["offsets"]
    assert set(offsets) == {"start=3", "start=3,step=2"}
    values = {label: value for label, (_, value) in offsets.items()}
    if present(NAME, state):
        assert values == {"start=3": -3, "start=3,step=2": -2}
    else:
        assert values == {"start=3": 0, "start=3,step=2": 0}
