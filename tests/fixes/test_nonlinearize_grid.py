"""nonlinearize-grid (guard): which setting the guard reads, in-process; then reductions
compiled with ``codegen_linearize`` off through every genuine state and the fixed wheel,
kernels run in Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import sys
import types

import pytest

from npu_fixes.fixes.nonlinearize_grid import linearize_in_force
from tests.conftest import run_at_states
from tests.genuine_states import COMMITS

NAME = "nonlinearize-grid"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
PROGRAMS = ("sum", "sum-long", "amax")


def test_the_guard_reads_the_codegen_copy_of_the_setting(monkeypatch):
    """The codegen copies the setting at its import: that copy decides, the config only
    where the codegen is not loaded."""
    heuristics = types.ModuleType("pkg.npu_triton_heuristics")
    heuristics.ncfg = types.SimpleNamespace(codegen_linearize=False)
    assert linearize_in_force(heuristics) is False
    codegen = types.ModuleType("pkg.codegen.triton")
    codegen.triton_codegen_linearize = True
    monkeypatch.setitem(sys.modules, "pkg.codegen.triton", codegen)
    assert linearize_in_force(heuristics) is True


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "nonlinearize_grid", "grid")


def test_the_wheel_launches_one_program_per_tile(runs):
    """The reference: with the setting off each reduction equals eager, one program per
    tile of rows; with npu_fixes nothing changes."""
    res = runs[WHEEL]
    assert res["off_before"] == res["off_after"]
    assert all(res["off_before"][label]["equal"] for label in PROGRAMS), res["off_before"]
    assert [res["off_before"][label]["grids"] for label in PROGRAMS] == [[16], [256], [6]]


@pytest.mark.parametrize("state", COMMITS)
def test_guard_refuses_the_setting_where_rows_would_be_lost(runs, state):
    """Without npu_fixes the long reduction comes out wrong with no error (too few
    programs); with it each reduction stops with the guard's error naming the setting and
    the upgrade, and with the setting on each equals eager."""
    res = runs[state]
    assert res["off_before"]["sum-long"]["equal"] is False, res["off_before"]
    for label in PROGRAMS:
        error = res["off_after"][label]["error"]
        assert error.startswith("NonlinearizedGridUnsupported: torch_npu._inductor.triton_experimental"
                                ".config.codegen_linearize=False"), error
        assert error.endswith("or upgrade to the torch-npu 2.13.0 wheel"), error
        assert res["on_after"][label]["equal"] is True
