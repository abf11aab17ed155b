"""widened-load-tail: strided slices and selects compiled through every genuine state and
both published wheels, kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import widened_load_tail as fix
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("rope-odd-lanes", "grid-column-1", "select-times", "grid-sample")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "widened_load_tail", "loads")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "admits a lane 1 element past the last selected one")


@pytest.mark.parametrize("state", STATES)
def test_widened_loads_read_past_their_buffer_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in PROGRAMS:
        assert "OutOfBounds" in str(before[label]) and "a load outside every buffer" in str(before[label]), \
            (label, before[label])
    assert after == dict.fromkeys(PROGRAMS, True), after


def test_the_rules_mask_only_lanes_that_are_dropped():
    lines = ["    _es_smask0 = (4*x0offset + _es_slane0) < 4*x0numel", "    tmp0 = x"]
    assert fix.bounded(lines) == ["    _es_smask0 = (4*x0offset + _es_slane0) < 4*x0numel - 3", "    tmp0 = x"]
    body = ["    _es_lane0 = tl.arange(0, 4)[None, :]",
            "    _es_full0 = tl.load(in_ptr0 + (3 + 4*x0) + _es_lane0, x0mask, eviction_policy='evict_last')",
            "    _es_lane1 = tl.arange(0, 2)[None, :]",
            "    _es_full1 = tl.load(in_ptr1 + (2*x0) + _es_lane1, x0mask)"]
    out = fix.bounded_selects(body)
    assert out[1] == ("    _es_full0 = tl.load(in_ptr0 + (3 + 4 * x0) + _es_lane0, x0mask & (_es_lane0 < 1), "
                      "eviction_policy='evict_last')")
    assert out[3] == body[3], "element 0 of a row: every lane lies in the row"
    assert fix.bounded_selects(out) == out, "a second pass over the body adds nothing"
