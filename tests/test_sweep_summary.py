"""scripts/sweep_summary.py: the newest whole-corpus report per state, and its row."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from npu_fixes.tools.corpus import Selection
from tests import scripts


@pytest.fixture(scope="module")
def summary():
    return scripts.load("sweep_summary")


def _commits(n: int) -> list[str]:
    """This checkout's newest ``n`` commits, newest first, as the results' folders name them."""
    out = subprocess.run(["git", "rev-list", f"--max-count={n}", "HEAD"], cwd=scripts.FOLDER,
                         capture_output=True, text=True, check=True).stdout.split()
    return [c[:7] for c in out]


def _report(folder: Path, state: str, corpus: str, records: dict, classes: dict) -> None:
    counts = {config: {} for config in ("built", "fixed")}
    for record in records.values():
        for config, r in record.items():
            counts[config][r["outcome"]] = counts[config].get(r["outcome"], 0) + 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{state}.json").write_text(json.dumps(
        {"corpus": corpus, "samples": len(records), "counts": counts, "records": records,
         "classes": classes, "regressions": [], "unexplained": [i for i, c in classes.items() if not c]}))


def _pair(built: str, fixed: str) -> dict:
    return {"built": {"outcome": built}, "fixed": {"outcome": fixed}}


def test_the_newest_whole_run_is_taken_and_a_part_of_the_corpus_is_not(summary, tmp_path):
    newer, older = _commits(2)
    whole, part = Selection().label(), Selection(per_op=1).label()
    _report(tmp_path / f"2026-01-01_{older}_cpu-2core_sweep", "bafc50684", whole, {"a": _pair("wrong", "pass")}, {})
    _report(tmp_path / f"2026-01-01_{newer}_cpu-2core_sweep", "bafc50684", whole,
            {"a": _pair("wrong", "pass"), "b": _pair("wrong", "wrong")}, {"b": None})
    _report(tmp_path / f"2026-01-02_{newer}_cpu-2core_sweep", "8bfbb9ed1", part, {"a": _pair("wrong", "pass")}, {})
    found = summary.newest_reports(tmp_path)
    assert set(found) == {"bafc50684"}
    runs, report = found["bafc50684"]
    assert runs == f"`2026-01-01_{newer}_cpu-2core_sweep`"
    row = summary.row("bafc50684", runs, report)
    # 2 fail as built; of those 1 passes, 0 run no kernel, 0 limits; 1 fails, unexplained
    assert row.split(" | ")[3:9] == ["2", "1", "0", "0", "1", "`UNEXPLAINED` 1"]
    assert row.endswith("| 0 | 1 |")


def test_a_folder_naming_no_commit_of_the_history_is_refused(summary, tmp_path):
    _report(tmp_path / "2026-01-01_0000000_cpu-2core_sweep", "bafc50684", Selection().label(), {}, {})
    with pytest.raises(SystemExit, match="0000000 is not a commit of this history"):
        summary.newest_reports(tmp_path)


def test_a_page_without_the_markers_is_refused(summary, tmp_path):
    page = tmp_path / "sweep.md"
    page.write_text("# no table here\n")
    with pytest.raises(SystemExit, match="sweep.md has no <!-- sweep-runs:begin"):
        summary.generated(page)


def test_every_outcome_is_counted_in_both_configurations_and_summed(summary, tmp_path):
    (newer,) = _commits(1)
    whole = Selection().label()
    folder = tmp_path / f"2026-01-01_{newer}_cpu-2core_sweep"
    _report(folder, "bafc50684", whole, {"a": _pair("wrong", "pass"), "b": _pair("pass", "pass")}, {})
    _report(folder, "wheel-2.13.0", whole, {"a": _pair("out-of-bounds", "harness-limit")}, {})
    lines = summary.outcome_rows(summary.newest_reports(tmp_path))
    assert lines[0].split(" | ")[2:4] == ["`pass`", "`no-kernel`"]
    cells = {line.split(" | ")[0]: line.split(" | ")[1:] for line in lines[2:]}
    assert list(cells) == ["| bafc50684", "| wheel-2.13.0", "| all 2"]
    assert cells["| bafc50684"][:4] == ["2", "1 / 2", "0 / 0", "1 / 0"]
    assert cells["| all 2"][:5] == ["3", "1 / 2", "0 / 0", "1 / 0", "1 / 0"]
    assert cells["| all 2"][-2] == "0 / 1"  # harness-limit


def test_a_later_rejudging_of_the_run_replaces_the_samples_it_judged_again(summary, tmp_path):
    newest, middle, oldest = _commits(3)
    whole = Selection().label()
    run = {"a": _pair("wrong", "run-time-error"), "b": _pair("wrong", "harness-limit"), "c": _pair("wrong", "pass")}
    _report(tmp_path / f"2026-01-01_{oldest}_cpu-2core_sweep", "bafc50684", whole, run, {"a": None})
    # judges again exactly the samples failing or at a harness limit with npu_fixes: taken up
    _report(tmp_path / f"2026-01-02_{middle}_cpu-2core_rejudge", "bafc50684", "--samples a,b",
            {"a": _pair("wrong", "pass"), "b": _pair("wrong", "harness-limit")}, {})
    # another set of samples (a rejudging of some other run): left out
    _report(tmp_path / f"2026-01-03_{newest}_cpu-2core_rejudge", "bafc50684", "--samples a",
            {"a": _pair("wrong", "wrong")}, {"a": None})
    runs, report = summary.newest_reports(tmp_path)["bafc50684"]
    assert runs == f"`2026-01-01_{oldest}_cpu-2core_sweep` + `2026-01-02_{middle}_cpu-2core_rejudge`"
    assert report["counts"] == {"built": {"wrong": 3}, "fixed": {"pass": 2, "harness-limit": 1}}
    assert report["unexplained"] == [] and report["classes"] == {}
    assert summary.row("bafc50684", runs, report).split(" | ")[3:9] == ["3", "2", "0", "1", "0", "none"]


def test_a_rejudging_older_than_the_run_is_not_applied(summary, tmp_path):
    newer, older = _commits(2)
    whole = Selection().label()
    _report(tmp_path / f"2026-01-02_{newer}_cpu-2core_sweep", "bafc50684", whole,
            {"a": _pair("wrong", "run-time-error")}, {"a": None})
    _report(tmp_path / f"2026-01-01_{older}_cpu-2core_rejudge", "bafc50684", "--samples a",
            {"a": _pair("wrong", "pass")}, {})
    runs, report = summary.newest_reports(tmp_path)["bafc50684"]
    assert runs == f"`2026-01-02_{newer}_cpu-2core_sweep`" and report["unexplained"] == ["a"]
