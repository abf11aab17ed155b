"""rsplit-nested-range: the rule, then OUTER reductions compiled through every genuine state
and both published wheels, their kernels run in Triton's interpreter with the backend's own
launcher grid, against eager (tests/programs/rsplit_split.py)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rsplit_nested_range import free_reduction_nodes, kernel_allows_split, split_allowed
from tests.conftest import FIXED_UPSTREAM, run_at_states
from tests.genuine_states import BEYOND, COMMITS, UNFIXED

NAME = "rsplit-nested-range"
STATES = (*COMMITS, *FIXED_UPSTREAM)
#: OUTER sums whose reduction keeps two or three free nodes (wrong, 40 cores: 40x; the last a
#: BigBird-style block against another block's transpose), and
#: controls: one free node, two outputs, reductions that are not sums.
NESTED = ("nested2", "nested3", "nested2-keepdim", "blocks-transposed")
CONTROLS = ("sum", "sum-keepdim", "two-outputs", "amax", "amin", "prod", "argmax")
#: The controls that 8bfbb9ed1 gets wrong without npu_fixes: it splits max and min too
#: (rsplit-nonsum, fixed upstream in 95c9094da).
NONSUM_WRONG = {"8bfbb9ed1": {"amax", "amin"}}
#: And every public commit's amin stops at the build (min2-propagate-nan).
MIN2_FAILS = "min() got an unexpected keyword argument 'propagate_nan'"


def test_free_reduction_nodes_sweep():
    names = ["r0_1", "r0_2", "r0_3", "r0_4"]
    for n, k in itertools.product(range(1, 5), range(0, 5)):
        mapped = {name: 0 for name in names[:min(k, n)]}
        r = NS(is_reduction=True, nodes={x: None for x in names[:n]}, tree_node_mapping=mapped)
        x = NS(is_reduction=False, nodes={"x0": None, "x1": None}, tree_node_mapping={})
        assert free_reduction_nodes([x, r]) == n - len(mapped)
        assert free_reduction_nodes([x, r, r]) == 2 * (n - len(mapped))  # r0_ and r1_ trees
    assert free_reduction_nodes([NS(is_reduction=True, nodes={"r0_1": None})]) == 1


def test_split_allowed_table():
    for upstream, outer, free in itertools.product((True, False), (True, False), (None, 0, 1, 2, 3)):
        assert split_allowed(upstream, outer, free) is (upstream and (not outer or free == 1))


def test_kernel_rule_reads_hint_and_tree():
    module = NS(ReductionHint=NS(OUTER="outer", INNER="inner"))

    def kernel(hint, nodes):
        tree = NS(is_reduction=True, nodes=dict.fromkeys(nodes), tree_node_mapping={})
        return NS(features=NS(get_reduction_hint=lambda: hint), range_trees=[tree])

    assert kernel_allows_split(module, kernel("outer", ["r0_1"])) is True
    assert kernel_allows_split(module, kernel("outer", ["r0_1", "r0_2"])) is False
    assert kernel_allows_split(module, kernel("inner", ["r0_1", "r0_2"])) is True  # INNER: upstream's guard
    assert kernel_allows_split(module, NS()) is False  # cannot be read: no split
    assert kernel_allows_split(module, NS(features=NS(get_reduction_hint=lambda: 1 / 0))) is False


# -- genuine states and the published wheels ----------------------------------------------
def battery_runs(genuine, labels: list[str]) -> dict[str, dict]:
    """Each state and wheel, one interpreter each: the raw probes of the split's fixes, the
    programs ``labels`` without and with npu_fixes."""
    return run_at_states(genuine, STATES, "rsplit_split", "battery", labels=labels)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return battery_runs(genuine, [*NESTED, *CONTROLS])


def test_the_defect_is_at_every_state_and_wheel():
    assert BEYOND[NAME] == set(COMMITS) and NAME in UNFIXED


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert runs[state]["probes"][NAME] is True
    assert runs[state]["states"][NAME] == "applied"


@pytest.mark.parametrize("state", STATES)
def test_nested_sums_are_40_times_too_large_without_and_right_with(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in NESTED:
        assert before[label]["equal"] is False and before[label]["ratio"] == [40.0, 40.0], (label, before[label])
        launches = [programs for programs, _ in before[label]["launches"]]
        assert launches[-2:] == [40, 40], (label, launches)  # partial + combine, last
        assert after[label]["equal"] is True, (label, after[label])
        assert len(after[label]["launches"]) == len(launches) - 1  # unsplit: no combine kernel


@pytest.mark.parametrize("state", STATES)
def test_controls(runs, state):
    """One free node, two outputs, non-sum reductions: right with npu_fixes everywhere,
    and without it wrong only where rsplit-nonsum's defect is, or failing to build where
    min2-propagate-nan's is."""
    before, after = runs[state]["before"], runs[state]["after"]
    fails = {label for label in CONTROLS if MIN2_FAILS in before[label].get("error", "")}
    assert fails == ({"amin"} if state in BEYOND["min2-propagate-nan"] else set()), before
    wrong = {label for label in CONTROLS if before[label].get("equal") is False}
    assert wrong == NONSUM_WRONG.get(state, set()) - fails, {label: before[label] for label in wrong}
    assert all(after[label].get("equal") for label in CONTROLS), after
    for label in ("sum", "sum-keepdim"):  # one free node: still split, as upstream does
        assert after[label]["launches"] == before[label]["launches"]


#: Programs of the refused kernel that find work (its x blocks): the README's cost table.
BUSY_UNSPLIT = {"nested2": 4, "nested3": 2, "nested2-keepdim": 4, "blocks-transposed": 4}


def test_lost_parallelism(runs):
    """Where the split is refused, fewer programs find work: instead of all 40 partial
    programs, only the unsplit kernel's x blocks."""
    for state in STATES:
        for label in NESTED:
            before, after = runs[state]["before"][label]["launches"], runs[state]["after"][label]["launches"]
            assert before[-2] == [40, 40], (state, label, before)
            assert after[-1] == [40, BUSY_UNSPLIT[label]], (state, label, after)
            assert after[:-1] == before[:-2], (state, label)  # the kernels before the sum: unchanged
