"""scripts/sweep_states.py's journals in the repository: gzipped copies written and read back."""

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
