"""scripts/sweep_rejudge.py: which samples of a whole run are judged again, and its README lines."""

from __future__ import annotations

import pytest

from tests import scripts


@pytest.fixture(scope="module")
def rejudge():
    return scripts.load("sweep_rejudge")


def _records(**fixed: str) -> dict:
    return {"records": {i: {"built": {"outcome": "wrong"}, "fixed": {"outcome": o}} for i, o in fixed.items()},
            "regressions": [], "unexplained": []}


def test_the_samples_failing_or_at_a_limit_with_npu_fixes_are_taken(rejudge):
    then = _records(a="pass", b="run-time-error", c="harness-limit", d="skipped", e="no-kernel", f="wrong")
    assert rejudge.taken(then) == ["b", "c", "f"]


def test_the_readme_counts_then_and_now_and_names_what_changed(rejudge):
    then = _records(b="run-time-error", c="harness-limit")
    now = _records(b="pass", c="harness-limit")
    lines = rejudge.rows("8bfbb9ed1", "2026-01-01_abc1234_cpu-2core_sweep", then, now)
    table = {cells[0]: cells[1:] for cells in (line.strip("| ").split(" | ") for line in lines if line.startswith("| "))}
    counts = {row: dict(zip(table["with npu_fixes"], table[row], strict=True))
              for row in ("then (`2026-01-01_abc1234_cpu-2core_sweep`)", "now")}
    then_counts, now_counts = counts.values()
    assert (then_counts["pass"], then_counts["run-time-error"], then_counts["harness-limit"]) == ("0", "1", "1")
    assert (now_counts["pass"], now_counts["run-time-error"], now_counts["harness-limit"]) == ("1", "0", "1")
    assert "outcome changed: 1:" in "\n".join(lines) and "- `b`: run-time-error -> pass" in lines


@pytest.mark.parametrize("argv", [[], ["out"], ["out", "no-such-report.json=somewhere"]])
def test_bad_usage_exits_2_and_names_the_problem(rejudge, argv, capsys):
    assert rejudge.main(argv) == 2
    assert "Usage: python scripts/sweep_rejudge.py" in capsys.readouterr().err
