"""range-symbol-canon: the rule, and the live ``prepare_indexing`` at every genuine state
and the 2.13.0 wheel before and after the repair (at 8bfbb9ed1 also stacked with
dualview-fold), compared case by case with 95c9094da, where upstream fixed it."""

from __future__ import annotations

import fnmatch
import itertools
import random

import pytest
import sympy
from torch._inductor.utils import sympy_index_symbol

from npu_fixes.fixes.range_symbol_canon import canonical, lookalikes
from tests.conftest import host_check, wheel_path
from tests.genuine_states import BEYOND, COMMITS

NAME = "range-symbol-canon"
FIXED_AT = "95c9094da"
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

# The whole live ``NPUTritonKernel.prepare_indexing`` of each state on stand-in kernels:
# Inductor's base preparation and every NPU pass run for real. A pointwise kernel whose x
# tree maps the fused node x3 to plain-symbol x5 + 64*x6 (as _apply_linearize maps it), and
# the hf_DistilBert dual-view reduction kernel (r0_1 = r0_2 + 512*r0_3). Each case records
# the result as srepr (which spells out symbol assumptions), its range-named symbols that
# are not range_tree_nodes keys, and TritonSymbols.get_block_shape of it, where codegen
# meets them ("Unregistered range symbol").
BATTERY = """
import sympy
from types import SimpleNamespace as NS
from unittest import mock
from torch._inductor.codegen.triton import TritonSymbols
from torch._inductor.sizevars import SizeVarAllocator
from torch._inductor.virtualized import V
from torch._inductor.utils import sympy_index_symbol as isym
from torch.utils._sympy.functions import FloorDiv, ModularIndexing
from npu_fixes.fixes import range_symbol_canon as fix
from npu_fixes.fixes import dualview_fold
from npu_fixes.shim.patcher import Patcher
mod = mods["codegen.triton"]
K = mod.NPUTritonKernel
TARGETS = ("_refactor_clamp_stride", "_fold_trivial_modular_indexing", "_fold_dualview_reduction_index")
originals = {name: vars(K)[name] for name in TARGETS}
P = sympy.Symbol  # a plain look-alike

def blocks(k, ndim):  # what get_block_shape and the index folds ask of the kernel and its trees
    for tree in k.range_trees:
        tree.root, tree.block_size = tree, (lambda p=tree.prefix: p.upper() + "BLOCK")
        tree.index_sym = lambda p=tree.prefix: isym(p + "index")
    k.triton_tensor_ndim = lambda: ndim
    return k

def fused():
    return blocks(fix.fused_kernel(mod), 1)

def dualview():
    nodes = [fix._Node("r0_1", 1, 2048), fix._Node("r0_2", 1, 512), fix._Node("r0_3", 512, 4),
             fix._Node("x0", 1, 768)]
    red = NS(prefix="r0_", is_reduction=True, is_loop=False, tensor_dim=1, numel=sympy.Integer(2048),
             nodes={n.name: n for n in nodes[:3]}, var_list=[n.symbol() for n in nodes[:3]],
             var_ranges={n.symbol(): n.length for n in nodes[:3]}, tree_node_mapping={})
    xt = NS(prefix="x", is_reduction=False, is_loop=False, tensor_dim=0, numel=sympy.Integer(768),
            nodes={"x0": nodes[3]}, var_list=[nodes[3].symbol()], var_ranges={nodes[3].symbol(): nodes[3].length},
            tree_node_mapping={})
    for n in nodes[:3]:
        n.root = red
    nodes[3].root = xt
    k = object.__new__(K)
    k.range_trees, k.range_tree_nodes = [xt, red], {n.symbol(): n for n in nodes}
    k.inside_reduction, k._axis_split_subs, k.simplify_indexing = True, {}, (lambda e: e)
    return blocks(k, 2)

x3, x5, x6, r1, r2, r3, x0 = (isym(n) for n in ("x3", "x5", "x6", "r0_1", "r0_2", "r0_3", "x0"))
I1 = sympy.Integer(1)
CASES = {
    "fused-mod64": (fused, ModularIndexing(x3, I1, sympy.Integer(64))),
    "fused-mod128": (fused, ModularIndexing(x3, I1, sympy.Integer(128))),
    "fused-mod64+x6": (fused, ModularIndexing(x3, I1, sympy.Integer(64)) + x6),
    "fused-div64": (fused, FloorDiv(x3, sympy.Integer(64))),
    "plain-mapping": (fused, P("x5") + 64 * P("x6")),
    "plain-x5": (fused, P("x5")),
    "plain-x5-integer": (fused, P("x5", integer=True) + 2),
    "plain-mod": (fused, ModularIndexing(P("x6"), I1, sympy.Integer(16)) + x5),
    "registered": (fused, x5 + 64 * x6),
    "registered-mod": (fused, ModularIndexing(x6, I1, sympy.Integer(16)) + x5),
    "foreign-plain": (fused, P("x9") + P("s0") + x5),
    "constant": (fused, sympy.Integer(7)),
    "dualview": (dualview, r2 + 512 * r3),
    "dualview+x": (dualview, r2 + 512 * r3 + 2048 * x0),
    "dualview-plain-input": (dualview, P("r0_2") + 512 * r3),
}

def run(make, index):
    k = make()
    graph = NS(sizevars=SizeVarAllocator())
    with V.set_graph_handler(graph), V.set_kernel_handler(k):
        try:
            out = k.prepare_indexing(index)
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"
        unregistered = sorted(s.name for s in out.free_symbols
                              if s.name[0] in "xyzr" and k.range_tree_nodes.get(s) is None)
        try:
            shape = [str(d) for d in TritonSymbols.get_block_shape(out)]
        except Exception as exc:  # names one of them, in set order: keep the words only
            shape = f"{type(exc).__name__}: {str(exc).partition(':')[0]}"
    return [sympy.srepr(out), unregistered, shape]

def battery():
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for label, (make, index) in CASES.items():
                def made(make=make):
                    k = make()
                    k._npu_linearize = lin
                    return k
                out[f"lin={lin}|{label}"] = run(made, index)
    with mock.patch.object(mod, "npu_refactor_clamp_stride", True):  # the other tail pass on
        out["clamp-stride-on|fused-mod64"] = run(fused, CASES["fused-mod64"][1])
    return out

def ours():
    return {name: vars(K)[name] is not originals[name] for name in TARGETS}

probe = fix.probe(mod)
result["probe_before"] = [probe.defective, probe.detail]
result["before"] = battery()
patcher = Patcher()
if probe.defective:  # as the registry does: a fixed state is never patched
    fix.FIX.install(mod, patcher)
result["patched"] = ours()
probe = fix.probe(mod)
result["probe_after"] = [probe.defective, probe.detail]
result["after"] = battery()
# dualview-fold on top, where its probe asks for it (the two fixes stack)
other = Patcher()
if dualview_fold.FIX.probe(mod).defective:
    dualview_fold.FIX.install(mod, other)
    result["both"] = battery()
    result["both_probes"] = [fix.probe(mod).defective, dualview_fold.FIX.probe(mod).defective]
other.restore()
patcher.restore()
result["restored"] = not any(ours().values())
"""

