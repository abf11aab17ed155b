"""Fallback registration: probe whether the backend's fallback registration replaces an op's
own lowering in Inductor's ``lowerings`` table, and keep that lowering through each run of
the registration (control-deps-lowering, local-scalar-dense-lowering, view-lowerings)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from ...shim.fix import Probe
from ...shim.patcher import Patcher
from ...shim.scoped import with_globals

REGISTER = "_register_npu_inductor_fallbacks"
#: Name of Inductor's own ``control_deps`` lowering in ``torch._inductor.lowering``.
INDUCTOR_LOWERING = "control_deps_op_lowering"


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


def keep_through_registration(module: types.ModuleType, patcher: Patcher, ops: Mapping[Any, str]) -> None:
    """Wrap the registration so that each op's entry of ``ops`` survives each run of it; where
    it ran before (the op in its ``FALLBACK_LIST``), put back Inductor's lowering that ``ops``
    names for the op."""
    def after_register(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        table = wrapped.__globals__["lowerings"]  # the table this registration fills
        before = {op: table.get(op) for op in ops}
        result = wrapped(*args, **kwargs)
        for op, entry in before.items():
            keep_entry(table, op, entry, patcher if table is vars(module).get("lowerings") else None)
        return result

    patcher.wrap_path(module, REGISTER, after_register)
    for op, own in ops.items():
        if op in module.FALLBACK_LIST:  # registered before npu_fixes was armed
            lowering = inductor_lowering(own)
            if lowering is None:
                raise RuntimeError(f"torch._inductor.lowering has no {own} to put back")
            if module.lowerings.get(op) is not lowering:
                patcher.set_item(module.lowerings, op, lowering)
