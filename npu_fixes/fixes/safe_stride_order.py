"""safe-stride-order: stride-order checks no longer ask a divisibility question that
symbolic shapes cannot answer.

- **Defect**: Inductor's ``Layout._stride_expr_ge_or_false`` (PyTorch 2.13) ends by asking
  ``guard_or_false(Eq(left % right, 0))``. When two dynamic strides share two or more
  non-monomial factors, e.g. ``(s0+1)*(s0+s1)`` and ``(s0+1)*(s0+s1)*(s1-1)``, sympy divides
  both by their expanded gcd and the question holds negative powers; the shape
  environment's range analysis then raises and the compile stops:
  ``LoweringException: ValueRangeError: Invalid ranges [0:-1]`` (backed sizes) or
  ``ValueError: Exponent must be non-negative.`` (unbacked). It happens wherever a
  fixed-stride-order consumer checks such a buffer (a ``needs_fixed_stride_order`` op, a
  forced stride order) under ``dynamic=True``. The backend does not replace the rule.
- **Where**: ``overrides.apply_npu_overrides`` (the activation step that should install a
  replacement) and, through it, ``torch._inductor.ir.Layout._stride_expr_ge_or_false``.
- **Probe**: does the activation leave a rule in force that asks such a question? (the rule
  in force, or the one ``apply_npu_overrides`` would install, tried on a scratch class, run
  on the strides above against a recording stand-in for ``guard_or_false``).
- **Fix**: ``Layout._stride_expr_ge_or_false`` is wrapped at once, and wrapped again after
  an ``apply_npu_overrides`` call that put another rule there: when the divisibility
  question would hold negative powers, the answer comes from the zero and ``>=`` checks
  alone, and is False where they do not decide (``False`` is the rule's safe answer: the
  layout is then treated as not ordered and Inductor fixes the order itself). Every other
  call goes to the rule unchanged. Nothing is done where the backend installs its own safe
  rule. Strides that are themselves quotients of sizes (``s0/s1``) still fail, earlier, at
  the ``>=`` check, as they do with upstream's rule.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

TARGET = "apply_npu_overrides"
RULE = "_stride_expr_ge_or_false"


# -- the rule ----------------------------------------------------------------------------
def has_negative_power(expr: Any) -> bool:
    """Whether a sympy expression holds a power with a negative integer exponent."""
    import sympy

    if not isinstance(expr, sympy.Basic):
        return False
    return any(
        isinstance(node, sympy.Pow) and node.exp.is_integer and node.exp.is_negative
        for node in sympy.preorder_traversal(expr)
    )


def divisibility_question(left: Any, right: Any) -> Any:
    """``Eq(left % right, 0)`` as Inductor's rule forms it; None where it cannot be formed."""
    import sympy

    try:
        return sympy.Eq(left % right, 0)
    except Exception:  # noqa: BLE001 - e.g. modulo by zero: the rule itself decides first
        return None


def ge_or_false(
    left: Any, right: Any, known: Callable[[Any], bool], rule: Callable[[Any, Any], bool]
) -> bool:
    """The corrected decision: ``rule(left, right)`` unless its divisibility question would
    hold negative powers; then ``right == 0``, else ``left != 0 and left >= right`` as far
    as ``known`` (``guard_or_false``) can tell, and False otherwise."""
    if not has_negative_power(divisibility_question(left, right)):
        return rule(left, right)
    import sympy

    if known(sympy.Eq(right, 0)):
        return True
    if known(sympy.Eq(left, 0)):
        return False
    return bool(known(sympy.Ge(left, right)))


def _operands(left: Any, right: Any) -> tuple[Any, Any]:
    return left, right


def _guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> bool:
    from torch._inductor.virtualized import V

    left, right = _operands(*args, **kwargs)
    return ge_or_false(left, right, V.graph.sizevars.guard_or_false, wrapped)


def guard_layout(patcher: Patcher) -> Any:
    """Wrap ``Layout._stride_expr_ge_or_false`` with the corrected decision (once); return
    wrapt's handle."""
    from torch._inductor.ir import Layout

    return patcher.wrap(Layout, RULE, _guard)


def _guarded_by(handle: Any) -> bool:
    """Whether ``handle`` still wraps the rule in force (under any wrappers added since)."""
    import wrapt
    from torch._inductor.ir import Layout

    current = inspect.getattr_static(Layout, RULE, None)
    return current is not None and wrapt.is_wrapped_by(current, handle)


