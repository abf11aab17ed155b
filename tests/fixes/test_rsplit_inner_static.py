"""rsplit-inner-static: the rule, then INNER sums compiled through every genuine state and
both published wheels, their kernels run in Triton's interpreter with the backend's own
launcher grid, against eager (tests/programs/rsplit_split.py)."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace as NS

import pytest
import sympy

from npu_fixes.fixes.rsplit_inner_static import kernel_allows_split, split_allowed
from tests.conftest import FIXED_UPSTREAM, PINNED, run_at_states
from tests.genuine_states import BEYOND, COMMITS, UNFIXED

NAME = "rsplit-inner-static"
STATES = (*COMMITS, *FIXED_UPSTREAM)
#: INNER sums over two free static reduction nodes (per-head sums of [batch, seq, heads,
#: dim]), and the error each stops with where the defect is.
STATIC = {"inner-heads": "r0_2numel", "inner-heads-mean": "r0_3numel", "inner-heads-merged": "r0_[23]numel"}
#: The sequence length dynamic: one node symbolic, which the split takes (kept), and the
#: same with real-block promotion off (the split takes none: an undefined node name).
DYNAMIC, NO_REAL_BLOCK = "inner-heads-seq-dynamic", "inner-heads-seq-dynamic-no-real-block"
#: One flat node: split from 95c9094da, with or without npu_fixes.
ROWS = "inner-rows"


def test_split_allowed_table():
    for upstream, inner, free, splittable, real_block in itertools.product(
            (True, False), (True, False), (1, 2, 3), (True, False), (True, False)):
        want = upstream and (not inner or free == 1 or (splittable and real_block))
        assert split_allowed(upstream, inner, free, splittable, real_block) is want


def _kernel(hint, lengths, mapped=()):
    nodes = {f"r0_{i}": NS(length=length) for i, length in enumerate(lengths, 1)}
    tree = NS(is_reduction=True, nodes=nodes, tree_node_mapping=dict.fromkeys(mapped))
    return NS(features=NS(get_reduction_hint=lambda: hint), range_trees=[NS(is_reduction=False, nodes={}), tree])


def test_kernel_rule_reads_hint_tree_cores_and_setting():
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    def module(real_block=True):
        return NS(ReductionHint=NS(OUTER="outer", INNER="inner"), ncfg=NS(rtree_real_block=real_block),
                  device_props=NS(get_npu_vector_core_count=lambda: 40))

    seq = sympy.Symbol("s27", positive=True, integer=True)
    sizevars = SizeVarAllocator()
    sizevars.shape_env.backed_var_to_val[seq] = sympy.Integer(256)
    with V.set_graph_handler(NS(sizevars=sizevars)):
        assert kernel_allows_split(module(), _kernel("inner", [4096])) is True
        assert kernel_allows_split(module(), _kernel("inner", [4096, 64, 64], mapped=["r0_1"])) is False
        assert kernel_allows_split(module(), _kernel("inner", [32, seq])) is True  # upstream's pick takes it
        assert kernel_allows_split(module(real_block=False), _kernel("inner", [32, seq])) is False
        assert kernel_allows_split(module(), _kernel("inner", [32, 8 * seq / 256])) is False  # hint 8 < 40
        assert kernel_allows_split(module(), _kernel("outer", [64, 64])) is True  # OUTER: rsplit-nested-range
    assert kernel_allows_split(module(), NS()) is False  # cannot be read: no split


# -- genuine states and the published wheels ----------------------------------------------
@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "rsplit_split", "battery",
                         labels=[*STATIC, DYNAMIC, NO_REAL_BLOCK, ROWS])


def test_the_defect_is_at_every_state_from_95c9094da_and_in_the_wheels():
    assert BEYOND[NAME] == set(COMMITS) - {"8bfbb9ed1"} and NAME in UNFIXED


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state(runs, state):
    needed = state in BEYOND[NAME] or state in PINNED
    assert runs[state]["probes"][NAME] is needed
    assert runs[state]["states"][NAME] == ("applied" if needed else "not-needed")


@pytest.mark.parametrize("state", STATES)
def test_static_per_head_sums_stop_without_and_are_right_unsplit_with(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label, name in STATIC.items():
        if state == "8bfbb9ed1":  # no INNER split there: built unsplit and right
            assert before[label]["equal"] is True and len(before[label]["launches"]) == 1, before[label]
        else:
            assert re.fullmatch(fr"NameError: name '{name}' is not defined", before[label]["error"]), \
                (label, before[label])
        assert after[label]["equal"] is True, (label, after[label])
        assert len(after[label]["launches"]) == 1, (label, after[label])  # unsplit: no combine kernel


@pytest.mark.parametrize("state", STATES)
def test_symbolic_node_keeps_the_split(runs, state):
    """With the sequence length dynamic the split takes the symbolic node, as upstream
    means it to, and npu_fixes leaves it: the same launches, right before and after."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in (DYNAMIC, ROWS):
        assert before[label]["equal"] is True and after[label]["equal"] is True, (label, before, after)
        assert after[label]["launches"] == before[label]["launches"]
        assert len(after[label]["launches"]) == (1 if state == "8bfbb9ed1" else 2), after[label]


@pytest.mark.parametrize("state", STATES)
def test_without_real_block_promotion(runs, state):
    """``rtree_real_block=False`` (the workaround the backend's own notes name for promoted
    trees): the split takes no node and the kernel names an undefined one; npu_fixes keeps
    it unsplit, which is right at every commit. The wheels' unsplit kernel for this setting
    stops on a defect of its own (also with the split switched off), named here."""
    before, after = runs[state]["before"][NO_REAL_BLOCK], runs[state]["after"][NO_REAL_BLOCK]
    if state == "8bfbb9ed1":
        assert before["equal"] is True and after == before
    elif state in PINNED:
        assert before["error"] == "NameError: name 'r0_3' is not defined", before
        assert after["error"] == "AttributeError: 'int' object has no attribute 'to'", after
    else:
        assert before["error"] == "NameError: name 'r0_2' is not defined", before
        assert after["equal"] is True and len(after["launches"]) == 1, after
