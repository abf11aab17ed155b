"""The installed torch_npu of this matrix row (scripts/test.sh sets NPU_FIXES_MATRIX_TORCH_NPU;
unset means the row without torch_npu). Installed with --no-deps and no CANN, so torch is
imported with TORCH_DEVICE_BACKEND_AUTOLOAD=0 and the backend is host-loaded."""

from __future__ import annotations

import json
import os

from tests.conftest import STANDALONE_HOST, backend_targets_code, cli, last_json, run_python

ROW = os.environ.get("NPU_FIXES_MATRIX_TORCH_NPU")  # None: torch_npu not installed
EXPECTED_BEFORE = {None: None, "2.12.0.post3": "absent", "2.13.0": "fixed-upstream", "2.14.0": "fixed-upstream"}


def test_audit_of_the_installed_torch_npu():
    proc = cli("audit", "--json")
    if ROW is None:
        assert proc.returncode == 2 and "no torch_npu is installed" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["torch_npu"]["version"] == ROW
    assert {(f["before"], f["after"]) for f in report["fixes"]} == {(EXPECTED_BEFORE[ROW], "-")}


def test_installed_backend_is_left_identical():
    if ROW is None:
        run_python("import importlib.util; assert importlib.util.find_spec('torch_npu') is None")
        return
    res = last_json(run_python("import sys\n" + STANDALONE_HOST + backend_targets_code() + """
import json
loaded = host.load(host.installed_location())
before = backend_targets()  # npu_fixes not imported yet: the install as it is
import npu_fixes
npu_fixes.apply()
after = backend_targets()
print(json.dumps({"version": loaded.version,
                  "states": sorted({r.state.value for r in npu_fixes.status() if r.name in after}),
                  "identical": all(after[name] is obj for name, obj in before.items()),
                  "wrapped": len(npu_fixes.registry().patcher)}))
"""))
    assert res["version"] == ROW
    assert res["wrapped"] == 0 and res["identical"]
    assert res["states"] == (["pending"] if ROW == "2.12.0.post3" else ["not-needed"])


def test_status_reports_the_install():
    proc = cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    if ROW is None:
        assert any("torch_npu: not installed" in line for line in data["imports"])
    else:  # no CANN here: the real import fails and is reported, never a traceback
        assert any(line.startswith("torch_npu: import failed") for line in data["imports"]), data
    assert {f["state"] for f in data["fixes"]} == {"absent"}  # transformer_engine: not installed
