"""mixed-leaf-xmask: reductions to one value of a product of differently shaped operands,
compiled through every genuine state and both published wheels, kernels run in Triton's
interpreter, against eager."""

from __future__ import annotations

import types

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PRESENT = tuple(s for s in STATES if s != "8bfbb9ed1")
DEFECTIVE = ("softmax-positions", "softmax-positions-backward", "rows-by-weights")
ALL_RIGHT = dict.fromkeys((*DEFECTIVE, "per-batch"), True)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "mixed_leaf_xmask", "reductions")


@pytest.mark.parametrize("state", PRESENT)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "& xmask")


@pytest.mark.parametrize("state", PRESENT)
def test_the_compile_stops_as_built_and_equals_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in DEFECTIVE:
        assert before[label] == "NameError: name 'xmask' is not defined", (label, before[label])
    assert before["per-batch"] is True, "a kernel with an x range defines xmask"
    assert after == ALL_RIGHT, after


def test_8bfbb9ed1_has_no_such_guard_and_is_left_alone(runs):
    res = runs["8bfbb9ed1"]
    assert res["probe_before"][0] is False and res["state"] == "not-needed"
    assert res["before"] == res["after"] == ALL_RIGHT


def test_only_guards_of_kernels_without_an_x_node_lose_xmask():
    from npu_fixes.fixes import mixed_leaf_xmask as fix

    guard = "    tmp4_broadcast_guard = tl.where(r0_1mask & xmask, tmp3, 0.0)"
    assert fix.without_xmask(guard) == "    tmp4_broadcast_guard = tl.where(r0_1mask, tmp3, 0.0)"
    assert fix.without_xmask("    tmp4 = tl.where(r0_1mask & xmask, tmp3, 0.0)") is None
    node = types.SimpleNamespace(name="x0")
    x_tree = types.SimpleNamespace(prefix="x", nodes={1: node}, tree_node_mapping={})
    assert fix.defines_xmask(types.SimpleNamespace(range_trees=[x_tree]))
    x_tree.nodes = {}
    assert not fix.defines_xmask(types.SimpleNamespace(range_trees=[x_tree]))
