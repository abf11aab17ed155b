"""split-fused-fixpoint: the loop in-process on a stand-in round, then reshape and permute
chains compiled through every genuine state and the fixed wheel, kernels run in Triton's
interpreter with the backend's launcher grid, against eager and the wheel's addresses
(tests/programs/split_fused_fixpoint.py)."""

from __future__ import annotations

import re
from types import SimpleNamespace as NS

import pytest
import sympy

from npu_fixes.fixes.split_fused_fixpoint import EXTRA_ROUNDS, split_to_fixpoint
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "split-fused-fixpoint"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
#: Pointwise chains whose addresses keep a ``%`` or ``//`` of a fused node after one round.
RESIDUE = ("permuted-reshape-t", "blocks-unfolded")
#: Reductions over such chains (their indexes keep upstream's one round) and a pointwise
#: chain one round already makes affine.
CONTROLS = ("pixel-shuffle", "blocks-unfolded-sum", "permuted-row-sum", "permuted-column-sum")
DIVMOD = re.compile(r"//|%")


def _kernel(reduction: set[str] = frozenset()) -> NS:
    def node(name):
        return NS(name=name, root=NS(is_reduction=name in reduction, tree_node_mapping={}))

    return NS(range_tree_nodes={sympy.Symbol(n): node(n) for n in ("x0", "x1", "r0_1")})


def test_rounds_run_until_the_index_stops_changing():
    x0, x1 = sympy.symbols("x0 x1")
    steps = {x0: x1 + 1, x1 + 1: x1 + 2, x1 + 2: x1 + 2}
    calls = []

    def split_round(index):
        calls.append(index)
        return steps[index]

    assert split_to_fixpoint(split_round, _kernel(), x0) == x1 + 2
    assert calls == [x0, x1 + 1, x1 + 2]


def test_rounds_stop_on_a_cycle_and_are_bounded():
    x0, x1 = sympy.symbols("x0 x1")
    calls = []
    assert split_to_fixpoint(lambda i: calls.append(i) or (x1 if i == x0 else x0), _kernel(), x0) == x0
    assert calls == [x0, x1, x0]  # x1 -> x0 -> x1: back to an earlier form
    counter = iter(range(100))
    assert split_to_fixpoint(lambda i: sympy.Integer(next(counter)), _kernel(), x0) == EXTRA_ROUNDS


def test_reduction_symbols_are_held_after_the_first_round():
    x0, r = sympy.symbols("x0 r0_1")
    seen = []

    def split_round(index):
        seen.append(index)
        return index.subs(x0, 2 * x0) if len(seen) < 3 else index

    assert split_to_fixpoint(split_round, _kernel({"r0_1"}), x0 + r) == 4 * x0 + r
    assert seen[0] == x0 + r  # upstream's round sees the reduction symbol
    assert all(r not in later.free_symbols for later in seen[1:]), seen


# -- genuine states and the fixed wheel ---------------------------------------------------
@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "split_fused_fixpoint", "battery")


def test_the_defect_is_at_every_commit():
    assert BEYOND[NAME] == set(COMMITS)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state(runs, state):
    run = runs[state]
    needed = state in BEYOND[NAME]
    assert run["probe_before"][0] is needed, run["probe_before"]
    assert run["state"] == ("applied" if needed else "not-needed")
    assert run["probe_after"] is False and run["undone"] is needed


@pytest.mark.parametrize("state", COMMITS)
def test_residue_without_and_the_wheels_addresses_with(runs, state):
    """Without npu_fixes a load keeps ``% 4`` and ``// 4`` of a fused node; with it every
    address is affine and equal to the one the 2.13.0 wheel's own code emits. Both compute
    right here (the interpreter evaluates ``%`` and ``//`` exactly)."""
    before, after, wheel = runs[state]["before"], runs[state]["after"], runs[WHEEL]["before"]
    for label in RESIDUE:
        assert any(DIVMOD.search(a) for a in before[label]["addresses"]), (label, before[label])
        assert after[label]["addresses"] == wheel[label]["addresses"], (label, after[label], wheel[label])
        assert not any(DIVMOD.search(a) for a in after[label]["addresses"])
        assert before[label]["equal"] and after[label]["equal"] and wheel[label]["equal"]


@pytest.mark.parametrize("state", STATES)
def test_controls_are_unchanged(runs, state):
    """Reductions keep upstream's one round (the wheel splits their nodes further, with a
    reduction codegen the states do not have); a chain one round makes affine is untouched."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in CONTROLS:
        assert before[label]["equal"] and after[label]["equal"], (label, before[label], after[label])
        assert after[label]["addresses"] == before[label]["addresses"], label
    if state != WHEEL:
        assert any(DIVMOD.search(a) for a in after["blocks-unfolded-sum"]["addresses"])
