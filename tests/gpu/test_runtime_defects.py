"""launch-grid, boundary-downcast and rng-capture-gate on a CUDA GPU: the checks of
``tests/gpu/runtime_defects.py``, fewer launches. (That the repaired launcher asks for one
program is shown on the genuine states' real launcher code: tests/fixes/test_launch_grid.py.)

The old grid's race rate is printed (``-s``), not asserted: whether 48 programs collide
within 2,000 launches depends on the GPU's timing; the script's 20,000 launches report it.
"""

from __future__ import annotations

import pytest

from tests.gpu import runtime_defects as rd

pytestmark = pytest.mark.gpu

@pytest.mark.parametrize("kernel", ["qa", "sum"])
def test_old_grid_results_are_stacked_updates(kernel):
    result = rd.scalar_race(rd.OLD_RULE_PROGRAMS, 2000, "cuda", kernel)
    print(f"{kernel} grid {result.programs}: {result.wrong}/{result.launches} wrong, worst {result.worst}")
    assert abs(result.worst - round(result.worst)) < 1e-3 and 1 <= round(result.worst) <= rd.OLD_RULE_PROGRAMS


@pytest.mark.parametrize("check", rd.DOWNCAST_CHECKS, ids=lambda check: check.__name__)
def test_boundary_downcast(check):
    row = check("cuda")
    assert row.ok, row.observed


def test_capture_gate_skips_the_bernoulli_graph_and_keeps_the_rng_sequence():
    result = rd.capture_run("cuda", 20, gate=True)
    assert "aten.bernoulli_.float" in result.gated and result.gated == result.stock
    assert result.train_captures == 0 and result.train_skips >= 1
    assert any("bernoulli" in m for m in result.skip_messages), result.skip_messages
    assert result.difference is None, result.difference
    assert result.plain_captures > 0 and result.plain_skips == 0


def test_without_the_gate_the_bernoulli_graph_is_captured():
    result = rd.capture_run("cuda", 3, gate=False)
    assert result.train_captures > 0 and result.train_skips == 0
