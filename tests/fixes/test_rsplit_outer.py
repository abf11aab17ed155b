"""rsplit-outer: the rule, the fixed wheels left alone, the pre-fix predicate repaired, and
the repaired genuine pre-fix state compared with the reference state case by case."""

from __future__ import annotations

import itertools
from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rsplit_outer import free_reduction_nodes, kernel_allows_split, live_outputs
from tests.conftest import FIXED_UPSTREAM, host_check, wheel_path
from tests.genuine_states import COMMITS, DEFECTS, REFERENCE

# Builds stand-in kernels over a grid of hints, reduction types, outputs, reduction-tree
# shapes and sizes, and asks the live predicate about each (gate on, 40 cores).
BATTERY = """
import itertools, os, sympy
from types import SimpleNamespace as NS
from unittest import mock
from torch._inductor.codegen.common import REMOVED, InplacedBuffer
from torch._inductor.sizevars import SizeVarAllocator
from torch._inductor.virtualized import V
from npu_fixes.fixes import rsplit_outer as fix
mod = mods["codegen.triton"]
H = mod.ReductionHint
inplace = InplacedBuffer("in_out_ptr0", ["buf2", "buf3"])
OUTPUTS = {
    "one": ({"buf1": "out_ptr0"}, {}),
    "two": ({"buf0": "out_ptr0", "buf1": "out_ptr1"}, {}),
    "none": ({}, {}),
    "one+removed": ({"buf0": REMOVED, "buf1": "out_ptr1"}, {}),
    "one+removed-name": ({"buf0": "REMOVED_out", "buf1": "out_ptr1"}, {}),
    "inplace": ({}, {"buf2": inplace, "buf3": inplace}),
    "one+inplace": ({"buf1": "out_ptr0"}, {"buf2": inplace, "buf3": inplace}),
    "one+inplace-removed": ({"buf1": "out_ptr0"}, {"buf2": REMOVED, "buf3": REMOVED}),
}
TREES = {  # reduction range-tree nodes (name, length) and the aliased names
    "flat": ([("r0_1", 2048)], {}),
    "nested": ([("r0_1", 2048), ("r0_2", 512), ("r0_3", 4)], {}),
    "nested-aliased": ([("r0_1", 2048), ("r0_2", 512), ("r0_3", 4)], {"r0_2": 0, "r0_3": 0}),
    "split": ([("r0_2", 512), ("r0_3", 4)], {}),
}
SIZES = {"bert": (768, 2048), "small-r": (768, 1024), "big-x": (20000, 1 << 20),
         "x>r": (4096, 2048), "scalar": (1, 4096)}

def kernel(hint, rtype, outputs, tree, size):
    red = NS(node=NS(data=NS(reduction_type=rtype)))
    xlen, rlen = SIZES[size]
    nodes, mapping = TREES[tree]
    out, inp = OUTPUTS[outputs]
    feats = NS(get_reduction_hint=lambda: getattr(H, hint), scheduler_nodes=lambda: [red],
               reduction_nodes=lambda: [red], reduction_numel=sympy.Integer(rlen))
    x = NS(is_reduction=False, is_loop=False, tree_node_mapping={},
           nodes={"x0": NS(name="x0", length=sympy.Integer(xlen))})
    r = NS(is_reduction=True, is_loop=False, tree_node_mapping=mapping,
           nodes={n: NS(name=n, length=sympy.Integer(l)) for n, l in nodes})
    return NS(inside_reduction=True, features=feats, range_trees=[x, r],
              args=NS(output_buffers=dict(out), inplace_buffers=dict(inp)))

CASES = list(itertools.product(["OUTER", "INNER", "DEFAULT"], ["sum", "max", "min", "prod", "argmax", "welford_reduce"],
                               OUTPUTS, TREES, SIZES))

def battery():
    cores = NS(get_npu_vector_core_count=lambda: 40)
    graph = NS(sizevars=SizeVarAllocator())
    with mock.patch.multiple(mod, npu_rsplit_outer=True, device_props=cores), V.set_graph_handler(graph):
        return {"|".join(c): bool(mod._npu_rsplit_outer_applicable(kernel(*c))) for c in CASES}

original = mod._npu_rsplit_outer_applicable
result["probe_before"] = fix.probe(mod).defective
result["before"] = battery()
import npu_fixes
del os.environ["NPU_FIXES"]
npu_fixes.apply()
result["state"] = {r.name: r.state.value for r in npu_fixes.status()}["rsplit-outer"]
result["identical"] = mod._npu_rsplit_outer_applicable is original
result["probe_after"] = fix.probe(mod).defective
result["after"] = battery()
result["undo"] = npu_fixes.undo()
result["restored"] = mod._npu_rsplit_outer_applicable is original
"""
OFF = {"NPU_FIXES": "0"}  # armed only by npu_fixes.apply() in the body, after the probe
SEED = "OUTER|sum|two|nested|bert"  # hf_Bert: 2048x768 pointwise + 1x768 reduction store


