"""min2-propagate-nan: every Triton ``min`` reduction fails to build.

- **Defect**: the backend's helper module replaces Inductor's ``triton_helpers.min2`` (the
  helper every generated ``min`` reduction calls) with ``tl.min(a, dim,
  propagate_nan=True)``. Triton's ``tl.min`` has no ``propagate_nan`` parameter (neither
  triton-ascend's nor stock Triton's; their ``tl.max`` differs), so the build of any kernel
  with an ``amin``/``min(dim)``/``min()`` stops with ``TypeError: min() got an unexpected
  keyword argument 'propagate_nan'``. Without the keyword ``tl.min`` would build but drop
  NaN.
- **Where**: ``npu_triton_helpers.min2``, and the ``min2`` of
  ``torch._inductor.runtime.triton_helpers`` that the module sets and kernels read.
- **Probe**: does ``min2`` reduce with ``tl.min`` while the live Triton's ``tl.min`` takes no
  ``propagate_nan``? (the helper's source against the live ``tl.min`` signature).
- **Fix**: both names get a ``min2`` of our own: ``tl.reduce`` over ``tl.minimum(a, b,
  PropagateNan.ALL)``, which builds with every Triton 3.x and keeps NaN (the result is NaN
  where the row holds one, as eager's ``amin``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
import types
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "min2"
HELPERS = "torch._inductor.runtime.triton_helpers"
#: How a helper body may name Triton's ``min``.
MIN_NAMES = ("tl.min", "triton.language.min", "core.min")

#: triton.language, bound by :func:`nan_min2` (the JIT functions below read it from here).
tl: Any = None


def _minimum_keeping_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


def _min2(a, dim):
    return tl.reduce(a, dim, _minimum_keeping_nan)


@functools.cache
def nan_min2() -> Any:
    """Our ``min2`` as a Triton JIT function (built once; Triton is imported by then)."""
    global tl, _minimum_keeping_nan
    import triton
    import triton.language

    tl = triton.language
    _minimum_keeping_nan = triton.jit(_minimum_keeping_nan)  # what _min2 calls
    return triton.jit(_min2)


def min_keywords(helper: Any) -> list[set[str]] | None:
    """The keywords of each ``tl.min`` call in ``helper``'s source (a JIT function or a plain
    one); None where the source cannot be read."""
    fn = getattr(helper, "fn", helper)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    return [{k.arg for k in node.keywords} for node in ast.walk(tree)
            if isinstance(node, ast.Call) and ast.unparse(node.func) in MIN_NAMES]


def min_takes_propagate_nan(triton_min: Any) -> bool:
    """Whether the live ``tl.min`` has a ``propagate_nan`` parameter."""
    params = inspect.signature(getattr(triton_min, "fn", triton_min)).parameters
    return "propagate_nan" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def reduces_wrongly(calls: list[set[str]] | None, min_takes_flag: bool) -> str | None:
    """The rule: what goes wrong with a helper whose ``tl.min`` calls have ``calls``'
    keywords, given the live ``tl.min`` (None: nothing)."""
    if not calls or min_takes_flag:
        return None
    if any("propagate_nan" in keywords for keywords in calls):
        return "tl.min(..., propagate_nan=...) fails to build: this Triton's tl.min has no such parameter"
    return "tl.min drops NaN: this Triton's tl.min cannot propagate it"


def probe(module: types.ModuleType) -> Probe:
    """The helper kernels read (and the module's own) against the live ``tl.min``."""
    import triton.language

    takes = min_takes_propagate_nan(triton.language.min)
    read_by_kernels = getattr(sys.modules.get(HELPERS), TARGET, None)
    for where, helper in ((HELPERS, read_by_kernels), (module.__name__, getattr(module, TARGET))):
        wrong = reduces_wrongly(min_keywords(helper), takes)
        if wrong:
            return Probe(True, f"{where}.min2: {wrong}")
    return Probe(False, "min2 reduces without tl.min, or tl.min takes propagate_nan")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    import torch._inductor.runtime.triton_helpers as helpers

    ours = nan_min2()
    patcher.replace(module, TARGET, ours)
    patcher.replace(helpers, TARGET, ours)


FIX = Fix(
    name="min2-propagate-nan",
    about=About(
        symptom=(
            "every `amin`/`min` reduction fails to build: `TypeError: min() got an unexpected keyword "
            "argument 'propagate_nan'`"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_helpers",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
