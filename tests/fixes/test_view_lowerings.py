"""view-lowerings: writes into ``diagonal`` and ``as_strided`` views compiled through every
genuine state and both published wheels, kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("diagonal-add", "fill-diagonal", "as-strided-zero", "input-diagonal")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "view_lowerings", "writes")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "a write into the view is dropped")


@pytest.mark.parametrize("state", STATES)
def test_writes_into_views_dropped_as_built_and_kept_with_npu_fixes(runs, state):
    """As built, each write into a ``diagonal`` or ``as_strided`` view (of a clone, or of a
    graph input) is lost: the result, or the input, differs from eager's. With npu_fixes
    each equals eager."""
    before, after = runs[state]["before"], runs[state]["after"]
    assert before == dict.fromkeys(PROGRAMS, False), before
    assert after == dict.fromkeys(PROGRAMS, True), after