def free_nodes(case: str) -> int:
    return {"flat": 1, "nested": 3, "nested-aliased": 1, "split": 2}[case.split("|")[3]]


#: Genuine states: the only one with the defect, and the commit where upstream fixed it.
DEFECTIVE, UPSTREAM_FIX = "8bfbb9ed1", "95c9094da"

# Why the repaired DEFECTIVE state decides otherwise than REFERENCE; every other case agrees.
TREE = ("rsplit-tree: our OUTER rule also requires exactly one free reduction node (stricter); "
        "upstream instead skips nested-loop codegen for split kernels elsewhere")
NONSUM = "rsplit-nonsum: separate upstream fix in 95c9094da, not part of rsplit-outer"
INNER = ("rsplit-inner: 95c9094da also extended the split to INNER reductions (a feature); "
         "the pre-fix predicate never splits INNER and the repair only narrows it")
ONE_LIVE = ("one", "one+removed", "one+removed-name", "inplace", "one+inplace-removed")
SPLIT_SIZES = ("bert", "scalar")  # x <= 40 cores * 256, r >= 2048 and r >= x
NAMED_DIFFERENCES: dict[str, str] = {
    **{f"OUTER|sum|{o}|{t}|{s}": TREE
       for o in ONE_LIVE for t in ("nested", "split") for s in SPLIT_SIZES},
    **{f"OUTER|{r}|{o}|{t}|{s}": NONSUM for r in ("max", "min", "prod", "argmax")
       for o in ONE_LIVE for t in ("flat", "nested-aliased") for s in SPLIT_SIZES},
    **{f"INNER|sum|{o}|{t}|{s}": INNER
       for o in ONE_LIVE for t in ("flat", "nested", "nested-aliased", "split") for s in SPLIT_SIZES},
}


@pytest.fixture(scope="module")
def genuine_results(genuine) -> dict[str, dict]:
    """The battery at the defective state (before and after repair, one interpreter), at
    the commit that fixed it and at the reference state. rsplit-outer alone: its sibling for
    the reduction type (rsplit-nonsum, tests/fixes/test_rsplit_nonsum.py) is switched off,
    so the cases it repairs stay listed above."""
    env = {**OFF, "NPU_FIXES_DISABLE": "rsplit-nonsum"}
    return {s: host_check(genuine(s), BATTERY, env=env) for s in (DEFECTIVE, UPSTREAM_FIX, REFERENCE)}


@pytest.fixture(scope="module")
def fixed_results() -> dict[str, dict]:
    return {v: host_check(wheel_path(v), BATTERY, env=OFF) for v in FIXED_UPSTREAM}


@pytest.fixture(scope="module")
def prefix_result(prefix_copy) -> dict:
    return host_check(prefix_copy("rsplit-outer"), BATTERY, env=OFF)


# -- the rule ---------------------------------------------------------------------------
def test_live_outputs_counts_removed_and_inplace_once():
    from torch._inductor.codegen.common import REMOVED, InplacedBuffer

    shared = InplacedBuffer("in_out_ptr0", ["buf2", "buf3"])
    other = InplacedBuffer("in_out_ptr1", ["buf4", "buf5"])
    for outputs, inplace, expected in [
        ({}, {}, 0),
        ({"a": "out_ptr0"}, {}, 1),
        ({"a": "out_ptr0", "b": "out_ptr1"}, {}, 2),
        ({"a": REMOVED, "b": "out_ptr1"}, {}, 1),
        ({"a": "REMOVED", "b": "REMOVED"}, {}, 0),
        ({}, {"buf2": shared, "buf3": shared}, 1),
        ({}, {"buf2": shared, "buf3": shared, "buf4": other, "buf5": other}, 2),
        ({}, {"buf2": REMOVED, "buf3": shared}, 1),
        ({"a": "out_ptr0"}, {"buf2": shared, "buf3": shared}, 2),
        ({}, {"x": InplacedBuffer("in_out_ptr0", [])}, None),  # no names: cannot tell
        ({}, {"x": object()}, None),
    ]:
        assert live_outputs(NS(output_buffers=outputs, inplace_buffers=inplace)) == expected


def test_free_reduction_nodes_sweep():
    names = ["r0_1", "r0_2", "r0_3", "r0_4"]
    for n, k in itertools.product(range(1, 5), range(0, 5)):
        mapped = {name: 0 for name in names[:min(k, n)]}
        r = NS(is_reduction=True, nodes={x: None for x in names[:n]}, tree_node_mapping=mapped)
        x = NS(is_reduction=False, nodes={"x0": None, "x1": None}, tree_node_mapping={})
        assert free_reduction_nodes([x, r]) == n - len(mapped)
        assert free_reduction_nodes([x, r, r]) == 2 * (n - len(mapped))  # r0_ and r1_ trees
    assert free_reduction_nodes([NS(is_reduction=True, nodes={"r0_1": None})]) == 1


