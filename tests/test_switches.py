"""One parser for every NPU_FIXES* switch: documented words, a warning for anything else."""

from __future__ import annotations

import logging

import pytest

from npu_fixes.fixes import all_fixes
from npu_fixes.shim import switches
from tests.conftest import run_program, run_python
from tests.genuine_states import needed_at

FIXES = ("launch-grid", "rsplit-outer", "te-parallel-ce")


@pytest.mark.parametrize(
    "value, off, unknown",
    [
        ("", set(), []),
        ("launch-grid,rsplit-outer", {"launch-grid", "rsplit-outer"}, []),
        (" launch-grid , ", {"launch-grid"}, []),
        ("Launch-Grid", {"launch-grid"}, []),  # fix names, like every switch word, in any case
        ("all", set(FIXES), []),
        ("ALL", set(FIXES), []),
        ("All,Nope", set(FIXES), ["nope"]),
    ],
)
def test_disable_list(value, off, unknown):
    assert switches.disabled(FIXES, {"NPU_FIXES_DISABLE": value}) == (off, unknown, {})


@pytest.mark.parametrize(
    "value, off, old",
    [
        ("grid-launch", {"launch-grid"}, {"grid-launch": "launch-grid"}),
        ("Grid-Launch,rsplit-outer", {"launch-grid", "rsplit-outer"}, {"grid-launch": "launch-grid"}),
        ("grid-launch,all", set(FIXES), {"grid-launch": "launch-grid"}),
    ],
)
def test_disable_list_takes_old_names(value, off, old):
    renamed = {"grid-launch": "launch-grid"}
    assert switches.disabled(FIXES, {"NPU_FIXES_DISABLE": value}, renamed) == (off, [], old)


@pytest.mark.parametrize("value", ["0", "off", "OFF", " false ", "no"])
def test_master_off_words(value):
    assert switches.master_on({"NPU_FIXES": value}) is False


@pytest.mark.parametrize("value", ["1", "on", "True", "yes", ""])
def test_master_on_words(value):
    assert switches.master_on({"NPU_FIXES": value}) is True


@pytest.mark.parametrize("name, value, default", [
    ("NPU_FIXES", "maybe", True), ("NPU_FIXES", "00", True),
    ("NPU_FIXES_CE_CHECK", "2", False), ("NPU_FIXES_CE_FORCE_TRITON", "triton", None),
])
def test_other_values_warn_once_and_keep_the_default(caplog, name, value, default):
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        assert switches.flag(name, default, {name: value}) is default
        assert switches.flag(name, default, {name: value}) is default
    messages = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(messages) == 1 and repr(value) in messages[0] and "1/true/yes/on" in messages[0]


def test_master_off_by_word_imports_nothing_more():
    res = run_program("switches", "master_off_imports", env={"NPU_FIXES": "off"}, fresh=True)
    assert res == {"loaded": [], "states": ["disabled"]}


def test_switched_on_again_every_fix_is_decided_afresh():
    res = run_program("switches", "switched_on_again", env={"NPU_FIXES": "0"}, fresh=True)
    assert res == ["disabled", "pending"]


def test_unrecognised_master_value_warns_at_import():
    proc = run_python("import npu_fixes", env={"NPU_FIXES": "maybe"}, fresh=True)
    assert "NPU_FIXES='maybe' is not a switch value" in proc.stderr


def test_switching_off_at_run_time_keeps_status_truthful(genuine):
    """At f8802037a: NPU_FIXES=0 set after the repairs went in removes none of them (the
    switches act on what is decided next; undo() removes the repairs), so status() says
    ``applied`` while they are there, ``upgrade-needed`` while a guard is in force
    (nonlinearize-grid and int32-address-wrap there), ``guarded`` for the guard of a defect no
    torch_npu fixes (int64-past-int32, float64-as-float32, int64-arithmetic), and ``disabled`` for the rest; NPU_FIXES=1 and apply()
    keep the repairs without probing our own wrappers and decide the rest afresh; undo()
    leaves ``undone`` with the defect back."""
    res = run_program("switches", "switched_at_run_time", location=genuine("f8802037a"))
    applied = res["applied"]
    assert applied, res["import"]
    assert res["defective_at_import"] == dict.fromkeys(applied, False)
    guards = {n: state for n, state in res["import"].items() if state in ("upgrade-needed", "guarded")}
    assert set(guards) == {f.name for f in all_fixes() if not f.repairable and f.name in needed_at("f8802037a")}
    assert guards == {"nonlinearize-grid": "upgrade-needed", "int32-address-wrap": "upgrade-needed",
                      "int64-past-int32": "guarded", "float64-as-float32": "guarded",
                      "int64-arithmetic": "guarded"}, res["import"]
    assert all({f.name: f for f in all_fixes()}[n].install for n in guards)
    assert res["switched_off"] == {n: "applied" if n in applied else guards.get(n, "disabled") for n in res["import"]}
    assert res["applied_again"] == res["import"]
    assert res["defective_applied_again"] == dict.fromkeys(applied, False)
    assert {n: res["undone"][n] for n in applied} == dict.fromkeys(applied, "undone")
    assert res["defective_undone"] == dict.fromkeys(applied, True)
