"""control-deps-lowering: the rule, and each genuine state end to end on stock CPU Inductor."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.shared.registration import entry_to_keep, keep_entry
from npu_fixes.shim.patcher import Patcher
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "control-deps-lowering"
#: Where upstream fixed it first: the behaviour a repaired state must show.
REFERENCE = "5ff81d9c5"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)

# -- the rule ------------------------------------------------------------------------------


def test_rule_keeps_an_existing_lowering_and_accepts_a_new_one():
    def own():
        pass

    def fallback():
        pass

    assert entry_to_keep(own, fallback) is own  # replaced: the one before stands
    assert entry_to_keep(own, own) is own  # untouched
    assert entry_to_keep(None, fallback) is fallback  # none before: the registration's stands
    assert entry_to_keep(None, None) is None


def test_keep_entry_restores_through_the_patcher_and_undo_puts_the_fallback_back():
    def own():
        pass

    def fallback():
        pass

    table = {"op": fallback, "other": fallback}
    patcher = Patcher()
    assert keep_entry(table, "op", own, patcher) is True
    assert table == {"op": own, "other": fallback}
    assert keep_entry(table, "op", own, patcher) is False  # already standing: nothing to do
    assert patcher.restore() == 1 and table == {"op": fallback, "other": fallback}
    plain = {"op": fallback}
    assert keep_entry(plain, "op", own) is True and plain == {"op": own}
    assert keep_entry(plain, "missing", None) is False and "missing" not in plain


# -- genuine upstream states, end to end -------------------------------------------------------

@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel; one interpreter each (compiled C++ is
    shared through the session's Inductor cache)."""
    return run_at_states(genuine, STATES, "control_deps_lowering", "end_to_end")


SYMPTOM = ["LoweringException: AttributeError: 'Subgraph' object has no attribute 'dtype'",
           "  target: control_deps"]
#: Battery cases whose "records" legitimately differ from the reference after the repair,
#: with the reason: the repair runs after the registration, which still calls make_fallback
#: for control_deps and lists it in FALLBACK_LIST; upstream skips both. Neither is read to
#: lower control_deps (the table entry, which is the reference's, decides that).
LEGITIMATE_RECORDS = {"control_deps|once": [1, 1], "control_deps|twice": [2, 2]}


@pytest.mark.parametrize("state", STATES)
def test_registration_into_the_real_table_and_compile(runs, state):
    """Before any repair: where the defect is, control_deps became a fallback and compiling
    stops with the users' error; elsewhere Inductor's own lowering stands and the compiled
    MLP gives eager's dropout masks."""
    res = runs[state]
    if state in BEYOND[NAME]:
        assert res["registered"] == [True, False]
        assert res["e2e"] == {"compiled": False, "error": SYMPTOM}
    else:
        assert res["registered"] == [False, True]
        assert res["e2e"] == {"compiled": True, "equal": True}
        assert "patched" not in res  # nothing installed, nothing patched


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_behaves_like_the_reference(runs, state):
    res, reference = runs[state], runs[REFERENCE]
    # installed on an already-registered backend: the wrapper and the restored entry
    assert res["patched"] == 2 and res["own_restored"] is True
    assert res["probe_after"][0] is False
    assert res["e2e_after"] == reference["e2e"] == {"compiled": True, "equal": True}
    assert res["own_after_reregister"] is True
    assert res["undo"] == 2 and res["undone"] == [True, False]
    before, after, ref = res["battery"], res["battery_after"], reference["battery"]
    assert before.keys() == after.keys() == ref.keys() and len(ref) == 11
    # where the stand-ins stand: the repaired state is the reference; the unrepaired one
    # differs exactly at control_deps
    assert {k for k in ref if after[k]["kept"] != ref[k]["kept"]} == set()
    assert {k for k in ref if before[k]["kept"] != ref[k]["kept"]} == {"control_deps|once",
                                                                        "control_deps|twice"}
    differing = {k: after[k]["records"] for k in ref if after[k]["records"] != ref[k]["records"]}
    assert differing == LEGITIMATE_RECORDS
    assert all(ref[k]["records"] == [0, 0] for k in LEGITIMATE_RECORDS)


def test_reference_battery_shape(runs):
    """What the fixed registration does with each stand-in (the reference's behaviour)."""
    ref = runs[REFERENCE]["battery"]
    assert {k: v["kept"] for k, v in ref.items()} == {
        f"{n}|{label}": n != "sort" for n in ("control_deps", "sort", "mul", "assert_scalar")
        for label in ("once", "twice", "without") if not (n == "control_deps" and label == "without")}
