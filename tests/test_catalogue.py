"""The fix catalogue: every fix's entry, ``npu-fixes list``, and the documentation made from it."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from npu_fixes.fixes import FIX_NAMES, all_fixes
from npu_fixes.shim.catalogue import EVERY_COMMIT, NOT_FIXED, STATES, WHEEL, WHEELS, About
from npu_fixes.tools import catalogue
from npu_fixes.tools.cli import main
from tests import genuine_states

BACKEND = [f for f in all_fixes() if f.module.startswith("torch_npu.")]


def _list(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list", *args]) == 0
    return out.getvalue()


def test_list_json_gives_every_fix_with_every_field_filled() -> None:
    entries = json.loads(_list("--json"))
    assert [e["name"] for e in entries] == list(FIX_NAMES)
    for e in entries:
        assert e["kind"] in ("repair", "guard", "report")
        assert e["present"] and e["symptom"] and e["fixed_in"] and e["workaround"] and e["module"], e
        assert set(e["status_at"]) == set(STATES)
        assert (e["fixed_in"] == NOT_FIXED) == bool(set(e["present"]) & set(WHEELS)), e


def test_list_table_and_markdown() -> None:
    table = _list().splitlines()
    assert table[0].split()[:2] == ["fix", "kind"] and len(table) == len(FIX_NAMES) + 1
    assert _list("--markdown") == catalogue.summary_table()


@pytest.mark.parametrize("state", STATES)
def test_generated_matrix_says_what_the_tested_status_says(state: str) -> None:
    """docs/states.md's cell is what tests/test_matrix.py checks ``status`` against at that row."""
    if state in WHEELS:
        needed, absent = genuine_states.UNFIXED, genuine_states.absent_at(state)
    else:
        needed, absent = genuine_states.needed_at(state), genuine_states.absent_at(state)
    for fix in BACKEND:
        assert catalogue.status_at(fix, state) == genuine_states.expected_state(fix.name, needed, absent), fix.name


def test_kinds_follow_the_records() -> None:
    kinds = {f.name: f.kind for f in all_fixes()}
    assert {n for n, k in kinds.items() if k != "repair"} == {f.name for f in all_fixes() if not f.repairable}
    assert kinds["promoted-epilogue"] == "report" and kinds["nonlinearize-grid"] == "guard"


@pytest.mark.parametrize(("changes", "message"), [
    ({"present": frozenset({"1.0"})}, "unknown states"),
    ({"absent": frozenset({"8bfbb9ed1"})}, "both present and absent"),
    ({"workaround": ""}, "must all be given"),
    ({"present": EVERY_COMMIT | {"2.13.0"}}, "present in the wheels"),
    ({"fixed_in": NOT_FIXED}, "present in the wheels"),
])
def test_about_refuses_inconsistent_entries(changes: dict, message: str) -> None:
    fields = {"symptom": "s", "present": frozenset({"8bfbb9ed1"}), "fixed_in": WHEEL, "workaround": "w"}
    with pytest.raises(ValueError, match=message):
        About(**(fields | changes))


def test_generated_documentation_is_current() -> None:
    """What ``python -m npu_fixes.tools.catalogue`` writes equals what is committed."""
    assert catalogue.stale() == []
