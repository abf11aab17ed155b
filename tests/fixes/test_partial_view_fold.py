"""partial-view-fold (report): at every genuine state and the 2.13.0 wheel, the probe (the live fold
of alternate views on a stand-in x tree) and the state."""

from __future__ import annotations

import pytest

from tests.fixes.guards import STATES, check_probe_and_state, guard_runs

NAME = "partial-view-fold"


@pytest.fixture(scope="module")
def runs(genuine):
    return guard_runs(genuine, NAME)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state_follow_the_catalogue(runs, state):
    check_probe_and_state(runs[state], NAME, state)


def test_probe_details_name_the_folds(runs):
    old, wheel = runs["8bfbb9ed1"]["probe"][1], runs["2.13.0"]["probe"][1]
    assert "_fold_dual_decomp leaves a second view" in old and "not reproduced" in old
    assert "_fold_redundant_range_tree_decomposition folds" in wheel
