"""rank-mismatch: the rule, and the live ``triton_tensor_ndim`` with the shape helpers that
read it, at every genuine state and the 2.13.0 wheel before and after the repair, compared
case by case with f8802037a (the first state here after upstream's fix, 22fb7f528)."""

from __future__ import annotations

import fnmatch
import itertools
import re
from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rank_mismatch import counted_nodes, folded_x_trees
from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS

NAME = "rank-mismatch"
FIXED_AT = "f8802037a"
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

OFF = {"NPU_FIXES": "0"}  # nothing armed: the program installs this fix alone
SEED = "lin=True|applied=True|no-y|x=mapped|r|inside=True|no_x_dim=False|permuted=False"
#: The x trees the defect concerns: a slot, and every node folded away (or none at all).
FOLDED = ("mapped", "mapped2", "odometer", "mapped+odometer", "no-nodes")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    """One interpreter per state: probe, battery, install where the probe says so,
    probe again, battery again."""
    roots = {state: genuine(state) for state in COMMITS}
    roots[WHEEL] = wheel_install("2.13.0")
    return {state: run_program("rank_mismatch", "ndim", env=OFF, location=root, genuine=state != WHEEL)
            for state, root in roots.items()}


# -- the rule ------------------------------------------------------------------------------
def _tree(names, mapped=(), odometer=None, dim=0, reduction=False):
    tree = NS(nodes={n: NS(name=n) for n in names}, tree_node_mapping=dict.fromkeys(mapped),
              tensor_dim=dim, is_reduction=reduction)
    if odometer is not None:
        tree._npu_scalar_odometer = set(odometer)
    return tree


def test_counted_nodes_skip_mapped_and_odometer_nodes():
    assert counted_nodes(_tree(["x0", "x1", "x2"], ["x0"], ["x2"])) == 1
    assert counted_nodes(_tree(["x0"], odometer=None)) == 1  # trees without the attribute
    assert counted_nodes(_tree([], odometer=set())) == 0
    bare = NS(nodes={"x0": NS(name="x0")})  # no mapping and no odometer attributes at all
    assert counted_nodes(bare) == 1


def test_folded_x_trees_sweep():
    names = ["x0", "x1", "x2"]
    for k, dim, reduction in itertools.product(range(4), (0, None), (False, True)):
        for mapped in itertools.combinations(names[:k], min(k, 2)):
            odometer = [n for n in names[:k] if n not in mapped]
            tree = _tree(names[:k], mapped, odometer[:1], dim, reduction)
            free = k - len(mapped) - len(odometer[:1])
            expected = int(dim is not None and not reduction and free == 0)
            assert folded_x_trees([tree]) == expected, (k, mapped, dim, reduction)
    trees = [_tree(["x0"], ["x0"]), _tree(["y0"], odometer=["y0"]), _tree(["x1"]), _tree([], dim=None),
             _tree(["r0_0"], ["r0_0"], reduction=True)]
    assert folded_x_trees(trees) == 2


# -- the live target at every state ----------------------------------------------------------
@pytest.mark.parametrize("state", STATES)
def test_probe_and_repair(runs, state):
    res = runs[state]
    defective = state in BEYOND[NAME]
    assert res["probe_before"][0] is defective, res["probe_before"]
    assert res["probe_after"][0] is False, res["probe_after"]
    assert res["patched"] is defective and res["restored"] is True
    if not defective:
        assert res["after"] == res["before"]


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_behaves_like_the_fixed_state(runs, state):
    before, after, reference = runs[state]["before"], runs[state]["after"], runs[FIXED_AT]["after"]
    assert len(reference) > 1000 and before.keys() == after.keys() == reference.keys()
    assert not [k for k in reference if after[k] != reference[k]]
    # the reported kernel: one slot short, the accumulator resized to rank one
    assert before[SEED] == [1, "[R0_BLOCK]", "triton_helpers.promote_to_tensor(tmp3)"]
    assert after[SEED] == [2, "[R0_BLOCK, 1]", "tmp3[:, None]"]
    assert before["through-class"] == 1 and after["through-class"] == 2
    # only linearized kernels with a slotted x tree whose nodes are all folded away change
    repaired = {k for k in reference if before[k] != after[k]} - {"through-class"}
    assert repaired and all(fnmatch.fnmatchcase(k, "lin=True|applied=True|*") for k in repaired)
    assert all(k.split("|")[3].removeprefix("x=") in FOLDED or k.split("|")[2] == "y-mapped"
               for k in repaired)


# -- end to end: generated kernels -------------------------------------------------------------
#: What the repair cannot remove (see the catalogue): the store re-rank fixup of
#: _apply_linearize, deleted upstream, turns the kept-2-D scalar store target
#: ``.broadcast_to(XBLOCK, 1)`` into ``.broadcast_to(1, 1)`` (the value's rank; both build).
STORE_FIXUP = (".broadcast_to(1, 1)", ".broadcast_to(XBLOCK, 1)")
SHAPED = re.compile(r"^\s*_?tmp\d+ = tl\.(full|broadcast_to|sum)\(.*$", re.M)
STORE_INDEX = re.compile(r"tl\.full\(\[[^\]]*\], 0, tl\.int32\)\.broadcast_to\([^)]*\)")


def kernels(res: dict, stage: str) -> dict[str, list[dict]]:
    return {label: case["kernels"] for label, case in res["codegen"][stage].items()}


@pytest.mark.parametrize("state", COMMITS)
def test_generated_kernels_build(runs, state):
    """Every program's kernels build (Triton IR) after the repair at every genuine state;
    at 8bfbb9ed1 the keepdim sum that adds a scalar read fails before it."""
    res = runs[state]
    after = kernels(res, "after")
    assert all(k["ir"] == "builds" for ks in after.values() for k in ks), after
    if state not in BEYOND[NAME]:
        assert res["codegen"]["after"] == res["codegen"]["before"]
    if state == "8bfbb9ed1":
        (before,) = kernels(res, "before")["keepdim-sum+scalar"]
        assert before["ir"].startswith("fails: Cannot broadcast, rank mismatch")


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_generated_kernels_match_the_fixed_state(runs, state):
    """The repaired kernels' shaped statements (accumulator, broadcasts, reduction) equal
    f8802037a's, and so does the scalar store index but for the listed fixup. At
    95c9094da the whole kernel then equals f8802037a's; 8bfbb9ed1 lacks the cross-core
    split that 95c9094da added, so only those statements compare there."""
    before, after, reference = (kernels(runs[s], st) for s, st in
                                ((state, "before"), (state, "after"), (FIXED_AT, "after")))
    for label, ref_kernels in reference.items():
        (ref,), (got,), (old,) = ref_kernels, after[label], before[label]
        assert "tl.full([R0_BLOCK], 0" in old["body"]  # the collapsed rank-one accumulator
        assert SHAPED.findall(got["body"]) and [m.group(0).strip() for m in SHAPED.finditer(got["body"])] == \
            [m.group(0).strip() for m in SHAPED.finditer(ref["body"])], label
        fixed_up = STORE_INDEX.findall(got["body"])
        assert fixed_up and all(STORE_FIXUP[0] in index for index in fixed_up)
        assert [i.replace(*STORE_FIXUP) for i in fixed_up] == STORE_INDEX.findall(ref["body"])
        if state == "95c9094da":
            assert got["body"].replace(*STORE_FIXUP) == ref["body"]


def test_wheel_agrees_with_the_fixed_state(runs):
    assert runs[WHEEL]["before"] == runs[FIXED_AT]["before"]
