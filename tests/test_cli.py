"""`npu-fixes audit` and `npu-fixes status` as a user runs them."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch

from npu_fixes.fixes import all_fixes
from tests.conftest import FIXED_UPSTREAM, cli, run_python, wheel_path
from tests.genuine_states import FIVE, UNFIXED, absent_at

BACKEND = [f for f in all_fixes() if f.module.startswith("torch_npu.")]
BACKEND_FIXES = [f.name for f in BACKEND]
#: What audit says of each backend fix on a published wheel (both have the same fixes' code):
#: upstream's fixes, except the defects no published state has fixed, which are repaired or guarded.
PUBLISHED = {f.name: ("needed", f.present_state.value) if f.name in UNFIXED
             else ("absent", "absent") if f.name in absent_at("2.13.0") else ("not-needed", "not-needed")
             for f in BACKEND}


def columns(report: dict, leave_out=()) -> dict[str, tuple[str, str]]:
    """Fix name -> (before, after) of an audit report, without the fixes ``leave_out``."""
    return {f["name"]: (f["before"], f["after"]) for f in report["fixes"] if f["name"] not in leave_out}


def published(leave_out=()) -> dict[str, tuple[str, str]]:
    return {name: cells for name, cells in PUBLISHED.items() if name not in leave_out}


def audit_json(location) -> tuple[int, dict]:
    proc = cli("audit", "--torch-npu", str(location), "--json")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_audit_fixed_wheels(version):
    code, report = audit_json(wheel_path(version))
    assert code == 0
    assert report["torch_npu"]["version"] == version
    assert [f["name"] for f in report["fixes"]] == BACKEND_FIXES  # audit: torch_npu fixes only
    assert columns(report) == PUBLISHED, report


def test_audit_source_tree(tmp_path):
    """A source tree (no generated version.py): the probes decide, as for the wheel."""
    with zipfile.ZipFile(wheel_path("2.14.0")) as zf:
        for name in zf.namelist():
            if name.startswith("torch_npu/") and name.endswith(".py") and name != "torch_npu/version.py":
                zf.extract(name, tmp_path)
    code, report = audit_json(tmp_path)
    assert code == 0
    assert report["torch_npu"] == {"version": None, "path": str(tmp_path.resolve())}
    assert columns(report) == PUBLISHED


def test_audit_wheel_without_backend():
    code, report = audit_json(wheel_path("2.12.0.post3"))
    assert code == 0
    assert all(f["before"] == f["after"] == "absent" for f in report["fixes"])
    assert "no triton_experimental" in report["fixes"][0]["detail"]
    assert report["summary"] == (f"{len(BACKEND)} absent: this torch_npu has no triton_experimental backend, "
                                 "so none of these defects")
    assert report["versions"] == {"torch": torch.__version__, "torch-npu": "2.12.0.post3", "triton": "3.6.0",
                                  "triton-ascend": None}


def test_audit_prefix_copy_all_five(prefix_copy):
    code, report = audit_json(prefix_copy("all"))
    assert code == 0, report
    five = [f for f in report["fixes"] if f["name"] in FIVE]
    assert [(f["before"], f["after"]) for f in five] == [("needed", "applied")] * 5
    assert all("; after repair: " in f["detail"] for f in five)  # what was wrong, then
    assert columns(report, FIVE) == published(FIVE)  # the copy keeps the wheel's later fixes


@pytest.mark.parametrize("defect", FIVE)
def test_audit_prefix_copy_each_defect_alone(prefix_copy, defect):
    code, report = audit_json(prefix_copy(defect))
    assert code == 0
    states = columns(report)
    assert states.pop(defect) == ("needed", "applied")
    assert states == published({defect})


def test_audit_failed_repair_exits_1(prefix_copy):
    """A repair that does not take (here: the gate's install is sabotaged) is reported."""
    location = prefix_copy("rng-capture-gate")
    proc = cli("audit", "--torch-npu", str(location), setup="cli:sabotaged_gate")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert any(line.split()[:3] == ["rng-capture-gate", "needed", "failed"] for line in proc.stdout.splitlines())


def test_audit_table_output(prefix_copy):
    proc = cli("audit", "--torch-npu", str(prefix_copy("launch-grid")))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("torch_npu 2.13.0 at ")
    assert lines[1].startswith("versions: torch 2.13.0") and "torch-npu 2.13.0, triton 3.6.0" in lines[1]
    assert lines[2].split()[:3] == ["fix", "before", "after"]
    assert any(line.split()[:3] == ["launch-grid", "needed", "applied"] for line in lines)
    assert lines[-1].startswith("summary: ") and "applied" in lines[-1] and "left broken" not in lines[-1]


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


def _tree(version, dest):
    """The Python files of a pinned wheel's torch_npu, extracted (no __pycache__)."""
    with zipfile.ZipFile(wheel_path(version)) as zf:
        for name in zf.namelist():
            if name.startswith("torch_npu/") and name.endswith(".py"):
                zf.extract(name, dest)
    return dest


def _corrupt_wheel(path, compression):
    """A wheel whose directory is fine but whose torch_npu/__init__.py data is not."""
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr("torch_npu/__init__.py", "x = 1\n" * 100)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("torch_npu/__init__.py")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start:start + 4] = b"\xff\xff\xff\xff"  # deflate: invalid block type; stored: bad CRC
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED], ids=["zlib", "crc"])
def test_audit_corrupt_wheel_exits_2(tmp_path, compression):
    wheel = _corrupt_wheel(tmp_path / "torch_npu-2.14.0-cp311-cp311-linux_x86_64.whl", compression)
    proc = cli("audit", "--torch-npu", str(wheel))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"npu-fixes audit: {wheel}: corrupt wheel")
    assert "torch_npu/__init__.py" in lines[0]