def test_kernel_that_cannot_be_read_is_rejected():
    module = NS(ReductionHint=NS(OUTER="outer"))
    assert kernel_allows_split(module, NS()) is False  # no features / args / range_trees
    broken = NS(features=NS(get_reduction_hint=lambda: 1 / 0))
    assert kernel_allows_split(module, broken) is False


# -- real upstream code ------------------------------------------------------------------
@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(fixed_results, version):
    res = fixed_results[version]
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["restored"] and res["undo"] == 0
    assert res["before"] == res["after"]
    assert res["after"][SEED] is False
    assert res["after"]["OUTER|sum|one|nested|bert"] is True  # the battery reaches acceptance


def test_fixed_wheels_agree(fixed_results):
    a, b = (fixed_results[v]["after"] for v in FIXED_UPSTREAM)
    assert a == b


def test_prefix_copy_is_detected_and_repaired(prefix_result):
    res = prefix_result
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["before"][SEED] is True and res["after"][SEED] is False  # the hf_Bert kernel
    assert res["undo"] >= 1 and res["restored"]


def test_prefix_repaired_matches_fixed_upstream(prefix_result, fixed_results):
    fixed = fixed_results["2.13.0"]["after"]
    before, after = prefix_result["before"], prefix_result["after"]
    assert before != fixed  # the battery does see the defect
    assert fixed.keys() == after.keys()
    stricter = 0
    for case, accepted in after.items():
        if case.startswith("OUTER|") and free_nodes(case) != 1:
            assert accepted is False, case  # our tree-shape rule, stricter than the wheel
            stricter += fixed[case]
        else:
            assert accepted is fixed[case], case
    assert stricter > 0  # e.g. OUTER|sum|one|nested|bert, accepted by the fixed wheel


# -- genuine states ------------------------------------------------------------------------
def test_genuine_states_are_the_documented_ones():
    assert [c for c in COMMITS if "rsplit-outer" in DEFECTS[c]] == [DEFECTIVE]
    assert COMMITS.index(DEFECTIVE) < COMMITS.index(UPSTREAM_FIX) <= COMMITS.index(REFERENCE)


def test_genuine_defective_state_is_detected_and_repaired(genuine_results):
    res = genuine_results[DEFECTIVE]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["before"][SEED] is True and res["after"][SEED] is False
    assert res["undo"] >= 1 and res["restored"]


@pytest.mark.parametrize("state", [UPSTREAM_FIX, REFERENCE])
def test_genuine_fixed_states_are_left_identical(genuine_results, state):
    res = genuine_results[state]
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["restored"] and res["probe_after"] is False
    assert res["before"] == res["after"]
    assert res["after"][SEED] is False
    assert res["after"]["OUTER|sum|one|nested|bert"] is True  # the battery reaches acceptance


def test_genuine_fixed_states_agree(genuine_results):
    assert genuine_results[UPSTREAM_FIX]["after"] == genuine_results[REFERENCE]["after"]


def test_genuine_repaired_matches_reference_except_named(genuine_results):
    """Every battery case decides as at REFERENCE, except exactly the named ones; only
    the reduction-type difference (a separate upstream fix) accepts more than REFERENCE."""
    before = genuine_results[DEFECTIVE]["before"]
    after, ref = genuine_results[DEFECTIVE]["after"], genuine_results[REFERENCE]["after"]
    assert after.keys() == ref.keys() >= NAMED_DIFFERENCES.keys()
    assert before != ref  # the battery does see the defect
    differing = {case for case in after if after[case] is not ref[case]}
    assert differing == NAMED_DIFFERENCES.keys()
    for case, reason in NAMED_DIFFERENCES.items():
        assert after[case] is (reason == NONSUM), (case, reason)  # NONSUM: we accept, REFERENCE not
        assert (free_nodes(case) != 1) is (reason == TREE) or reason == INNER, (case, reason)


def test_genuine_repair_on_reduction_types(genuine_results):
    """sum/max/min/prod/argmax: the repair decides alike for every type (it looks at outputs
    and tree shape only); REFERENCE splits sum alone. Welford is never split."""
    after, ref = genuine_results[DEFECTIVE]["after"], genuine_results[REFERENCE]["after"]

    def accepted(results, rtype):
        return {c.replace(f"|{rtype}|", "|*|") for c, ok in results.items() if ok and c.split("|")[1] == rtype}

    assert accepted(after, "sum")  # the battery reaches acceptance after repair
    for rtype in ("max", "min", "prod", "argmax"):
        assert accepted(after, rtype) == accepted(after, "sum"), rtype
        assert not accepted(ref, rtype), rtype
    assert not accepted(after, "welford_reduce") and not accepted(ref, "welford_reduce")
    assert accepted(after, "sum") < accepted(ref, "sum")
