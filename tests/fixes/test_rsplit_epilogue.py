"""rsplit-epilogue: the rule on loop bodies, then OUTER sums with fused epilogues compiled
through every genuine state and both published wheels, kernels run in Triton's
interpreter with the backend's launcher grid, against eager (tests/programs/rsplit_split.py)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rsplit_epilogue import kernel_allows_split, linear_epilogue
from npu_fixes.fixes.shared.rsplit import pointwise_node
from tests.fixes.test_rsplit_nested_range import STATES, battery_runs
from tests.genuine_states import BEYOND, COMMITS, UNFIXED

NAME = "rsplit-epilogue"
#: Epilogues linear in the sum: the split stays (and is right).
LINEAR = ("*c", "/n", "neg", "mean")
#: Epilogues that are not.
NONLINEAR = ("+b", "+3", "**2", "relu", "to-fp16", "to-int", "nested2+b")
#: What each state gets wrong without npu_fixes. 8bfbb9ed1 splits none of the additive or
#: pointwise ones, but splits the casts (and nested2+b is not split there).
WRONG = {state: set(NONLINEAR) for state in STATES} | {"8bfbb9ed1": {"to-fp16", "to-int"}}


def _kernel(*pointwise, reduction_buffers=("buf0",)):
    reduction = NS(get_buffer_names=lambda: set(reduction_buffers))
    return NS(features=NS(get_reduction_hint=lambda: "outer", reduction_nodes=lambda: [reduction],
                          scheduler_nodes=lambda: [reduction, *pointwise]))


def test_linear_epilogues_are_recognised():
    assert linear_epilogue(_kernel()) is True  # the reduction alone
    assert linear_epilogue(_kernel(pointwise_node("arg0"))) is True  # a node that never reads the sum
    for op in ("mul", "truediv", "div"):
        assert linear_epilogue(_kernel(pointwise_node("buf0", op))) is True, op  # sum * b, sum / b
    for op in ("add", "sub", "maximum", "to_dtype", "pow"):
        assert linear_epilogue(_kernel(pointwise_node("buf0", op))) is False, op


def test_a_divisor_or_square_of_the_sum_is_not_linear():
    import torch

    def node(build):
        graph = torch.fx.Graph()
        ops = graph.placeholder("ops")
        index = graph.call_module("get_index", ())
        value = build(graph, ops, graph.call_method("load", (ops, "buf0", index)))
        graph.call_method("store", (ops, "buf1", index, value, None))
        graph.output(None)
        return NS(_body=NS(root_block=NS(graph=graph), subblocks={}))

    one = lambda g, ops, s: g.call_method("constant", (ops, 1.0))  # noqa: E731
    assert linear_epilogue(_kernel(node(lambda g, ops, s: g.call_method("truediv", (ops, one(g, ops, s), s))))) is False
    assert linear_epilogue(_kernel(node(lambda g, ops, s: g.call_method("mul", (ops, s, s))))) is False
    assert linear_epilogue(_kernel(node(lambda g, ops, s: g.call_method("neg", (ops, s))))) is True
    accumulate = node(lambda g, ops, s: s)
    store = [n for n in accumulate._body.root_block.graph.nodes if n.target == "store"][0]
    store.args = (*store.args[:4], "atomic_add")
    assert linear_epilogue(_kernel(accumulate)) is False


def test_unreadable_kernels_and_subblocks_reject():
    assert linear_epilogue(_kernel(NS())) is False  # a node without a body
    reads = pointwise_node("buf0")
    masked = NS(_body=NS(root_block=pointwise_node("arg0")._body.root_block, subblocks={"masked_subblock1": reads._body.root_block}))
    assert linear_epilogue(_kernel(masked)) is False  # a masked sub-block reading the sum
    module = NS(ReductionHint=NS(OUTER="outer"))
    assert kernel_allows_split(module, _kernel(pointwise_node("buf0", "add"))) is False
    inner = _kernel(pointwise_node("buf0", "add"))
    inner.features.get_reduction_hint = lambda: "inner"
    assert kernel_allows_split(module, inner) is True  # INNER: upstream checks its epilogues
    assert kernel_allows_split(module, NS()) is False


# -- genuine states and the published wheels ----------------------------------------------
@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return battery_runs(genuine, [*LINEAR, *NONLINEAR])


def test_the_defect_is_at_every_state_and_wheel():
    assert BEYOND[NAME] == set(COMMITS) and NAME in UNFIXED


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert runs[state]["probes"][NAME] is True
    assert runs[state]["states"][NAME] == "applied"


@pytest.mark.parametrize("state", STATES)
def test_wrong_without_right_with(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert {label for label, r in before.items() if not r.get("equal")} == WRONG[state], before
    assert all(r.get("equal") for r in after.values()), after
    if state != "8bfbb9ed1":  # a cast to fp16: the combine kernel stores past its buffers
        assert "OutOfBounds" in before["to-fp16"]["error"]


@pytest.mark.parametrize("state", STATES)
def test_linear_epilogues_keep_the_split(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in LINEAR:
        assert after[label]["launches"] == before[label]["launches"], label
        assert len(after[label]["launches"]) == (1 if state == "8bfbb9ed1" else 2), (label, after[label])


@pytest.mark.parametrize("state", STATES)
def test_lost_parallelism(runs, state):
    """The refused kernels run unsplit on 40 programs of which only the x blocks find work:
    one for the [4096, 8] epilogues, four for the two-free-node [2048, 32] sum (the README's
    cost table); where the split was taken it had 40 working programs."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in NONLINEAR:
        assert after[label]["launches"] == [[40, 4 if label == "nested2+b" else 1]], (label, after[label])
        if "launches" in before[label] and len(before[label]["launches"]) == 2:
            assert before[label]["launches"][0] == [40, 40], (label, before[label])
