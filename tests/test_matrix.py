"""The installed torch_npu of this matrix row (``noxfile.py`` sets NPU_FIXES_MATRIX_ROW:
``wheel:<version>``, ``genuine:<commit>``, ``genuine:tree``, ``prefix:<fix>``; unset means
the row without torch_npu). Installed with --no-deps and no CANN, so torch is imported with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 and the backend is host-loaded."""

from __future__ import annotations

import json
import os

from tests import genuine_states
from tests.conftest import STANDALONE_HOST, backend_targets_code, cli, last_json, run_python

ROW = os.environ.get("NPU_FIXES_MATRIX_ROW")  # None: torch_npu not installed
KIND, _, NAME = (ROW or "").partition(":")


def expected_needed() -> frozenset[str] | None:
    """The five fixes' defects this row has; None where they are not known in advance
    (a source tree of the user's own)."""
    if KIND == "wheel":
        return frozenset()
    if KIND == "prefix":
        return frozenset({NAME})
    return genuine_states.DEFECTS.get(NAME)


def test_audit_of_the_installed_torch_npu():
    proc = cli("audit", "--json")
    if ROW is None:
        assert proc.returncode == 2 and "no torch_npu is installed" in proc.stderr
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["torch_npu"]["version"] == (NAME if KIND == "wheel" else "2.13.0")
    columns = {f["name"]: (f["before"], f["after"]) for f in report["fixes"]}
    if ROW == "wheel:2.12.0.post3":
        assert set(columns.values()) == {("absent", "-")}
        return
    needed = expected_needed()
    if needed is None:  # unknown defects: each is either fixed or repaired and verified
        assert set(columns.values()) <= {("fixed-upstream", "-"), ("needed", "verified")}, columns
        return
    assert columns == {n: ("needed", "verified") if n in needed else ("fixed-upstream", "-")
                       for n in genuine_states.FIVE}


def test_installed_backend_is_repaired_exactly_where_needed():
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
                  "states": {r.name: r.state.value for r in npu_fixes.status() if r.name in after},
                  "same": {name: obj is before[name] for name, obj in after.items()}}))
"""))
    if ROW == "wheel:2.12.0.post3":
        assert set(res["states"].values()) == {"pending"} and all(res["same"].values())
        return
    needed = expected_needed()
    if needed is None:
        needed = frozenset(n for n, s in res["states"].items() if s == "applied")
        assert set(res["states"].values()) <= {"applied", "not-needed"}, res
    assert res["states"] == {n: "applied" if n in needed else "not-needed" for n in genuine_states.FIVE}
    assert res["same"] == {n: n not in needed for n in genuine_states.FIVE}


def test_status_reports_the_install():
    proc = cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    if ROW is None:
        assert any("torch_npu: not installed" in line for line in data["imports"])
    else:  # no CANN here: the real import fails and is reported, never a traceback
        assert any(line.startswith("torch_npu: import failed") for line in data["imports"]), data
    assert {f["state"] for f in data["fixes"]} == {"absent"}  # transformer_engine: not installed