# -- probe -------------------------------------------------------------------------------
class _RecordingSizeVars:
    """Stand-in for ``V.graph.sizevars``: records every question, can decide none."""

    def __init__(self) -> None:
        self.questions: list[Any] = []

    def guard_or_false(self, expr: Any) -> bool:
        self.questions.append(expr)
        return False


def trigger_strides() -> tuple[Any, Any]:
    """Two strides of a contiguous ``[n, s1-1, s0+s1, s0+1]`` buffer whose divisibility
    question holds negative powers."""
    import sympy

    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    return (s0 + 1) * (s0 + s1), (s0 + 1) * (s0 + s1) * (s1 - 1)


def unanswerable_question(rule: Callable[[Any, Any], Any]) -> Any:
    """Run ``rule`` on :func:`trigger_strides` against the recording stand-in; return the
    first question it asks that holds negative powers (None: it asks none). A rule that
    raises counts as asking (its exception is returned)."""
    from torch._inductor.virtualized import V

    sizevars = _RecordingSizeVars()
    with V.set_graph_handler(types.SimpleNamespace(sizevars=sizevars)):  # type: ignore[arg-type]
        try:
            rule(*trigger_strides())
        except Exception as exc:  # noqa: BLE001 - a rule that cannot answer is unsafe
            return exc
    return next((q for q in sizevars.questions if has_negative_power(q)), None)


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _installers(module: types.ModuleType) -> Iterator[tuple[str, types.FunctionType]]:
    """Functions that ``apply_npu_overrides`` calls by name and that set a stride rule on a
    global ``Layout``."""
    activation = inspect.unwrap(inspect.getattr_static(module, TARGET))
    code = getattr(activation, "__code__", None)
    if code is None:
        return
    for name in dict.fromkeys(code.co_names):
        candidate = vars(module).get(name)
        if isinstance(candidate, types.FunctionType) and "Layout" in candidate.__code__.co_names \
                and RULE in set(_names(candidate.__code__)):
            yield name, candidate


def _installed_rule(installer: types.FunctionType) -> Callable[[Any, Any], Any] | None:
    """Run ``installer`` with its global ``Layout`` replaced by a scratch class; return the
    rule it leaves there (None if it raises or leaves none)."""
    from torch._inductor.ir import Layout

    scratch = type("Layout", (), {RULE: inspect.getattr_static(Layout, RULE)})
    before = vars(scratch)[RULE]
    try:
        with_globals(installer, {"Layout": scratch})()
    except Exception:  # noqa: BLE001 - not an installer we understand
        return None
    if vars(scratch)[RULE] is before:
        return None
    return getattr(scratch, RULE)


def probe(module: types.ModuleType) -> Probe:
    """Try the rule in force; where it asks an unanswerable question, try the rule that
    ``apply_npu_overrides`` would install (on a scratch class, nothing global touched)."""
    from torch._inductor.ir import Layout

    in_force = getattr(Layout, RULE, None)
    if in_force is None:
        return Probe(False, f"torch's Layout has no {RULE}: nothing to guard")
    asked = unanswerable_question(in_force)
    if asked is None:
        return Probe(False, f"Layout.{RULE} in force asks no question with negative powers")
    try:
        installers = list(_installers(module))
    except Exception as exc:  # noqa: BLE001 - an activation we cannot read is left alone
        return Probe(False, f"cannot read what {TARGET} calls ({type(exc).__name__}): left alone")
    for name, installer in installers:
        rule = _installed_rule(installer)
        if rule is not None and unanswerable_question(rule) is None:
            return Probe(False, f"{TARGET} installs a safe Layout.{RULE} ({name}; tried on a scratch class)")
    what = (f"raises {type(asked).__name__}" if isinstance(asked, Exception)
            else "asks a divisibility question with negative powers")
    return Probe(True, f"Layout.{RULE} in force {what} and {TARGET} installs no safe one")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    handle = [guard_layout(patcher)]  # at once: the backend may already be active

    def then_guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if not _guarded_by(handle[0]):  # an override run put another rule there
            handle[0] = guard_layout(patcher)
        return result

    patcher.wrap_path(module, TARGET, then_guard)


FIX = Fix(
    name="safe-stride-order",
    about=About(
        symptom=(
            "dynamic-shape compile stops: `LoweringException: ValueRangeError: Invalid ranges [0:-1]` (a "
            "stride-order query with negative powers)"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="compile with static shapes (`dynamic=False`)",
    ),
    module="torch_npu._inductor.triton_experimental.overrides",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
