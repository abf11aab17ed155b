"""`npu-fixes audit` and `npu-fixes status` as a user runs them."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.conftest import FIXED_UPSTREAM, cli, run_python, wheel_path

BACKEND_FIXES = ["rsplit-outer", "dualview-fold", "launch-grid", "boundary-downcast", "rng-capture-gate"]


def audit_json(location) -> tuple[int, dict]:
    proc = cli("audit", "--torch-npu", str(location), "--json")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_audit_fixed_wheels(version):
    code, report = audit_json(wheel_path(version))
    assert code == 0
    assert report["torch_npu"]["version"] == version
    assert [f["name"] for f in report["fixes"]] == BACKEND_FIXES  # audit: torch_npu fixes only
    assert all(f["before"] == "fixed-upstream" and f["after"] == "-" for f in report["fixes"]), report


def test_audit_source_tree(tmp_path):
    """A source tree (no generated version.py): the probes decide, nothing to repair."""
    with zipfile.ZipFile(wheel_path("2.14.0")) as zf:
        for name in zf.namelist():
            if name.startswith("torch_npu/") and name.endswith(".py") and name != "torch_npu/version.py":
                zf.extract(name, tmp_path)
    code, report = audit_json(tmp_path)
    assert code == 0
    assert report["torch_npu"] == {"version": None, "path": str(tmp_path.resolve())}
    assert {(f["before"], f["after"]) for f in report["fixes"]} == {("fixed-upstream", "-")}


def test_audit_wheel_without_backend():
    code, report = audit_json(wheel_path("2.12.0.post3"))
    assert code == 0
    assert all(f["before"] == "absent" and f["after"] == "-" for f in report["fixes"])
    assert "no triton_experimental" in report["fixes"][0]["detail"]


def test_audit_prefix_copy_all_five(prefix_copy):
    code, report = audit_json(prefix_copy("all"))
    assert code == 0, report
    assert [(f["before"], f["after"]) for f in report["fixes"]] == [("needed", "verified")] * 5
    assert all("; after repair: " in f["detail"] for f in report["fixes"])  # what was wrong, then


@pytest.mark.parametrize("defect", BACKEND_FIXES)
def test_audit_prefix_copy_each_defect_alone(prefix_copy, defect):
    code, report = audit_json(prefix_copy(defect))
    assert code == 0
    states = {f["name"]: (f["before"], f["after"]) for f in report["fixes"]}
    assert states.pop(defect) == ("needed", "verified")
    assert set(states.values()) == {("fixed-upstream", "-")}


def test_audit_still_broken_exits_1(prefix_copy):
    """A repair that does not take (here: the gate's install is sabotaged) is reported."""
    location = prefix_copy("rng-capture-gate")
    proc = cli("audit", "--torch-npu", str(location), prelude="""
from npu_fixes.fixes import rng_capture_gate
rng_capture_gate.FIX.install.__globals__["gate_table"] = lambda *a, **k: []
rng_capture_gate.FIX.install.__globals__["gated"] = lambda op, low: low
""")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "still-broken" in proc.stdout


def test_audit_table_output(prefix_copy):
    proc = cli("audit", "--torch-npu", str(prefix_copy("launch-grid")))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("torch_npu 2.13.0 at ")
    assert lines[1].split()[:3] == ["fix", "before", "after"]
    assert any(line.split()[:3] == ["launch-grid", "needed", "verified"] for line in lines)


@pytest.mark.parametrize("kind", ["plain_dir", "missing", "text_file"])
def test_audit_bad_path_exits_2(tmp_path, kind):
    path = {"plain_dir": tmp_path, "missing": tmp_path / "missing", "text_file": tmp_path / "a.txt"}[kind]
    if kind == "text_file":
        path.write_text("x")
    proc = cli("audit", "--torch-npu", str(path))
    assert proc.returncode == 2
    assert "npu-fixes audit:" in proc.stderr and str(path.name) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_audit_without_installed_torch_npu_exits_2():
    proc = cli("audit")
    assert proc.returncode == 2 and "no torch_npu is installed" in proc.stderr


def test_bad_usage_exits_2():
    proc = cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_status_without_torch_npu():
    proc = cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [f["name"] for f in data["fixes"]] == [*BACKEND_FIXES, "te-parallel-ce"]
    assert any("torch_npu: not installed" in line for line in data["imports"])
    assert any("transformer_engine.pytorch: not installed" in line for line in data["imports"])
    assert {f["state"] for f in data["fixes"]} == {"absent"}


def test_status_reports_broken_torch_npu(tmp_path):
    broken = tmp_path / "torch_npu"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise OSError('libhccl.so: cannot open shared object file')\n")
    proc = cli("status", path=[tmp_path])
    assert proc.returncode == 0
    assert "libhccl.so" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_status_with_switches_off():
    proc = cli("status", "--json", env={"NPU_FIXES": "0"})
    assert {f["state"] for f in json.loads(proc.stdout)["fixes"]} == {"disabled"}


def test_python_dash_m_entry_point():
    proc = run_python("import runpy, sys; sys.argv=['npu_fixes', '--help']; runpy.run_module('npu_fixes', run_name='__main__')",
                      check=False)
    assert proc.returncode == 0 and "audit" in proc.stdout
