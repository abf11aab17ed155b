"""empty-cat-input: concats with empty inputs compiled through the genuine state that has
the loop concat (8bfbb9ed1), kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import run_at_states

STATE = "8bfbb9ed1"


@pytest.fixture(scope="module")
def run(genuine) -> dict:
    return run_at_states(genuine, (STATE,), "empty_cat_input", "concats")[STATE]


def test_probe_says_needed_and_the_fix_applies(run):
    assert run["probe_before"][0] is True and run["state"] == "applied"
    assert "loop concat of width 0" in run["probe_before"][1]
    assert run["probe_after"] is False and run["undone"] is True


def test_empty_concats_stop_the_compile_as_built_and_equal_eager_with_npu_fixes(run):
    before, after = run["before"], run["after"]
    assert "ZeroDivisionError: Modulo by zero" in str(before["all-empty"])
    assert "ZeroDivisionError: Modulo by zero" in str(before["tril-indices"])
    assert before["one-empty"] is True, "one empty input among others compiles as built"
    assert after == {"all-empty": True, "tril-indices": True, "one-empty": True}, after
