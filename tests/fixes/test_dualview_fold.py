"""dualview-fold: the rule, the fixed wheels left alone, and the pre-fix fold repaired."""

from __future__ import annotations

import itertools
import random

import pytest
import sympy
from torch._inductor.utils import sympy_index_symbol

from npu_fixes.fixes.dualview_fold import lookalikes, registered_symbols, reregister
from tests.conftest import FIXED_UPSTREAM, run_program, wheel_install
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE, WITHOUT_UNFIXED

FIX = "dualview-fold"
#: Genuine pre-fix states with this fix's defect.
DEFECTIVE = tuple(state for state in PRE_FIX if FIX in DEFECTS[state])

OFF = {"NPU_FIXES": "0"}  # armed only by npu_fixes.apply() in the program, after the probe
GOOD_SEED = {"name": "r0_1", "equal": True, "hash": True, "lookup": True,
             "integer": True, "nonnegative": True}


@pytest.fixture(scope="module")
def fixed_results() -> dict[str, dict]:
    env = {**OFF, **WITHOUT_UNFIXED}  # the wheels' unfixed defects: their own tests
    return {v: run_program("dualview_fold", "folds", env=env, location=wheel_install(v)) for v in FIXED_UPSTREAM}


@pytest.fixture(scope="module")
def prefix_result(prefix_copy) -> dict:
    return run_program("dualview_fold", "folds", env=OFF, location=prefix_copy("dualview-fold"))


@pytest.fixture(scope="module")
def genuine_results(genuine) -> dict[str, dict]:
    """The battery (and the seed through prepare_indexing) at each genuine state with the
    defect, before and after npu_fixes applies (one interpreter per state), and at
    REFERENCE, where it must stay unrepaired."""
    alone = {**OFF, "NPU_FIXES_DISABLE": "dualview-fold-definition"}  # its own layer on the same fold
    return {state: run_program("dualview_fold", "folds", env=alone, location=genuine(state), prepare=True)
            for state in (*DEFECTIVE, REFERENCE)}


#: Battery cases where a repaired state's fold differs from REFERENCE's. None: at every
#: pre-fix state ``_fold_dualview_reduction_index`` differs from 5ff81d9c5's only in the
#: defect (``sympy.Symbol(inner.name)`` where 5ff81d9c5 has ``inner.symbol()``).
DIFFERS_FROM_REFERENCE: dict[str, str] = {}

#: States whose ``prepare_indexing`` canonicalises range symbols by name right after the
#: fold (``_canonicalize_range_symbols``, from 95c9094da on): there codegen never sees the
#: fold's plain symbol, so users do not hit "Unregistered range symbol" although the fold
#: itself (what the probe tests) is still defective.
HIDDEN_BY_CANONICALISATION = {"95c9094da", "f8802037a"}


# -- the rule ---------------------------------------------------------------------------
class _Node:
    def __init__(self, name: str) -> None:
        self.name = name

    def symbol(self) -> sympy.Symbol:
        return sympy_index_symbol(self.name)


def _registered(*names: str) -> dict[str, sympy.Symbol]:
    class Tree:
        nodes = {n: _Node(n) for n in names}

    return registered_symbols([Tree()])


def test_registered_symbols_are_index_symbols():
    reg = _registered("r0_1", "x0")
    assert reg == {"r0_1": sympy_index_symbol("r0_1"), "x0": sympy_index_symbol("x0")}
    assert all(s.is_integer and s.is_nonnegative for s in reg.values())


def test_new_lookalike_is_replaced_and_input_symbols_kept():
    reg = _registered("r0_1", "r0_2")
    plain, r2 = sympy.Symbol("r0_1"), reg["r0_2"]
    fixed = reregister(plain + 4 * r2, {r2}, reg)
    assert fixed == reg["r0_1"] + 4 * r2
    assert lookalikes(plain, set(), reg) == {plain: reg["r0_1"]}
    assert reregister(plain + r2, {plain, r2}, reg) == plain + r2  # was in the input: left alone
    other = sympy.Symbol("tmp0")
    assert reregister(other, set(), reg) is other  # unknown names are not touched
    assert reregister(reg["r0_1"], set(), reg) is reg["r0_1"]  # already registered


@pytest.mark.parametrize("seed", range(5))
def test_reregister_property_sweep(seed):
    rng = random.Random(seed)
    names = [f"r0_{i}" for i in range(1, 6)] + ["x0", "x1"]
    reg = _registered(*names[:-1])  # x1 is not a range-tree node
    for _ in range(40):
        picked = rng.sample(names, rng.randint(1, len(names)))
        flavours = {n: rng.choice([sympy.Symbol(n), sympy.Symbol(n, integer=True),
                                   sympy_index_symbol(n)]) for n in picked}
        expr = sum(rng.randint(1, 9) * s ** rng.randint(1, 2) for s in flavours.values())
        before = {s for s in flavours.values() if rng.random() < 0.3}
        out = reregister(expr, before, reg)
        assert str(out) == str(expr)  # same printed address
        assert not lookalikes(out, before, reg)  # nothing left to repair
        assert reregister(out, before, reg) == out  # idempotent
        for sym in out.free_symbols:
            if sym in before or sym.name not in reg:
                assert sym in expr.free_symbols  # input and foreign symbols unchanged
            else:
                assert sym == reg[sym.name]


