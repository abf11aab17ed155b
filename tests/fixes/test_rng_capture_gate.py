"""rng-capture-gate: the rule, the real upstream registration, and stock Inductor on CPU."""

from __future__ import annotations

import fnmatch

import pytest

from tests.conftest import FIXED_UPSTREAM, run_program, wheel_install
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE, WITHOUT_UNFIXED, sharing_the_target

# The battery (tests/programs/rng_capture_gate.py) registers fallbacks into scratch tables
# and lowers each Bernoulli overload and the other RNG entries in stand-in graphs.


def check_lowered(lowered: dict) -> None:
    """The gate's behaviour: every Bernoulli lowering sets a reason naming its op (even if
    it then raises), keeps an earlier one, returns the lowering's value unchanged; other
    RNG entries stay as registered."""
    cases, reasons = lowered["cases"], lowered["reasons"]
    assert len(cases) == 5 * 5 + 3
    for key, case in cases.items():
        op, label = key.split("|")
        if label == "absent":
            assert case == [False]
        elif label == "other":
            assert case[0] is True and case[2] == "unset"
        else:
            value, behaviour = case
            if label == "raises":
                assert value == f"raised failed {op}"
            else:
                assert value[0] == op  # the lowering's own result
            assert behaviour == ("kept" if label == "kept" else "names the op"), key
            assert reasons[key] == "earlier" if label == "kept" else op in reasons[key]


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(version):
    # the wheels' unfixed defects have their own tests: off here, so nothing of ours is installed
    res = run_program("rng_capture_gate", "armed", env=WITHOUT_UNFIXED, location=wheel_install(version))
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["undo"] == 0
    check_lowered(res["lowered"])


def test_prefix_copy_is_detected_and_repaired(prefix_copy):
    res = run_program("rng_capture_gate", "armed", location=prefix_copy("rng-capture-gate"))
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    check_lowered(res["lowered"])
    assert res["restored"] and res["undo"] >= 1


def test_prefix_lowering_without_gate_leaves_reason_unset(prefix_copy):
    res = run_program("rng_capture_gate", "armed", location=prefix_copy("rng-capture-gate"), undone=True)
    behaviours = {key.split("|")[1]: case[-1] for key, case in res["lowered"]["cases"].items()}
    assert behaviours == {"fresh": "unset", "kept": "kept", "raises": "unset",
                          "registered-twice": "unset", "absent": False, "other": "unset"}


def test_gate_survives_backend_reload_and_import_after_activation(prefix_copy):
    res = run_program("rng_capture_gate", "reloaded", location=prefix_copy("rng-capture-gate"))
    assert res == {"gated_now": True, "gated_after_reload": True, "stock_restored": True}


def test_gate_rule_is_idempotent():
    from npu_fixes.fixes import rng_capture_gate as gate

    table = {op: (lambda: "x") for op in gate.bernoulli_ops()}
    assert len(gate.gate_table(table)) == 5
    once = dict(table)
    assert gate.gate_table(table) == []
    assert table == once


def test_stock_inductor_cpu_compile_records_reason():
    """DeBERTa-style XDropout (a ``bernoulli_`` mask) compiled by stock Inductor on CPU with
    the gate applied to the stock lowering table: the compiled graph records the reason."""
    res = run_program("rng_capture_gate", "stock_compile")
    assert "aten.bernoulli_.float" in res["gated"]
    assert any(r and "bernoulli" in r for r in res["reasons"]), res
    assert res["same"], "fallback_random keeps the eager RNG sequence"


# -- genuine upstream states ----------------------------------------------------------------

#: Genuine states with this fix's defect, each compared with the reference state.
DEFECTIVE = tuple(s for s in PRE_FIX if "rng-capture-gate" in DEFECTS[s])
#: state -> {case pattern: reason} of cases where the repaired state legitimately differs
#: from REFERENCE. None: upstream's lowering.py between these states differs in other
#: lowerings (cat, slice_scatter, index_put, ...), not in how registration treats these.
LEGITIMATE: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="module")
def genuine_runs(genuine):
    """Each defective genuine state and the reference, before and after npu_fixes applies
    (NPU_FIXES=0 until then), in one interpreter per state; the fixes that wrap the same
    registration are off, so that "left identical" speaks of this one."""
    env = {"NPU_FIXES": "0", "NPU_FIXES_DISABLE": sharing_the_target("rng-capture-gate")}
    return {s: run_program("rng_capture_gate", "genuine", env=env, location=genuine(s))
            for s in (*DEFECTIVE, REFERENCE)}


def test_genuine_states_cover_the_defect():
    assert DEFECTIVE == ("8bfbb9ed1", "95c9094da", "f8802037a") and not DEFECTS[REFERENCE]


def test_reference_state_is_left_identical(genuine_runs):
    res = genuine_runs[REFERENCE]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    assert res["battery_after"] == res["battery"]  # raw reasons included
    check_lowered(res["battery"])


@pytest.mark.parametrize("state", DEFECTIVE)
def test_genuine_state_is_repaired_like_reference(genuine_runs, state):
    res, reference = genuine_runs[state], genuine_runs[REFERENCE]["battery"]["cases"]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"]["cases"], res["battery_after"]["cases"]
    assert before.keys() == after.keys() == reference.keys() and len(reference) == 28
    differing = {k for k in reference if after[k] != reference[k]}
    assert differing == listed(LEGITIMATE.get(state, {}), reference)
    check_lowered(res["battery_after"])
    # the battery sees the defect here: before the repair, exactly the Bernoulli lowerings
    # in a graph without a reason differ from the reference (they leave it unset)
    assert {k for k in reference if before[k] != reference[k]} == {
        k for k in reference if k.split("|")[1] in ("fresh", "raises", "registered-twice")}
    assert all(before[k][-1] == "unset" for k in reference if before[k] != reference[k])


def listed(patterns: dict[str, str], cases) -> set[str]:
    """The cases matched by the patterns; each pattern must match at least one case."""
    found = {p: {k for k in cases if fnmatch.fnmatchcase(k, p)} for p in patterns}
    assert all(found.values()), [p for p, ks in found.items() if not ks]
    return set().union(*found.values())
