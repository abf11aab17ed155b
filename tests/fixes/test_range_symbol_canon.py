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
from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS

NAME = "range-symbol-canon"
FIXED_AT = "95c9094da"
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

OFF = {"NPU_FIXES": "0"}  # nothing armed: the program installs the fixes itself
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
    roots[WHEEL] = wheel_install("2.13.0")
    return {state: run_program("range_symbol_canon", "prepared", env=OFF, location=root)
            for state, root in roots.items()}


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
