"""What a real install meets: ``npu-fixes audit`` says what a process with that torch,
torch_npu and Triton does, on every torch a user can have (a patch release inside the window,
one past it) and with or without each optional package; a missing prerequisite is one line
and exit 2. Each install is a venv of its own (``tests/install_variants.py``)."""

from __future__ import annotations

import collections
import json

import pytest

from npu_fixes.fixes import all_fixes
from tests import install_variants, matrix_rows
from tests.conftest import backend_targets, run_program, wheel_path

BACKEND = [f.name for f in all_fixes() if f.module.startswith("torch_npu.")]
HANDLED = {"applied", "upgrade-needed", "guarded"}
#: Variant -> how its venv differs from the test venv, and the environment it runs with.
VARIANTS = {
    "as-tested": ({}, {}),
    "torch-2.14.1": ({"torch_version": "2.14.1"}, {}),
    "torch-2.15.0": ({"torch_version": "2.15.0"}, {}),
    "without-numpy": ({"leave_out": ("numpy",)}, {}),
    "without-expecttest": ({"leave_out": ("expecttest",)}, {}),
    "without-transformers": ({"leave_out": ("transformers",)}, {}),
    "without-megatron-core": ({"leave_out": ("megatron-core",)}, {}),
    "disabled": ({}, {"NPU_FIXES_DISABLE": "pad-lane-nonfinite,int64-past-int32"}),
}
#: The variants whose answers must be the test venv's: packages npu_fixes does not need at run time.
SAME_ANSWERS = ("torch-2.14.1", "without-numpy", "without-expecttest", "without-transformers",
                "without-megatron-core")
#: The rows audited in every variant, and the genuine state (the most defects) in those that
#: change what the decisions read.
CASES = [(row, variant) for variant in VARIANTS for row in ("wheel:2.14.0", "genuine:8bfbb9ed1")
         if row.startswith("wheel") or variant in ("as-tested", "torch-2.15.0", "without-numpy")]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    made: dict[str, str] = {}

    def make(variant: str) -> str:
        if variant not in made:
            made[variant] = str(install_variants.make_venv(tmp_path_factory.mktemp(variant), **VARIANTS[variant][0]))
        return made[variant]

    return make


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    made = {}

    def install(row: str):
        if row not in made:
            made[row] = matrix_rows.install(row, wheel_path, tmp_path_factory.mktemp(row.replace(":", "-")))
        return made[row]

    return install


@pytest.fixture(scope="module")
def outcome(venvs, sites):
    """(row, variant) -> the audit's exit status and report, and the run's states: a process of
    that venv host-loading the row's torch_npu with npu_fixes armed."""
    done: dict[tuple[str, str], tuple[int, dict, dict]] = {}

    def get(row: str, variant: str) -> tuple[int, dict, dict]:
        if (row, variant) not in done:
            python, env, site = venvs(variant), VARIANTS[variant][1], sites(row)
            proc = run_program("cli", "run", python=python, env=env, check=False,
                               argv=["audit", "--torch-npu", str(site), "--json"])
            assert proc.returncode in (0, 1, 3), proc.stderr
            run = run_program("matrix", "repaired", python=python, env=env, path=[site],
                              targets=backend_targets())
            done[row, variant] = proc.returncode, json.loads(proc.stdout), run["states"]
        return done[row, variant]

    return get


def columns(report: dict) -> dict[str, tuple[str, str]]:
    return {f["name"]: (f["before"], f["after"]) for f in report["fixes"]}


@pytest.mark.parametrize(("row", "variant"), CASES)
def test_audit_says_what_the_run_does(outcome, row, variant):
    """Fix by fix, the audit's ``after`` is the state a process of that install ends with."""
    code, report, states = outcome(row, variant)
    assert {f["name"]: f["after"] for f in report["fixes"]} == {name: states[name] for name in BACKEND}
    broken = [f["name"] for f in report["fixes"] if f["before"] == "needed" and f["after"] not in HANDLED]
    assert (code == 1) == bool(broken), report["summary"]
    counts = collections.Counter(f["after"] for f in report["fixes"])
    assert all(f"{n} {state}" in report["summary"].partition(":")[0] for state, n in counts.items()), report["summary"]


