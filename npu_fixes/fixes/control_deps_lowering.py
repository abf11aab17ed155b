"""control-deps-lowering: ``control_deps`` keeps Inductor's own lowering.

- **Defect**: the backend's registration turns every lowering that is neither generated
  nor a decomposition into a generic eager fallback, ``control_deps`` included. That
  higher-order op carries a ``Subgraph`` argument which only its own lowering understands,
  so compilation stops with ``LoweringException: AttributeError: 'Subgraph' object has no
  attribute 'dtype'`` (``target: control_deps``). PyTorch 2.13 inserts ``control_deps``
  whenever ``torch._inductor.config.fallback_random`` is on and a graph holds two or more
  random ops (BERT/DeBERTa training graphs with dropout under an accuracy harness), and
  distributed overlap passes insert it too.
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the ``control_deps`` entry it
  leaves in Inductor's ``lowerings`` table).
- **Probe**: does the registration replace the ``control_deps`` lowering? (run the live
  registration on a scratch table that holds a stand-in ``control_deps`` lowering, fallback
  creation recorded, not run; see whether the stand-in survives).
- **Fix**: after each registration, the ``control_deps`` entry it replaced gets back the
  lowering it had before; where the backend registered before npu_fixes was armed, the
  entry gets Inductor's own ``control_deps`` lowering again. Every other entry is left
  as registered. The registration's own records of the fallback (its ``FALLBACK_LIST``
  entry, and ``control_deps`` in Inductor's ``needs_realized_inputs``, a realization
  hint) stay: neither changes how ``control_deps`` is lowered.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, MutableMapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

REGISTER = "_register_npu_inductor_fallbacks"
#: Name of Inductor's own ``control_deps`` lowering in ``torch._inductor.lowering``.
INDUCTOR_LOWERING = "control_deps_op_lowering"


def control_deps_op() -> Any:
    """The ``control_deps`` higher-order op, or None where this torch has none."""
    try:
        from torch._inductor.fx_passes.control_dependencies import control_deps
    except ImportError:
        return None
    return control_deps


def inductor_lowering(name: str = INDUCTOR_LOWERING) -> Callable[..., Any] | None:
    """Inductor's own lowering called ``name`` in ``torch._inductor.lowering`` (what its
    table holds before any backend); by default ``control_deps``'."""
    from torch._inductor import lowering

    found = vars(lowering).get(name)
    return found if callable(found) else None


def entry_to_keep(before: Any, after: Any) -> Any:
    """The rule: the ``control_deps`` lowering that must stand once a registration ran.

    ``before`` / ``after``: the table's entry before and after it (None: absent). A
    registration may not replace an existing lowering; it may add one where none was.
    """
    return after if before is None or after is before else before


def keep_entry(table: MutableMapping[Any, Any], op: Any, before: Any,
               patcher: Patcher | None = None) -> bool:
    """Put back ``op``'s entry in ``table`` where the rule says so; return whether it did.

    With a ``patcher`` the change is undone by ``npu_fixes.undo()``.
    """
    current = table.get(op)
    keep = entry_to_keep(before, current)
    if keep is current:
        return False
    if patcher is None:
        table[op] = keep
    else:
        patcher.set_item(table, op, keep)
    return True


def registration_keeps(module: types.ModuleType, op: Any) -> tuple[bool, bool]:
    """Run the live registration on a scoped scratch table holding only a stand-in lowering
    of ``op`` (fallback creation recorded, not run; the module's own table and lists
    untouched): whether the stand-in is still there after it, and whether the
    registration made ``op`` a fallback on the way."""

    def stand_in(*args: Any, **kwargs: Any) -> None:
        return None

    def generic_fallback(*args: Any, **kwargs: Any) -> None:
        return None

    scratch: dict[Any, Any] = {op: stand_in}
    made: list[Any] = []

    def record_fallback(target: Any, *args: Any, **kwargs: Any) -> None:
        made.append(target)
        if target in scratch:
            scratch[target] = generic_fallback

    overrides: dict[str, Any] = {"lowerings": scratch, "make_fallback": record_fallback,
                                 "FALLBACK_LIST": []}
    if hasattr(module, "EXPLICIT_FALLBACK_LIST"):  # only some states have it
        overrides["EXPLICIT_FALLBACK_LIST"] = []
    with_globals(inspect.getattr_static(module, REGISTER), overrides)()
    return scratch[op] is stand_in, op in made


def registration_probe(module: types.ModuleType, op: Any, label: str, consequence: str) -> Probe:
    """Does the live registration keep ``op``'s lowering (see :func:`registration_keeps`)?
    ``label`` (possessive) names the op in the detail, ``consequence`` says what a fallback breaks."""
    kept, made = registration_keeps(module, op)
    if kept:
        how = "made it a fallback, then put it back" if made else "left it alone"
        return Probe(False, f"the registration keeps {label} own lowering ({how})")
    return Probe(True, f"the registration replaces {label} lowering with a generic fallback: {consequence}")


def probe(module: types.ModuleType) -> Probe:
    op = control_deps_op()
    if op is None:
        return Probe(False, "this torch has no control_deps op: nothing to replace")
    return registration_probe(module, op, "control_deps'", "lowering it fails on its Subgraph argument")


def keep_through_registration(module: types.ModuleType, patcher: Patcher, op: Any, own: str) -> None:
    """Wrap the registration so that ``op``'s entry survives each run of it; where it ran
    before (``op`` in its ``FALLBACK_LIST``), put Inductor's lowering called ``own`` back."""
    def after_register(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        table = wrapped.__globals__["lowerings"]  # the table this registration fills
        before = table.get(op)
        result = wrapped(*args, **kwargs)
        keep_entry(table, op, before, patcher if table is vars(module).get("lowerings") else None)
        return result

    patcher.wrap_path(module, REGISTER, after_register)
    if op in module.FALLBACK_LIST:  # registered before npu_fixes was armed
        lowering = inductor_lowering(own)
        if lowering is None:
            raise RuntimeError(f"torch._inductor.lowering has no {own} to put back")
        if module.lowerings.get(op) is not lowering:
            patcher.set_item(module.lowerings, op, lowering)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    keep_through_registration(module, patcher, control_deps_op(), INDUCTOR_LOWERING)


FIX = Fix(
    name="control-deps-lowering",
    about=About(
        symptom=(
            "`LoweringException: AttributeError: 'Subgraph' object has no attribute 'dtype'` (target "
            "`control_deps`: `fallback_random=True` and two or more random ops)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="`torch._inductor.config.fallback_random = False`",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
