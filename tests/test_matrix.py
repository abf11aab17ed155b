"""The installed torch_npu of this matrix row (``noxfile.py`` sets NPU_FIXES_MATRIX_ROW:
``wheel:<version>``, ``genuine:<commit>``, ``genuine:tree``, ``prefix:<fix>``; unset means
the row without torch_npu). Installed with --no-deps and no CANN, so torch is imported with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 and the backend is host-loaded."""

from __future__ import annotations

import json
import os

from npu_fixes.fixes import all_fixes
from tests import genuine_states
from tests.conftest import backend_targets, cli, run_program, run_python

ROW = os.environ.get("NPU_FIXES_MATRIX_ROW")  # None: torch_npu not installed
KIND, _, NAME = (ROW or "").partition(":")


BACKEND = [f for f in all_fixes() if f.module.startswith("torch_npu.")]
GUARDS = {f.name for f in BACKEND if not f.repairable}


def expected_needed() -> frozenset[str] | None:
    """The backend defects this row has; None where they are not known in advance (a source
    tree of the user's own)."""
    if KIND == "wheel":  # the defects no published state has fixed
        return genuine_states.UNFIXED
    if KIND == "prefix":  # a published wheel with one defect edited back in
        return frozenset({NAME}) | genuine_states.UNFIXED
    return genuine_states.needed_at(NAME) if NAME in genuine_states.DEFECTS else None


def expected_absent() -> frozenset[str]:
    """The fixes whose target code this row lacks (a tree of the user's own: unknown, empty)."""
    return genuine_states.absent_at(NAME) if KIND == "genuine" else frozenset()


def test_audit_of_the_installed_torch_npu():
    proc = cli("audit", "--json")
    if ROW is None:
        assert proc.returncode == 2 and "no torch_npu is installed" in proc.stderr
        return
    report = json.loads(proc.stdout)
    assert report["torch_npu"]["version"] == (NAME if KIND == "wheel" else "2.13.0")
    columns = {f["name"]: (f["before"], f["after"]) for f in report["fixes"]}
    if ROW == "wheel:2.12.0.post3":
        assert proc.returncode == 0 and set(columns.values()) == {("absent", "-")}
        return
    needed = expected_needed()
    if needed is None:  # unknown defects: each is fixed, repaired and verified, or guarded
        assert set(columns.values()) <= {("fixed-upstream", "-"), ("needed", "verified"),
                                         ("needed", "upgrade-needed"), ("absent", "-")}, columns
        needed = frozenset(n for n, (before, _) in columns.items() if before == "needed")
        absent = frozenset(n for n, (before, _) in columns.items() if before == "absent")
    else:
        absent = expected_absent()
    assert columns == {f.name: ("absent", "-") if f.name in absent else ("fixed-upstream", "-") if f.name not in needed
                       else ("needed", "upgrade-needed" if f.name in GUARDS else "verified") for f in BACKEND}
    assert proc.returncode == (3 if needed & GUARDS else 0), proc.stderr


def test_installed_backend_is_repaired_exactly_where_needed():
    if ROW is None:
        run_python("import importlib.util; assert importlib.util.find_spec('torch_npu') is None")
        return
    res = run_program("matrix", "repaired", targets=backend_targets())
    if ROW == "wheel:2.12.0.post3":
        assert set(res["states"].values()) == {"pending"} and all(res["same"].values())
        return
    needed, absent = expected_needed(), expected_absent()
    if needed is None:
        needed = frozenset(n for n, s in res["states"].items() if s in ("applied", "upgrade-needed"))
        absent = frozenset(n for n, s in res["states"].items() if s == "absent")
        assert set(res["states"].values()) <= {"applied", "not-needed", "upgrade-needed", "absent"}, res
    assert res["states"] == {f.name: genuine_states.expected_state(f.name, needed, absent) for f in BACKEND}
    assert res["same"] == genuine_states.untouched(needed)


def test_status_reports_the_install():
    proc = cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    if ROW is None:
        assert any("torch_npu: not installed" in line for line in data["imports"])
    else:  # no CANN here: the real import fails and is reported, never a traceback
        assert any(line.startswith("torch_npu: import failed") for line in data["imports"]), data
    assert {f["state"] for f in data["fixes"]} == {"absent"}  # transformer_engine: not installed


def test_readme_table_of_every_fix_at_every_state():
    """README's "Every fix at every state" says, per fix and state, what the presence table
    (tests/genuine_states.py) and each fix's kind make the audit say; every backend fix
    beyond the five has its row."""
    readme = (genuine_states.REPO / "README.md").read_text().split("### Every fix at every state")[1]
    header, _, *rows = [line for line in readme.split("\n\n")[2].splitlines() if line.startswith("|")]
    columns = [c.strip() for c in header.strip("|").split("|")][1:]
    assert columns == [*genuine_states.COMMITS, "wheel 2.13.0", "wheel 2.14.0"]
    table = {row.split("`")[1]: [c.strip() for c in row.strip("|").split("|")][1:] for row in rows}
    assert set(table) == {f.name for f in BACKEND} - set(genuine_states.FIVE)
    for name, cells in table.items():
        for state, cell in zip(columns, cells, strict=True):
            if state.startswith("wheel"):
                want = "repaired" if name in genuine_states.UNFIXED else "fixed"
            elif name in genuine_states.absent_at(state):
                want = "absent"
            elif name in genuine_states.needed_at(state):
                want = "upgrade-needed" if name in GUARDS else "repaired"
            else:
                want = "fixed"
            assert cell == want, (name, state)
