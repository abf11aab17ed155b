"""minmax-propagate-nan: elementwise ``minimum``/``maximum`` drop NaN in generated kernels.

- **Defect**: the backend's kernel overrides emit ``tl.minimum(a, b)`` and
  ``tl.maximum(a, b)``. Triton's default for these is ``PropagateNan.NONE``: they lower to
  ``arith.minnumf``/``arith.maxnumf``, which return the other operand when one is NaN.
  Inductor lowers ``relu``, ``clamp``, ``hardtanh``, ``torch.minimum``/``maximum`` and
  the accumulation of looped ``amax``/``amin`` reductions (NPU reductions loop) through
  these two ops, so ``relu(NaN)`` gives 0, ``clamp(NaN, a, b)`` a bound and a NaN in a
  long row vanishes from its max: a diverging run looks healthy.
- **Where**: ``codegen.triton.NPUTritonKernelOverrides.minimum`` and ``.maximum``.
- **Probe**: do the overrides emit the two-operand form? (the live overrides' text for
  operands ``a``, ``b``).
- **Fix**: where an override emits exactly ``tl.minimum(a, b)`` / ``tl.maximum(a, b)``,
  the NaN-propagating form ``tl.minimum(a, b, tl.PropagateNan.ALL)`` is emitted instead
  (``arith.minimumf``/``arith.maximumf``); any other text passes unchanged. Integer
  operands are unaffected (Triton ignores the flag for them).
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

OWNER = "NPUTritonKernelOverrides"
OPS = ("minimum", "maximum")
TARGETS = tuple(f"{OWNER}.{op}" for op in OPS)


def drops_nan(text: str, op: str) -> bool:
    """Whether ``text`` is a call ``tl.<op>(x, y)`` left at Triton's default
    (``PropagateNan.NONE``): two operands, no ``propagate_nan``."""
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return (isinstance(call, ast.Call) and ast.unparse(call.func) == f"tl.{op}"
            and len(call.args) == 2 and not call.keywords)


def propagating(text: str, op: str, a: Any, b: Any) -> str:
    """The rule: the NaN-propagating call where ``text`` is exactly the two-operand
    ``tl.<op>(a, b)``; any other text unchanged."""
    if text == f"tl.{op}({a}, {b})":
        return f"tl.{op}({a}, {b}, tl.PropagateNan.ALL)"
    return text


def probe(module: types.ModuleType) -> Probe:
    """What the live overrides emit for operands ``a`` and ``b``."""
    owner = getattr(module, OWNER)
    emitted = {op: str(getattr(owner, op)("a", "b")) for op in OPS}
    dropping = [op for op in OPS if drops_nan(emitted[op], op)]
    shown = "; ".join(emitted.values())
    if dropping:
        lowered = "/".join(f"arith.{op[:3]}numf" for op in dropping)
        return Probe(True, f"overrides emit {shown}: Triton's default drops NaN ({lowered})")
    return Probe(False, f"overrides emit {shown}")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    for op, target in zip(OPS, TARGETS, strict=True):
        def emit(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, op: str = op) -> Any:
            text = wrapped(*args, **kwargs)
            if len(args) != 2 or kwargs or not isinstance(text, str):
                return text
            return propagating(text, op, *args)

        patcher.wrap_path(module, target, emit)


FIX = Fix(
    name="minmax-propagate-nan",
    about=About(
        symptom=(
            "NaN silently dropped: `relu(NaN)` gives 0, `clamp` a bound, `maximum`/`minimum` the other "
            "operand; looped `amax`/`amin` lose a NaN"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=TARGETS,
    probe=probe,
    install=install,
    signatures={target: ("a", "b") for target in TARGETS},
)
