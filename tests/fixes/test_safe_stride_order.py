"""safe-stride-order: the rule, the probe at every genuine state and the fixed wheel, and a
dynamic-shape CPU compile with stock Inductor after the backend's activation, which stops
at the pre-fix state and, once repaired, runs like the reference state."""

from __future__ import annotations

import itertools

import pytest
import sympy

from npu_fixes.fixes.safe_stride_order import (
    divisibility_question,
    ge_or_false,
    has_negative_power,
    trigger_strides,
    unanswerable_question,
)
from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS, REFERENCE

NAME = "safe-stride-order"
DEFECTIVE = "8bfbb9ed1"
WHEEL = "2.13.0"

@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    """One interpreter per genuine state and for the fixed wheel. The program turns the FX
    graph cache off (every compile lowers); compiled C++ is shared through the session's
    Inductor cache."""
    env = {"NPU_FIXES": "0"}
    found = {s: run_program("safe_stride_order", "strides", env=env, location=genuine(s)) for s in COMMITS}
    found[WHEEL] = run_program("safe_stride_order", "strides", env=env, location=wheel_install(WHEEL))
    return found


# -- the rule ---------------------------------------------------------------------------
a, b = sympy.symbols("a b", integer=True, positive=True)
TERMS = [sympy.Integer(0), sympy.Integer(1), sympy.Integer(4), a, b, a * b, a + 1, a + b, b - 1,
         (a + 1) * (a + b), (a + 1) * (a + b) * (b - 1), b * (a + 1) * (b - 1), 2 * a]


def test_negative_powers_are_seen():
    assert has_negative_power(1 / a) and has_negative_power(sympy.Eq(a * sympy.Mod(b / (a + 1), 2), 0))
    assert has_negative_power(a ** -2 + b)
    for expr in (a, a * b, a / 2, sympy.sqrt(a), a ** 2, sympy.Eq(a, 0), 3, None):
        assert not has_negative_power(expr), expr


def test_the_trigger_strides_ask_an_unanswerable_question():
    assert has_negative_power(divisibility_question(*trigger_strides()))
    assert divisibility_question(a, 0) is None and divisibility_question(4, 0) is None


def test_rule_delegates_unless_the_question_has_negative_powers():
    def rule(left, right):
        return ("rule", left, right)

    for left, right in itertools.product(TERMS, TERMS):
        asked: list = []
        delegated = ge_or_false(left, right, lambda e, asked=asked: asked.append(e) or False, rule)
        if has_negative_power(divisibility_question(left, right)):
            assert delegated is False  # nothing known: the safe answer
            assert len(asked) == 3, (left, right)  # right == 0, left == 0, left >= right
            assert not any(has_negative_power(q) for q in asked)
        else:
            assert delegated == ("rule", left, right) and asked == []


def test_rule_answers_from_zero_and_order_checks_on_the_trigger():
    left, right = trigger_strides()

    def rule(*_):
        raise AssertionError("the divisibility question must not be asked")

    def knowing(fact):
        return lambda e: e == fact

    assert ge_or_false(left, right, knowing(sympy.Eq(right, 0)), rule) is True
    assert ge_or_false(left, right, knowing(sympy.Eq(left, 0)), rule) is False
    assert ge_or_false(left, right, knowing(sympy.Ge(left, right)), rule) is True
    assert ge_or_false(left, right, lambda e: False, rule) is False


def test_recording_stand_in_tells_stock_rule_from_safe_one():
    from torch._inductor.ir import Layout

    assert unanswerable_question(Layout._stride_expr_ge_or_false) is not None  # torch 2.13's own

    def safe(left, right):
        from torch._inductor.virtualized import V

        return ge_or_false(left, right, V.graph.sizevars.guard_or_false, Layout._stride_expr_ge_or_false)

    assert unanswerable_question(safe) is None

    def broken(left, right):
        raise ValueError("Exponent must be non-negative.")

    assert isinstance(unanswerable_question(broken), ValueError)


# -- probe verdicts ----------------------------------------------------------------------
def test_probe_needed_exactly_at_the_documented_states(runs):
    needed = {s for s in COMMITS if runs[s]["probe_before"][0]}
    assert needed == BEYOND[NAME] == {DEFECTIVE}
    assert runs[WHEEL]["probe_before"][0] is False
    for state, res in runs.items():
        defective, detail = res["probe_before"]
        assert res["stock_untouched_by_probe"], state
        if defective:
            assert "installs no safe one" in detail
        else:  # found by trying the backend's own installer on a scratch class
            assert "_install_safe_stride_order; tried on a scratch class" in detail, state
        # the backend's activation installs its own rule exactly where the probe says fixed
        assert res["activation_replaces_rule"] is not defective, state


@pytest.mark.parametrize("state", [s for s in (*COMMITS, WHEEL) if s != DEFECTIVE])
def test_fixed_states_are_left_identical(runs, state):
    res = runs[state]
    assert res["patched"] == 0 and res["probe_after"][0] is False
    assert res["battery_after"] == res["battery_before"]
    assert "e2e_after" not in res


def test_fixed_states_agree(runs):
    reference = runs[REFERENCE]
    for state in (*COMMITS, WHEEL):
        if state != DEFECTIVE:
            assert runs[state]["battery_before"] == reference["battery_before"], state
            assert runs[state]["e2e_before"] == reference["e2e_before"], state


# -- the repair at the defective state ------------------------------------------------------
def test_defective_state_compile_stops_before_and_matches_reference_after(runs):
    res, reference = runs[DEFECTIVE], runs[REFERENCE]["e2e_before"]
    assert "ValueRangeError" in res["e2e_before"]["error"]
    assert reference["same"] is True and reference["strides"] == reference["eager"] == [[324, 108, 9, 1]]
    assert res["e2e_after"] == reference


def test_defective_state_rule_matches_reference_after(runs):
    res, reference = runs[DEFECTIVE], runs[REFERENCE]["battery_before"]
    before, after = res["battery_before"], res["battery_after"]
    assert before.keys() == after.keys() == reference.keys()
    assert after == reference
    # only the shared-factor strides differ before the repair: stock torch raises there
    differing = {k for k in reference if before[k] != reference[k]}
    assert differing == {f"{kind}|{label}" for kind in ("backed", "unbacked")
                         for label in ("two-shared", "three-shared")}
    assert all(str(before[k]).startswith("raised ") and after[k] is False for k in differing)
    assert before["backed|quotient"] == reference["backed|quotient"] == "raised ValueRangeError"


def test_defective_state_repair_holds_and_is_undone(runs):
    res = runs[DEFECTIVE]
    assert res["patched"] == 2  # apply_npu_overrides and Layout's rule
    assert res["probe_after"][0] is False
    assert res["probe_replaced"] is True and res["guarded_after_reactivation"] == [True, False]
    assert res["restored"] == [True, True] and res["probe_end"] is True