@pytest.mark.parametrize(("row", "variant"), [c for c in CASES if c[1] in SAME_ANSWERS])
def test_answers_do_not_depend_on_optional_packages(outcome, row, variant):
    """Without numpy (and each other optional package), or with a patch release of torch,
    every fix is decided as in the test venv: the probes see the code as built."""
    code, report, _ = outcome(row, variant)
    base_code, base, _ = outcome(row, "as-tested")
    assert (code, columns(report)) == (base_code, columns(base))
    assert not report["errors"]


@pytest.mark.parametrize("row", ["wheel:2.14.0", "genuine:8bfbb9ed1"])
def test_past_the_window_nothing_is_applied_and_the_audit_says_so(outcome, row):
    code, report, states = outcome(row, "torch-2.15.0")
    assert set(states.values()) == {"out-of-window"}
    before = {name: before for name, (before, _) in columns(outcome(row, "as-tested")[1]).items()}
    assert columns(report) == {name: (before[name], "out-of-window") for name in BACKEND}
    assert code == 1 and "left broken here" in report["summary"]
    assert report["versions"]["torch"] == "2.15.0"
    assert any(n.startswith("torch 2.15.0 is outside the versions npu_fixes was tested with") for n in report["notes"])


def test_a_torch_npu_past_the_window_is_left_alone_and_the_audit_says_so(sites, tmp_path):
    """A torch_npu whose version string says 2.15: the run applies nothing, the audit agrees."""
    site = install_variants.torch_npu_as(sites("wheel:2.14.0"), tmp_path / "site", "2.15.0")
    run = run_program("matrix", "repaired", path=[site], targets=backend_targets())
    proc = run_program("cli", "run", check=False, argv=["audit", "--torch-npu", str(site), "--json"])
    report = json.loads(proc.stdout)
    assert set(run["states"].values()) == {"out-of-window"} and run["version"] == "2.15.0"
    assert {f["after"] for f in report["fixes"]} == {"out-of-window"} and proc.returncode == 1
    assert report["notes"][0].startswith("torch_npu 2.15.0 is outside the versions npu_fixes was tested with")


def test_an_undeclared_torch_is_named(outcome, venvs, sites):
    code, report, _ = outcome("wheel:2.14.0", "torch-2.14.1")
    assert code == 0 and report["versions"]["torch"] == "2.14.1"
    assert report["notes"] == ["torch 2.14.1 is not the torch this torch_npu declares (torch==2.14.0.*): "
                               "an untested pairing"]
    proc = run_program("cli", "run", python=venvs("torch-2.14.1"), path=[sites("wheel:2.14.0")], check=False,
                       argv=["status", "--json"])
    status = json.loads(proc.stdout)
    assert status["versions"]["torch"] == "2.14.1" and status["versions"]["torch-npu"] == "2.14.0"
    assert status["notes"] == report["notes"]


def test_the_run_warns_past_the_window(venvs, sites):
    proc = run_program("matrix", "repaired", python=venvs("torch-2.15.0"), path=[sites("wheel:2.14.0")],
                       check=False, targets=backend_targets())
    warnings = [line for line in proc.stderr.splitlines() if "outside the versions" in line]
    assert len(warnings) == 1 and "torch 2.15.0" in warnings[0], proc.stderr


@pytest.mark.parametrize(("leave_out", "argv", "says"), [
    (("torch",), ["audit"], "audit needs torch, which is not installed here: install torch (2.13 or 2.14)"),
    (("triton",), ["audit"], "audit needs triton, which is not installed here"),
    (("expecttest",), ["sweep", "--corpus", "ci"], "sweep needs expecttest, which is not installed here"),
    (("torch", "numpy"), ["sweep"], "sweep needs torch, numpy, which are not installed here"),
    (("torch",), ["accuracy"], "accuracy needs torch, which is not installed here"),
    (("numpy",), ["accuracy", "--interpret"], "accuracy --interpret needs numpy, which is not installed here"),
])
def test_a_missing_prerequisite_is_one_line_and_exit_2(tmp_path, leave_out, argv, says):
    python = install_variants.make_venv(tmp_path / "venv", leave_out=leave_out)
    proc = run_program("cli", "run", python=str(python), check=False, argv=argv)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(lines) == 1 and lines[0].startswith(f"npu-fixes {argv[0]}: {says}"), proc.stderr


def test_status_needs_nothing_more(tmp_path):
    """Without torch, status still answers (every fix absent) and says why."""
    python = install_variants.make_venv(tmp_path / "venv", leave_out=("torch",))
    proc = run_program("cli", "run", python=str(python), check=False, argv=["status", "--json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert "torch: not installed" in data["imports"] and data["versions"]["torch"] is None
