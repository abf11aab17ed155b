"""triton36-combine-attrs: the description in-process, then an OUTER sum that the backend
splits, compiled through every genuine state and the fixed wheel with launchers built for
this machine's Triton 3.6 (tests/programs/triton36_launcher.py)."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.triton36_combine_attrs import ConfigAttrs
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "triton36-combine-attrs"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
IMPORT_ERROR = "ImportError: cannot import name 'AttrsDescriptor' from 'triton.compiler.compiler'"


def test_the_description_in_the_36_form():
    """What the combine kernel passes, in the form the 2.13.0 wheel builds for 3.6."""
    given = {"arg_properties": {"tt.divisibility": (0, 1, 2), "tt.equal_to": ()}, "cls": "AttrsDescriptor"}
    assert ConfigAttrs.from_dict(given) == {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                                            (2,): [["tt.divisibility", 16]]}
    with pytest.raises(ValueError, match="tt.equal_to"):
        ConfigAttrs.from_dict({"arg_properties": {"tt.divisibility": (0,), "tt.equal_to": (3,)}})


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "triton36_launcher", "combine")


def test_the_defect_is_at_every_commit():
    assert BEYOND[NAME] == set(COMMITS)


@pytest.mark.parametrize("state", STATES)
def test_split_sum_stops_as_built_and_equals_eager_with_the_fix(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is (state in COMMITS), res["probe_before"]
    assert res["state"] == ("applied" if state in COMMITS else "not-needed")
    if state in COMMITS:
        assert res["before"]["outer-sum"]["error"].startswith(IMPORT_ERROR)
        assert "rsplit_outer=False" in res["probe_before"][1]
    else:
        assert res["before"] == {"outer-sum": {"equal": True}}
    assert res["after"] == {"outer-sum": {"equal": True}} and res["probe_after"] is False
    assert res["undone"] is (state in COMMITS)