OFF = {"NPU_FIXES": "0"}  # nothing armed: the body installs the fixes itself
SEED = "lin=True|fused-mod64"

#: Cases where a repaired state differs from FIXED_AT, by pattern, with the reason.
DIFFERS = {
    "lin=False|plain-*": (
        "linearize off: the fixed release canonicalises only in linearize mode, where the "
        "look-alikes come from; the repair also swaps a look-alike that reaches the tail "
        "passes with linearize off (none is made there), which would otherwise fail in "
        "codegen as 'Unregistered range symbol'"),
    "lin=False|dualview-plain-input": "the same, for a plain r0_2 in the input",
}


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    """One interpreter per state: probe, battery, install where the probe says so, probe
    again, battery again (and with dualview-fold stacked where that one is needed)."""
    roots = {state: genuine(state) for state in COMMITS}
    roots[WHEEL] = wheel_path("2.13.0")
    return {state: host_check(root, BATTERY, env=OFF) for state, root in roots.items()}


def listed(patterns, cases) -> set[str]:
    """The cases matched by ``patterns``; each pattern must match at least one case."""
    found = {p: {k for k in cases if fnmatch.fnmatchcase(k, p)} for p in patterns}
    assert all(found.values()), [p for p, ks in found.items() if not ks]
    return set().union(*found.values())


# -- the rule ------------------------------------------------------------------------------
def _registered(*names: str) -> list[sympy.Symbol]:
    return [sympy_index_symbol(n) for n in names]