def test_swap_sweep_over_assumption_flavours():
    reg = _registered("r0_1")
    for kwargs in itertools.product(*[(None, True, False)] * 2):
        assumptions = {k: v for k, v in zip(("integer", "nonnegative"), kwargs, strict=True) if v is not None}
        expr = sympy.Symbol("r0_1", **assumptions) + 1
        swapped = reregister(expr, set(), reg)
        assert swapped == reg["r0_1"] + 1
        if expr == swapped:
            assert swapped is expr  # nothing to repair: the very same object comes back


# -- real upstream code ------------------------------------------------------------------
@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(fixed_results, version):
    res = fixed_results[version]
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["restored"] and res["undo"] == 0
    assert res["before"] == res["after"]
    assert res["after"]["seed"] == GOOD_SEED


def test_fixed_wheels_agree(fixed_results):
    a, b = (fixed_results[v]["after"] for v in FIXED_UPSTREAM)
    assert a == b


def test_prefix_copy_is_detected_and_repaired(prefix_result):
    res = prefix_result
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["before"]["seed"]["equal"] is False  # "Unregistered range symbol: r0_1"
    assert res["before"]["seed"]["lookup"] is False
    assert res["after"]["seed"] == GOOD_SEED
    assert res["undo"] >= 1 and res["restored"]


def test_prefix_repaired_matches_fixed_upstream(prefix_result, fixed_results):
    fixed = fixed_results["2.13.0"]["after"]
    before, after = prefix_result["before"], prefix_result["after"]
    assert after == fixed
    changed = {case for case in fixed if before[case] != fixed[case]}
    assert {"distilbert", "with-x", "deep", "two-trees"} <= changed
    assert "flat-present" not in changed and "plain-in-input" not in changed


# -- genuine states: the code our users run ----------------------------------------------
REGISTERED_SEED = {"canonicalises": True, "index": "Symbol('r0_1', integer=True, nonnegative=True)",
                   "registered": True, "block_shape": []}


def test_reference_state_is_left_identical(genuine_results, fixed_results):
    res = genuine_results[REFERENCE]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] and res["restored"]
    assert res["before"] == res["after"] == fixed_results["2.13.0"]["after"]
    assert res["after"]["seed"] == GOOD_SEED
    assert res["prepare_before"] == res["prepare_after"] == REGISTERED_SEED


@pytest.mark.parametrize("state", DEFECTIVE)
def test_genuine_state_is_repaired_to_reference(genuine_results, state):
    res, reference = genuine_results[state], genuine_results[REFERENCE]["after"]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["undo"] >= 1 and res["restored"]
    before, after = res["before"], res["after"]
    assert before.keys() == after.keys() == reference.keys()
    assert {case for case in reference if after[case] != reference[case]} == DIFFERS_FROM_REFERENCE.keys()
    assert after["seed"] == GOOD_SEED
    # the defect at this state: the fold itself yields an unregistered r0_1
    assert before["seed"]["equal"] is False and before["seed"]["lookup"] is False
    changed = {case for case in reference if before[case] != reference[case]}
    assert {"distilbert", "with-x", "deep", "two-trees", "seed"} <= changed
    assert not changed & {"flat-present", "plain-in-input", "outside-reduction", "constant"}


@pytest.mark.parametrize("state", DEFECTIVE)
def test_prepare_indexing_shows_the_defect_only_without_canonicalisation(genuine_results, state):
    """What a user's codegen sees: before 95c9094da the fold's plain r0_1 reaches
    get_block_shape ("Unregistered range symbol: r0_1", the hf_DistilBert failure); from
    95c9094da on prepare_indexing re-registers it by name right after the fold, hiding the
    defect. With the repair the seed is registered at every state."""
    res = genuine_results[state]
    hidden = state in HIDDEN_BY_CANONICALISATION
    assert res["prepare_before"]["canonicalises"] is hidden
    if hidden:
        assert res["prepare_before"] == REGISTERED_SEED
    else:
        assert res["prepare_before"] == {"canonicalises": False, "index": "Symbol('r0_1')",
                                         "registered": False, "block_shape": "Unregistered range symbol: r0_1"}
    assert res["prepare_after"] == {**REGISTERED_SEED, "canonicalises": hidden}
