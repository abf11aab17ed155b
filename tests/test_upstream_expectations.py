"""The expectations table for upstream's own regression tests (``tests/upstream_peer.py`` runs
them in the genuine matrix rows): its entries are consistent, it gives the outcomes observed
at each genuine state, and registering a fix flips that fix's tests to "pass"."""

from __future__ import annotations

import pytest

from tests import genuine_states
from tests.upstream_expectations import (
    EXERCISES,
    HOW_UPSTREAM_FIXED_IT,
    NEEDS_HELPER,
    PASSES_REGARDLESS,
    UNLISTED,
    expect,
)

FIVE = genuine_states.FIVE
#: Where each helper that a test calls by name exists (read from the genuine states' sources).
HELPERS = {"_cat_store_dtype": {"8bfbb9ed1"}, "_can_clamp_1d_grid": {"5ff81d9c5", "bafc50684"}}


def live_at(state: str, registered=FIVE) -> dict[str, str]:
    """What npu_fixes' status says at a genuine state: applied where the defect is."""
    present = genuine_states.DEFECTS[state] | {n for n, s in genuine_states.BEYOND.items() if state in s}
    return {name: "applied" if name in present else "not-needed" for name in registered}


def table(state: str, registered=FIVE) -> dict[str, str]:
    def has_helper(module: str, name: str) -> bool:
        return state in HELPERS[name]

    return {test.rpartition("::")[2]: expect(test, state, registered, has_helper,
                                             live_at(state, registered)).outcome
            for test in EXERCISES}


def test_every_entry_names_a_listed_test_and_a_known_defect():
    for listing in (NEEDS_HELPER, HOW_UPSTREAM_FIXED_IT, PASSES_REGARDLESS):
        assert set(listing) <= set(EXERCISES)
    assert set(EXERCISES.values()) <= set(FIVE) | set(genuine_states.BEYOND) | set(UNLISTED)
    assert all(name in HELPERS for _, name, _ in NEEDS_HELPER.values())


# Observed with the five fixes registered (control-deps-lowering and constant-index-shape not yet).
OBSERVED = {
    "8bfbb9ed1": {"xfail": {"test_cat_store_dtype_accepts_subgraph_lowering",
                            "test_control_deps_is_not_replaced_with_fallback",
                            "test_constant_index_normalizes_emitted_and_cse_shapes",
                            "test_bernoulli_fallback_disables_npugraph_capture",
                            "test_scalar_pointwise_grid_is_clamped"}},
    "95c9094da": {"xfail": {"test_cat_store_dtype_accepts_subgraph_lowering",
                            "test_cat_store_dtype_preserves_regular_value_dtype",
                            "test_control_deps_is_not_replaced_with_fallback",
                            "test_constant_index_normalizes_emitted_and_cse_shapes",
                            "test_bernoulli_fallback_disables_npugraph_capture",
                            "test_scalar_pointwise_grid_is_clamped"}},
    "5ff81d9c5": {"xfail": {"test_cat_store_dtype_accepts_subgraph_lowering",
                            "test_cat_store_dtype_preserves_regular_value_dtype"}},
}
OBSERVED["f8802037a"] = OBSERVED["95c9094da"]
OBSERVED["bafc50684"] = OBSERVED["5ff81d9c5"]


@pytest.mark.parametrize("state", genuine_states.COMMITS)
def test_table_gives_the_outcomes_observed(state):
    got = table(state)
    assert {t for t, outcome in got.items() if outcome == "xfail"} == OBSERVED[state]["xfail"]


@pytest.mark.parametrize("fix", ["constant-index-shape"])
def test_registering_a_fix_flips_its_tests_to_pass(fix):
    tests = {t.rpartition("::")[2] for t, f in EXERCISES.items() if f == fix and t not in PASSES_REGARDLESS}
    for state in genuine_states.PRE_FIX:
        assert {table(state)[t] for t in tests} == {"xfail"}
        assert {table(state, (*FIVE, fix))[t] for t in tests} == {"pass"}


def test_an_own_tree_follows_the_live_verdicts():
    test = next(t for t, f in EXERCISES.items() if f == "dualview-fold")
    def has_helper(module, name):
        return True
    assert expect(test, "tree", FIVE, has_helper, {"dualview-fold": "applied"}).outcome == "pass"
    assert expect(test, "tree", FIVE, has_helper, {"dualview-fold": "not-needed"}).outcome == "pass"
    unknown = expect(test, "tree", FIVE, has_helper, {"dualview-fold": "failed"})
    assert (unknown.outcome, unknown.strict) == ("xfail", False)
