"""masked-index-zerodiv: codegen stops with ``ZeroDivisionError`` on a masked load whose
address divides by a size symbol.

- **Defect**: for a load under a computed mask (``slice_scatter``, pads and other masked
  bodies) the backend asks ``_masked_index_needs_nonnegative_clamp`` whether the address
  can be negative at its origin. It finds out by putting 0 in for every free symbol, size
  symbols included, so an address with ``FloorDiv`` or ``ModularIndexing`` by a size
  symbol (dynamic shapes over a reshaped view) divides by zero and the compile stops:
  ``InductorError: ZeroDivisionError: integer modulo by zero``.
- **Where**: ``codegen.triton._masked_index_needs_nonnegative_clamp``.
- **Probe**: does the function raise for the address ``ModularIndexing(x0 - 1, 1, ks0)``
  under a ``tmp`` mask?
- **Fix**: where the function raises ``ZeroDivisionError``, the answer is "clamp": the
  origin cannot be judged, and such an address can be negative on a masked-off lane
  (Triton's ``%`` keeps the sign of ``x0 - 1``). The clamp moves only addresses below
  zero, which no lane that loads has, so values are unchanged. The published wheel answers
  "no clamp" there; every other answer and error passes unchanged.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "_masked_index_needs_nonnegative_clamp"


def probe_indexing(module: types.ModuleType) -> Any:
    """A load of ``ModularIndexing(x0 - 1, 1, ks0)`` under mask ``tmp0``, in the module's
    own ``IndexingOptions``."""
    import sympy
    from torch.utils._ordered_set import OrderedSet
    from torch.utils._sympy.functions import ModularIndexing

    x0 = sympy.Symbol("x0", integer=True, nonnegative=True)
    ks0 = sympy.Symbol("ks0", integer=True, positive=True)
    index = ModularIndexing(x0 - 1, 1, ks0)
    return module.IndexingOptions(str(index), OrderedSet(["xmask", "tmp0"]), "[XBLOCK]", False, index, None)


def probe(module: types.ModuleType) -> Probe:
    """What the live function answers for :func:`probe_indexing`."""
    indexing = probe_indexing(module)
    try:
        answer = getattr(module, TARGET)(indexing)
    except ZeroDivisionError as exc:
        return Probe(True, f"{TARGET}({indexing.index}) under a tmp mask raises ZeroDivisionError: {exc}")
    return Probe(False, f"{TARGET}({indexing.index}) under a tmp mask returns {answer!r}")


def clamp_on_zero_division(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """The rule: an address that divides by a size symbol at its origin is clamped."""
    try:
        return wrapped(*args, **kwargs)
    except ZeroDivisionError:
        return True


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, clamp_on_zero_division)


FIX = Fix(
    name="masked-index-zerodiv",
    about=About(
        symptom=(
            "dynamic-shape compile stops: `ZeroDivisionError: integer modulo by zero` (a masked load whose "
            "address takes `%` or `//` by a size)"
        ),
        present=EVERY_COMMIT - {"8bfbb9ed1"},
        fixed_in=WHEEL,
        workaround="compile with static shapes (`dynamic=False`)",
        absent=frozenset({"8bfbb9ed1"}),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("indexing",)},
)
