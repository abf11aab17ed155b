"""Each row of the pinned-version matrix (``tests/matrix_rows.py``) and the row without
torch_npu: the audit, the repair and the status of the install, run in programs with that
torch_npu first on their path. Installed with --no-deps and no CANN, so torch is imported
with TORCH_DEVICE_BACKEND_AUTOLOAD=0 and the backend is host-loaded. In a row's own nox
session (``NPU_FIXES_MATRIX_ROW`` set, its torch_npu on ``PYTHONPATH``) only that row runs;
elsewhere every row does, each install built once."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from npu_fixes.fixes import all_fixes
from tests import genuine_states, matrix_rows
from tests.conftest import backend_targets, cli, run_program, run_python, wheel_path

#: The row of this nox session, its torch_npu installed on PYTHONPATH; unset elsewhere.
INSTALLED = os.environ.get("NPU_FIXES_MATRIX_ROW")

BACKEND = [f for f in all_fixes() if f.module.startswith("torch_npu.")]
#: The guards whose defect only an upgrade removes: ``npu-fixes audit`` exits 3 where one is needed.
UPGRADE_GUARDS = {f.name for f in BACKEND if f.present_state.value == "upgrade-needed"}


@dataclass(frozen=True)
class Row:
    """A matrix row: ``name`` (None: torch_npu not installed) and the folders its programs
    get first on their path (none where the session's own ``PYTHONPATH`` holds the install)."""

    name: str | None
    path: tuple[Path, ...] = ()

    @property
    def kind(self) -> str:
        return (self.name or "").partition(":")[0]

    @property
    def label(self) -> str:
        return (self.name or "").partition(":")[2]


@pytest.fixture(scope="module", params=[INSTALLED] if INSTALLED else [None, *matrix_rows.rows()],
                ids=lambda name: name or "none")
def row(request, tmp_path_factory) -> Row:
    if INSTALLED or request.param is None:
        return Row(request.param)
    site = tmp_path_factory.mktemp(request.param.replace(":", "-"))
    return Row(request.param, (matrix_rows.install(request.param, wheel_path, site),))


def expected_needed(row: Row) -> frozenset[str] | None:
    """The backend defects ``row`` has; None where they are not known in advance (a source
    tree of the user's own)."""
    if row.kind == "wheel":  # the defects no published state has fixed
        return genuine_states.UNFIXED
    if row.kind == "prefix":  # a published wheel with one defect edited back in
        return frozenset({row.label}) | genuine_states.UNFIXED
    return genuine_states.needed_at(row.label) if row.label in genuine_states.DEFECTS else None


def expected_absent(row: Row) -> frozenset[str]:
    """The fixes whose target code ``row`` lacks (a tree of the user's own: unknown, empty; a
    prefix copy: its wheel's)."""
    if row.kind == "prefix":
        return genuine_states.absent_at("2.13.0")
    return genuine_states.absent_at(row.label) if row.kind in ("genuine", "wheel") else frozenset()


def test_audit_of_the_installed_torch_npu(row):
    proc = cli("audit", "--json", path=row.path)
    if row.name is None:
        assert proc.returncode == 2 and "no torch_npu is installed" in proc.stderr
        return
    report = json.loads(proc.stdout)
    assert report["torch_npu"]["version"] == (row.label if row.kind == "wheel" else "2.13.0")
    columns = {f["name"]: (f["before"], f["after"]) for f in report["fixes"]}
    if row.name == "wheel:2.12.0.post3":
        assert proc.returncode == 0 and set(columns.values()) == {("absent", "absent")}
        return
    needed = expected_needed(row)
    if needed is None:  # unknown defects: each is not needed, applied, or guarded
        assert set(columns.values()) <= {("not-needed", "not-needed"), ("needed", "applied"),
                                         ("needed", "upgrade-needed"), ("needed", "guarded"),
                                         ("absent", "absent")}, columns
        needed = frozenset(n for n, (before, _) in columns.items() if before == "needed")
        absent = frozenset(n for n, (before, _) in columns.items() if before == "absent")
    else:
        absent = expected_absent(row)
    assert columns == {f.name: ("absent", "absent") if f.name in absent else ("not-needed", "not-needed") if f.name not in needed
                       else ("needed", f.present_state.value) for f in BACKEND}
    assert proc.returncode == (3 if needed & UPGRADE_GUARDS else 0), proc.stderr


def test_installed_backend_is_repaired_exactly_where_needed(row):
    if row.name is None:
        run_python("import importlib.util; assert importlib.util.find_spec('torch_npu') is None")
        return
    res = run_program("matrix", "repaired", path=row.path, targets=backend_targets())
    if row.name == "wheel:2.12.0.post3":
        assert set(res["states"].values()) == {"pending"} and all(res["same"].values())
        return
    needed, absent = expected_needed(row), expected_absent(row)
    if needed is None:
        needed = frozenset(n for n, s in res["states"].items() if s in ("applied", "upgrade-needed", "guarded"))
        absent = frozenset(n for n, s in res["states"].items() if s == "absent")
        assert set(res["states"].values()) <= {"applied", "not-needed", "upgrade-needed", "guarded", "absent"}, res
    assert res["states"] == {f.name: genuine_states.expected_state(f.name, needed, absent) for f in BACKEND}
    assert res["same"] == genuine_states.untouched(needed)


def test_status_reports_the_install(row):
    proc = cli("status", "--json", path=row.path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    if row.name is None:
        assert any("torch_npu: not installed" in line for line in data["imports"])
    else:  # no CANN here: the real import fails and is reported, never a traceback
        assert any(line.startswith("torch_npu: import failed") for line in data["imports"]), data
    assert {f["state"] for f in data["fixes"]} == {"absent"}  # transformer_engine: not installed