def test_audit_symlink_loop_exits_2(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    proc = cli("audit", "--torch-npu", str(loop))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"npu-fixes audit: {loop}: symbolic link loop"


#: How the audited code ends the process: the code written, what the report then says.
EXITS = {"SystemExit": ("raise SystemExit(7)\n", "SystemExit: 7"),
         "os._exit": ("import os\nos._exit(7)\n", "AuditedCodeExited: os._exit(7)")}


@pytest.mark.parametrize("how", EXITS)
@pytest.mark.parametrize("where", ["codegen/triton.py", "version.py"])
def test_audit_code_ending_the_process_is_reported(tmp_path, where, how):
    """SystemExit, and os._exit (which would end the audit with that status and no word),
    in the audited tree: an error of that module (or of version.py), exit 1."""
    code_written, said = EXITS[how]
    root = _tree("2.14.0", tmp_path)
    target = root / "torch_npu" / ("version.py" if where == "version.py" else
                                   f"_inductor/triton_experimental/{where}")
    target.write_text(code_written)
    code, report = audit_json(root)
    assert code == 1, report
    rows = {f["name"]: f for f in report["fixes"]}
    if where == "version.py":
        assert len(report["errors"]) == 1, report["errors"]
        assert report["errors"][0].startswith("torch_npu/version.py raised ") and said in report["errors"][0]
        assert report["torch_npu"]["version"] is None
        assert columns(report) == PUBLISHED
    else:  # the fixes of codegen.triton (and of modules importing it) cannot be examined
        for fix in BACKEND:
            if fix.module.endswith(".codegen.triton"):
                assert rows[fix.name]["before"] == "error", rows[fix.name]
        errors = {n: f for n, f in rows.items() if f["before"] == "error"}
        assert all(said in f["detail"] for f in errors.values()), errors
        assert columns(report, errors) == published(errors)
    proc = cli("audit", "--torch-npu", str(root))  # the table says so too
    assert proc.returncode == 1 and said in proc.stdout


def test_audit_of_an_unknown_layout_is_an_error(tmp_path):
    """The backend package is there but none of the modules the fixes act on (moved in a
    future layout): not a clean audit of `absent` rows but an error, exit 1."""
    root = _tree("2.14.0", tmp_path)
    backend = root / "torch_npu" / "_inductor" / "triton_experimental"
    for module in ("npu_triton_heuristics.py", "lowering.py", "overrides.py", "codegen/triton.py",
                   "npu_triton_helpers.py"):
        (backend / module).rename(backend / module.replace(".py", "_moved.py"))
    code, report = audit_json(root)
    assert code == 1, report
    assert len(report["errors"]) == 1 and report["errors"][0].startswith("unknown layout:"), report
    proc = cli("audit", "--torch-npu", str(root))
    assert proc.returncode == 1 and "unknown layout" in proc.stdout


def test_audit_probe_raising_systemexit_is_an_error_row(tmp_path):
    proc = cli("audit", "--torch-npu", str(_tree("2.14.0", tmp_path)), "--json", setup="cli:exiting_probe")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {f["name"]: f for f in json.loads(proc.stdout)["fixes"]}
    assert rows["launch-grid"]["before"] == "error"
    assert rows["launch-grid"]["detail"] == "probe raised SystemExit: 7"


def test_audit_writes_no_pycache_into_the_audited_tree(tmp_path):
    root = _tree("2.14.0", tmp_path)
    proc = cli("audit", "--torch-npu", str(root), env={"PYTHONDONTWRITEBYTECODE": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("__pycache__")) == []