def test_lookalikes_are_swapped_for_the_registered_symbol():
    reg = _registered("x5", "x6", "r0_1")
    x5, x6 = reg[0], reg[1]
    plain = sympy.Symbol("x5")
    assert lookalikes(plain + x6, reg) == {plain: x5}
    assert canonical(plain + 64 * x6, reg) == x5 + 64 * x6
    expr = x5 + sympy.Symbol("tmp0") + sympy.Symbol("x9")
    assert canonical(expr, reg) is expr  # registered and foreign symbols: the same object
    assert canonical(7, reg) == 7 and canonical(sympy.Integer(7), reg) == 7
    assert lookalikes("x5", reg) == {}


@pytest.mark.parametrize("seed", range(4))
def test_canonical_property_sweep(seed):
    rng = random.Random(seed)
    names = ["x0", "x1", "x5", "r0_1", "r0_2", "y0"]
    reg = _registered(*names[:-1])  # y0 is not a range-tree node here
    by_name = {s.name: s for s in reg}
    for _ in range(40):
        picked = rng.sample(names, rng.randint(1, len(names)))
        flavours = [rng.choice([sympy.Symbol(n), sympy.Symbol(n, integer=True),
                                sympy.Symbol(n, nonnegative=True), sympy_index_symbol(n)]) for n in picked]
        expr = sum(rng.randint(1, 9) * s ** rng.randint(1, 2) for s in flavours)
        out = canonical(expr, reg)
        assert str(out) == str(expr)  # the same printed address
        assert not lookalikes(out, reg) and canonical(out, reg) == out  # nothing left; idempotent
        for sym in out.free_symbols:
            assert sym == by_name[sym.name] if sym.name in by_name else sym in expr.free_symbols


def test_flavours_of_one_name():
    reg = _registered("r0_1")
    for integer, nonnegative in itertools.product((None, True, False), repeat=2):
        assumptions = {k: v for k, v in (("integer", integer), ("nonnegative", nonnegative)) if v is not None}
        sym = sympy.Symbol("r0_1", **assumptions)
        assert canonical(sym + 1, reg) == reg[0] + 1


# -- the live target at every state ----------------------------------------------------------
@pytest.mark.parametrize("state", STATES)
def test_probe_and_repair(runs, state):
    res = runs[state]
    defective = state in BEYOND[NAME]
    assert res["probe_before"][0] is defective, res["probe_before"]
    assert res["probe_after"][0] is False, res["probe_after"]
    patched = {"_refactor_clamp_stride": defective, "_fold_trivial_modular_indexing": defective,
               "_fold_dualview_reduction_index": False}
    assert res["patched"] == patched and res["restored"] is True
    if not defective:
        assert res["after"] == res["before"]


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_behaves_like_the_fixed_state(runs, state):
    res, reference = runs[state], runs[FIXED_AT]["after"]
    before, after = res["before"], res["after"]
    assert before.keys() == after.keys() == reference.keys()
    differing = {k for k in reference if after[k] != reference[k]}
    assert differing == listed(DIFFERS, reference), sorted(differing)
    # the seed: x3 % 64 folds through the plain mapping to an unregistered x5, which the
    # trivial-modulo fold cannot see and codegen rejects
    assert before[SEED] == ["ModularIndexing(Symbol('x5'), Integer(1), Integer(64))", ["x5"],
                            "AssertionError: Unregistered range symbol"]
    assert after[SEED] == ["Symbol('x5', integer=True, nonnegative=True)", [], ["XBLOCK"]]
    # the tail fold must see the registered symbol: canonicalising only the result of
    # prepare_indexing would leave ModularIndexing(x5, 1, 64) + x6 here
    assert after["lin=True|fused-mod64+x6"][0] == (
        "Add(Symbol('x5', integer=True, nonnegative=True), Symbol('x6', integer=True, nonnegative=True))")
    changed = {k for k in reference if before[k] != after[k]}
    assert {"lin=True|fused-mod64", "lin=True|plain-mapping", "lin=True|dualview"} <= changed
    assert not changed & {"lin=True|registered", "lin=True|registered-mod", "lin=True|constant"}
    # stacked with dualview-fold: the same behaviour, and both probes satisfied
    assert res["both"] == after and res["both_probes"] == [False, False]


def test_wheel_agrees_with_the_fixed_state(runs):
    assert runs[WHEEL]["before"] == runs[FIXED_AT]["before"]
