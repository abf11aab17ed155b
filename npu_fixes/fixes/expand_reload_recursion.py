"""expand-reload-recursion: once the backend's ``lowering`` module runs a second time
(``importlib.reload``), every ``expand`` recurses until ``RecursionError``.

- **Defect**: the module binds ``_orig_expand`` with ``from torch._inductor.lowering import
  expand as _orig_expand``, defines ``npu_expand`` on top of it and then sets
  ``torch._inductor.lowering.expand = npu_expand``. Run again, the import binds
  ``_orig_expand`` to the first run's ``npu_expand``, which reads the same module global:
  it calls itself. Every graph with an ``expand`` (broadcasts, attention masks) stops with
  ``LoweringException: RecursionError: maximum recursion depth exceeded``.
- **Where**: ``lowering._orig_expand``.
- **Probe**: is the module's last binding of ``_orig_expand`` that import while
  ``torch._inductor.lowering.expand`` is the module's own function? (the module's source and
  the live objects; after a reload, the live ``_orig_expand`` being the module's own
  function).
- **Fix**: Inductor's own ``expand``, remembered while the module still holds it, is put
  back as ``_orig_expand`` behind a pass-through wrapper of ours. A reload rebinds the name
  and runs the registry again on the fresh code, which puts it back again; that is why the
  wrapper in place counts as repaired. Where Inductor's ``expand`` was never seen (npu_fixes
  first imported after a reload) the fix fails and says so.
"""

from __future__ import annotations

import ast
import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "_orig_expand"
INDUCTOR = "torch._inductor.lowering"
#: Backend lowering module -> Inductor's ``expand`` as that module bound it first.
_INDUCTOR_EXPAND: weakref.WeakKeyDictionary[types.ModuleType, Any] = weakref.WeakKeyDictionary()


def own(module: types.ModuleType, func: Any) -> bool:
    """Whether ``func`` is a function defined by ``module`` itself."""
    return getattr(inspect.unwrap(func), "__globals__", None) is vars(module)


def rebinds_from_inductor(source: str) -> bool:
    """Whether the module-level binding of ``_orig_expand`` that runs last is the import of
    Inductor's ``expand``: what a re-run of the module would bind."""
    last = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and any(a.asname == TARGET for a in node.names):
            names = {a.name for a in node.names if a.asname == TARGET}
            last = node.module == INDUCTOR and names == {"expand"}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == TARGET for t in targets):
                last = False
    return bool(last)


def _passes_through(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return wrapped(*args, **kwargs)


def ours(func: Any) -> bool:
    """Whether ``func`` is the pass-through wrapper :func:`install` puts in place."""
    return getattr(func, "_self_wrapper", None) is _passes_through


def inductor_expand(module: types.ModuleType) -> Any:
    """Inductor's ``expand`` for ``module``: the live ``_orig_expand`` (inside our wrapper)
    where it is not the module's own (remembered then), else what was remembered; None if
    never seen."""
    current = getattr(module, TARGET)
    if ours(current):
        current = current.__wrapped__
    if not own(module, current):
        _INDUCTOR_EXPAND[module] = current
    return _INDUCTOR_EXPAND.get(module)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    import wrapt

    expand = inductor_expand(module)
    if expand is None:
        raise RuntimeError(f"{INDUCTOR}.expand was never seen by npu_fixes before the module ran again: "
                           "import npu_fixes before reloading the backend")
    patcher.replace(module, TARGET, wrapt.FunctionWrapper(expand, _passes_through))


def probe(module: types.ModuleType) -> Probe:
    """Is ``_orig_expand`` the module's own function now, or would a re-run make it so (and
    no wrapper of ours stands there)?"""
    import importlib

    current = getattr(module, TARGET)
    inductor_expand(module)  # remembered while the module still holds it, for a repair after a reload
    if own(module, current):
        return Probe(True, f"{TARGET} is the module's own {current.__name__}: every expand recurses")
    live = getattr(importlib.import_module(INDUCTOR), "expand", None)
    if ours(current):
        return Probe(False, f"{TARGET} is Inductor's expand; npu_fixes puts it back after a re-run")
    if own(module, live) and rebinds_from_inductor(inspect.getsource(module)):
        return Probe(True, f"a re-run binds {TARGET} to {INDUCTOR}.expand, which is the module's own "
                           f"{live.__name__}: every expand would recurse after importlib.reload")
    return Probe(False, f"{TARGET} is Inductor's expand and a re-run keeps it so")


FIX = Fix(
    name="expand-reload-recursion",
    about=About(
        symptom=(
            "`LoweringException: RecursionError` on every `expand` once the backend's `lowering` module has "
            "been reloaded"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="do not reload `torch_npu._inductor.triton_experimental.lowering`",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
