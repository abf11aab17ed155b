"""min2-propagate-nan: the rule on helper sources, then min reductions compiled through
every genuine state and the fixed wheel, kernels run in Triton's interpreter with the
backend's launcher grid, and the helper's Triton IR built by the host frontend."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from npu_fixes.fixes.min2_propagate_nan import min_keywords, min_takes_propagate_nan, reduces_wrongly
from npu_fixes.shim import autoload as _autoload
from tests.conftest import run_at_states, run_program, wheel_install
from tests.genuine_states import COMMITS
from tests.programs.compile_worker_site import WORKER_STATE

NAME = "min2-propagate-nan"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
PROGRAMS = ("amin", "amin-0", "amin-all", "amin-looped", "amin-relu")
UNEXPECTED = "min() got an unexpected keyword argument 'propagate_nan'"


def _with_flag(a, dim):
    return tl.min(a, dim, propagate_nan=True)  # noqa: F821 - read as source only


def _without_flag(a, dim):
    return tl.min(a, dim)  # noqa: F821


def _by_reduce(a, dim):
    return tl.reduce(a, dim, combine)  # noqa: F821


def test_rule_reads_the_helper_source_against_the_live_min():
    import triton.language

    assert min_keywords(_with_flag) == [{"propagate_nan"}] and min_keywords(_by_reduce) == []
    assert min_keywords(None) is None  # no source: nothing to judge
    assert min_takes_propagate_nan(triton.language.min) is False  # stock Triton, like triton-ascend
    assert "fails to build" in reduces_wrongly(min_keywords(_with_flag), False)
    assert "drops NaN" in reduces_wrongly(min_keywords(_without_flag), False)
    assert reduces_wrongly(min_keywords(_with_flag), True) is None  # a tl.min that takes the flag
    assert reduces_wrongly(min_keywords(_by_reduce), False) is None
    assert min_takes_propagate_nan(lambda input, axis=None, propagate_nan=False: None) is True


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "min2_propagate_nan", "amin")


def test_the_wheel_reduces_with_nan(runs):
    """The reference: every program builds, runs, equals eager and keeps the NaN; its
    helper's IR takes the minimum with NaN propagation."""
    res = runs[WHEEL]
    for label in PROGRAMS:
        assert res["before"][label] == {"equal": True, "nan": True, "min2_calls": 1}, label
    assert res["ir_before"] == ["arith.minimumf"] and res["after"] == res["before"]


@pytest.mark.parametrize("state", COMMITS)
def test_repaired_state_computes_what_the_wheel_computes(runs, state):
    """Before: every program stops at its min reduction, and the helper's IR does not
    build. After: each equals eager with its NaN, as the wheel's, and the IR is the
    wheel's; undo brings the defect back."""
    res, wheel = runs[state], runs[WHEEL]
    for label in PROGRAMS:
        assert UNEXPECTED in res["before"][label]["error"], (label, res["before"][label])
    assert res["ir_before"] == f"build fails: CompilationError: TypeError(\"{UNEXPECTED}\")"
    assert res["after"] == wheel["before"]
    assert res["ir_after"] == wheel["ir_before"] == ["arith.minimumf"]
    assert res["probe_after"] is False and res["undone"] is True


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory):
    """A virtual environment on top of this one (``python -m venv``; its site-packages adds
    this one's), whose ``.pth`` starts ``compile_worker_site`` in Inductor's workers; returns
    (its python, its site-packages)."""
    root = tmp_path_factory.mktemp("worker-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site_dir = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
    (site_dir / "a_this_environment.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    (site_dir / "zz_compile_worker_site.pth").write_text(
        f"import os; os.environ.get({WORKER_STATE!r}) and __import__('tests.programs.compile_worker_site')\n")
    return str(root / "bin" / "python"), site_dir


@pytest.mark.parametrize("autoload", [False, True], ids=["workers-without-autoload", "workers-with-autoload"])
def test_compile_workers_get_the_repaired_helper_through_the_autoload(genuine, worker_env, autoload):
    """``amin(-1) + 1`` then ``relu`` compiled through 8bfbb9ed1 with Inductor's pool of
    compile workers (fresh interpreters of the environment, which build each kernel's Triton
    IR first), npu_fixes applied in the parent. Without the autoload ``.pth`` the workers
    keep the backend's ``min2`` and the compile stops at its line; with it each worker
    builds with npu_fixes' ``min2`` (``arith.minimumf``), and the result equals eager."""
    python, site_dir = worker_env
    (_autoload.enable if autoload else _autoload.disable)(site_dir)
    res = run_program("min2_propagate_nan", "in_workers", env={"NPU_FIXES": "0"}, python=python,
                      location=str(genuine(COMMITS[0])))
    if not autoload:
        assert res["builds"] == [] and res["error"].startswith("CompilationError"), res
        assert res["error"].endswith("triton_helpers.min2(_tmp2, 1)[:, None]"), res
        return
    assert "error" not in res and res["equal"] is True, res
    assert res["builds"] and {b["pid"] for b in res["builds"]}.isdisjoint({res["parent"]})
    assert {b["min2"] for b in res["builds"]} == {"npu_fixes.fixes.min2_propagate_nan._min2"}
    assert all("arith.minimumf" in b["ops"] for b in res["builds"]), res["builds"]


def test_compile_workers_of_the_wheel_build_with_its_own_helper(worker_env):
    """The reference: the 2.13.0 wheel's workers, without the autoload, build with the
    wheel's ``min2`` and the same min op."""
    python, site_dir = worker_env
    _autoload.disable(site_dir)
    res = run_program("min2_propagate_nan", "in_workers", env={"NPU_FIXES": "0"}, python=python,
                      location=str(wheel_install(WHEEL)))
    assert "error" not in res and res["equal"] is True, res
    assert {b["min2"] for b in res["builds"]} == {
        "torch_npu._inductor.triton_experimental.npu_triton_helpers.min2"}, res["builds"]
    assert all("arith.minimumf" in b["ops"] for b in res["builds"]), res["builds"]
