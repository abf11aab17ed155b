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
from tests.conftest import host_check, wheel_path
from tests.genuine_states import BEYOND, COMMITS, REFERENCE

NAME = "safe-stride-order"
DEFECTIVE = "8bfbb9ed1"
WHEEL = "2.13.0"

# BATTERY: Layout._stride_expr_ge_or_false in force, on pairs of strides over a real
# ShapeEnv (backed sizes with hints, and unbacked ones); each answer or the exception type.
# E2E: torch.compile(dynamic=True) on CPU of a model that hands a [2, b-1, a+b, a+1] buffer
# to an op that needs its stride order fixed; the strides that op sees, compared with eager.
DEFINITIONS = """
import importlib, inspect, json
from types import SimpleNamespace as NS
import torch
from torch._dynamo.source import ConstantSource
from torch._inductor.ir import Layout
from torch._inductor.sizevars import SizeVarAllocator
from torch._inductor.virtualized import V
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from npu_fixes.fixes import safe_stride_order as fix
from npu_fixes.shim.patcher import Patcher
ov = importlib.import_module("torch_npu._inductor.triton_experimental.overrides")

def pairs(a, b):
    return {
        "two-shared": ((a + 1) * (a + b), (a + 1) * (a + b) * (b - 1)),
        "two-shared-rev": ((a + 1) * (a + b) * (b - 1), (a + 1) * (a + b)),
        "three-shared": (b * (a + 1) * (b - 1), (a + 1) * (a + b) * (b - 1)),
        "one-shared": (a + 1, (a + 1) * (a + b)),
        "monomial": (a, a * b), "monomial-rev": (a * b, a), "equal": (a * b, a * b),
        "unit": (1, a), "unit-rev": (a, 1), "zero-left": (0, a), "zero-right": (a, 0),
        "sum": (a, a + b), "sum-rev": (a + b, a), "quotient": (a / b, a),
        "ints": (4, 2), "ints-rev": (2, 4), "ints-odd": (6, 4),
    }

def battery():
    out = {}
    for kind in ("backed", "unbacked"):
        env = ShapeEnv()
        if kind == "backed":
            a, b = (env.create_symbol(h, ConstantSource(n), dynamic_dim=DimDynamic.DYNAMIC)
                    for n, h in (("a", 8), ("b", 4)))
        else:
            a, b = (env.create_unbacked_symint().node.expr for _ in range(2))
        with V.set_graph_handler(NS(sizevars=SizeVarAllocator(env))):
            for label, (left, right) in pairs(a, b).items():
                try:
                    out[f"{kind}|{label}"] = bool(Layout._stride_expr_ge_or_false(left, right))
                except Exception as exc:
                    out[f"{kind}|{label}"] = f"raised {type(exc).__name__}"
    return out

SEEN = []

@torch.library.custom_op("npu_fixes_test::fixed_order", mutates_args=(),
                         tags=(torch._C.Tag.needs_fixed_stride_order,))
def fixed_order(t: torch.Tensor) -> torch.Tensor:
    SEEN.append(list(t.stride()))
    return t.clone()

@fixed_order.register_fake
def _(t):
    return torch.empty_like(t)

def model(p, q):  # no cat: 8bfbb9ed1's own cat lowering emits an op CPU code lacks
    r = torch.nn.functional.pad(p, (0, q.shape[0]))  # a + b
    pp = torch.nn.functional.pad(p, (0, 1))          # a + 1
    qq = q[1:]                                       # b - 1
    two = torch.arange(2.0)
    t = two[:, None, None, None] + qq[None, :, None, None] * r[None, None, :, None] * pp[None, None, None, :]
    return fixed_order(t).sum()

def e2e():
    torch._dynamo.reset()
    SEEN.clear()
    p, q = torch.arange(8.0) / 8, torch.arange(4.0) / 4 + 1
    try:
        got = torch.compile(model, dynamic=True)(p, q)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    compiled = SEEN[:]
    want = model(p, q)
    return {"same": bool(torch.allclose(got, want)), "strides": compiled, "eager": SEEN[len(compiled):]}
"""

# At each state: the probe before activation; activation as the backend does it; the
# battery and the compile; then the fix installed as the registry decides (only where its
# probe says needed, here after activation: npu_fixes imported late), probed, battery and
# compile again; activation once more through the wrapper; everything undone.
BODY = DEFINITIONS + """
stock = inspect.getattr_static(Layout, fix.RULE)
activation = inspect.getattr_static(ov, fix.TARGET)
first = fix.probe(ov)
result["probe_before"] = [first.defective, first.detail]
result["stock_untouched_by_probe"] = inspect.getattr_static(Layout, fix.RULE) is stock
ov.apply_npu_overrides()
result["activation_replaces_rule"] = inspect.getattr_static(Layout, fix.RULE) is not stock
result["battery_before"] = battery()
result["e2e_before"] = e2e()
patcher = Patcher()
if first.defective:
    fix.FIX.install(ov, patcher)
result["patched"] = len(patcher)
after = fix.probe(ov)
result["probe_after"] = [after.defective, after.detail]
result["battery_after"] = battery()
if len(patcher):
    result["e2e_after"] = e2e()
    setattr(Layout, fix.RULE, stock)  # as if an override had put torch's rule back
    result["probe_replaced"] = fix.probe(ov).defective
    ov.apply_npu_overrides()  # activation again, through the wrapper: guarded again
    result["guarded_after_reactivation"] = [patcher.is_wrapped(Layout, fix.RULE), fix.probe(ov).defective]
    patcher.restore()
    result["restored"] = [inspect.getattr_static(Layout, fix.RULE) is stock,
                          inspect.getattr_static(ov, fix.TARGET) is activation]
    result["probe_end"] = fix.probe(ov).defective
"""


@pytest.fixture(scope="module")
def runs(genuine, tmp_path_factory) -> dict[str, dict]:
    """One interpreter per genuine state and for the fixed wheel. The FX graph cache is
    off (every compile lowers); compiled C++ is shared between them."""
    env = {"NPU_FIXES": "0", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("inductor-cache"))}
    found = {s: host_check(genuine(s), BODY, env=env) for s in COMMITS}
    found[WHEEL] = host_check(wheel_path(WHEEL), BODY, env=env)
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
