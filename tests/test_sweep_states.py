"""scripts/sweep_states.py: its journals in the repository (gzipped copies written and read back), its
README and the sweep it runs per state."""

from __future__ import annotations

import pytest

from tests import scripts


@pytest.fixture(scope="module")
def states():
    return scripts.load("sweep_states")


def test_a_packed_journal_starts_a_missing_one_and_leaves_a_present_one(states, tmp_path):
    journal = tmp_path / "journals" / "bafc50684.jsonl"
    journal.parent.mkdir()
    text = '{"fingerprint": {"npu_fixes": "x"}}\n{"id": "gen:1", "config": "built", "record": {}}\n'
    journal.write_text(text)
    assert states.main(["--pack", str(tmp_path)]) == 0
    journal.unlink()
    states.unpack(journal)
    assert journal.read_text() == text
    journal.write_text(text + '{"id": "gen:2", "config": "built", "record": {}}\n')  # went on since
    states.unpack(journal)
    assert journal.read_text().count("\n") == 3


@pytest.mark.parametrize("argv", [["--pack"], ["--pack", "nowhere"], ["--results", "nowhere", "a=b"], [],
                                  ["--results"], ["no-equals-sign"]])
def test_bad_usage_exits_2_and_names_the_problem(states, argv, capsys):
    assert states.main(argv) == 2
    assert "Usage: python scripts/sweep_states.py" in capsys.readouterr().err


def test_a_sweep_that_does_not_finish_gives_no_report_and_names_the_state(states, capsys):
    assert states.sweep("bafc50684", "/no/such/torch_npu", "--samples", "gen:1") is None
    err = capsys.readouterr().err
    assert "bafc50684: npu-fixes sweep failed (2)" in err and "/no/such/torch_npu: no such file" in err


@pytest.mark.parametrize("key", ["silent_with_npu_fixes", "regressions", "unexplained"])
def test_a_report_fails_on_a_silent_sample_a_regression_or_an_unexplained_failure(states, key):
    clean = {"silent_with_npu_fixes": [], "regressions": [], "unexplained": []}
    assert not states.fails(clean)
    assert states.fails(dict(clean, **{key: ["gen:1"]}))


def _row(name: str, n: int) -> tuple[str, dict, float, int]:
    counts = {"built": {"wrong": n}, "fixed": {"pass": n}}
    return name, {"corpus": "whole", "samples": n, "counts": counts, "regressions": [], "unexplained": [],
                  "classes": {}}, 1.0, 0


def test_a_readme_rewritten_keeps_the_other_states_and_the_hand_section(states):
    first = states.readme([_row("f8802037a", 7)], [], "2026-01-01", "abc1234")
    old = first + f"\n{states.HAND}\n\nf8802037a: 7 fail as built, none with npu_fixes.\n"
    new = states.readme([_row("8bfbb9ed1", 5)], [], "2026-01-02", "abc1234")
    text = states.merged(old, new, {"8bfbb9ed1"})
    rows = [line.split(" | ")[0:2] for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == [["| state", "samples"], ["| f8802037a", "7"], ["| 8bfbb9ed1", "5"]]
    assert "- f8802037a: none\n- 8bfbb9ed1: none\n" in text
    assert text.endswith(f"\n{states.HAND}\n\nf8802037a: 7 fail as built, none with npu_fixes.\n")
    # the same state run again replaces its row, and a README without a hand section gets none
    again = states.merged(new, states.readme([_row("8bfbb9ed1", 6)], [], "2026-01-02", "abc1234"), {"8bfbb9ed1"})
    assert "| 8bfbb9ed1 | 6 |" in again and "| 8bfbb9ed1 | 5 |" not in again and states.HAND not in again
