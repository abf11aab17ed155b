"""Scoped stand-ins for probes: run a live target with some of its globals replaced.

A probe must not swap a module's globals (a compile in another thread would see the swap),
so :func:`with_globals` returns a private copy of the target whose code reads a copy of its
module's namespace with the given names replaced. A target wrapped by wrapt keeps its
wrappers: each layer is rebuilt around the rebound function, so the probe still sees what
callers see. Nothing global is touched.
"""

from __future__ import annotations

import builtins
import logging
import types
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("npu_fixes")


class ScopedAttributes:
    """Read-only view of ``base`` (a module or namespace) with some attributes replaced."""

    def __init__(self, base: Any, **overrides: Any) -> None:
        self._base, self._overrides = base, overrides

    def __getattr__(self, name: str) -> Any:
        overrides = self.__dict__["_overrides"]
        return overrides[name] if name in overrides else getattr(self.__dict__["_base"], name)


def _rebind(func: types.FunctionType, overrides: Mapping[str, Any]) -> types.FunctionType:
    namespace = {**func.__globals__, **overrides}
    copy = types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__qualname__ = func.__qualname__
    return copy


def with_globals(target: Any, overrides: Mapping[str, Any]) -> Any:
    """A copy of ``target`` (a function, possibly under wrapt wrappers) whose body reads
    ``overrides`` in place of the same-named module globals.

    Raises TypeError for anything else (a wrapper we cannot rebuild, a builtin).
    """
    import wrapt

    if isinstance(target, wrapt.FunctionWrapper):
        return wrapt.FunctionWrapper(with_globals(target.__wrapped__, overrides), target._self_wrapper)
    if isinstance(target, (classmethod, staticmethod)):
        return type(target)(with_globals(target.__func__, overrides))
    if isinstance(target, types.FunctionType):
        return _rebind(target, overrides)
    raise TypeError(f"cannot scope the globals of {type(target).__name__} {target!r}")


def unbind(wrapped: Any) -> tuple[Any, Any]:
    """``(function, instance)`` of the bound method wrapt hands a wrapper: a plain bound
    method, or a wrapt-bound wrapper of someone else stacked below ours (kept as a whole)."""
    if type(wrapped) is types.MethodType:  # not isinstance: a wrapt proxy passes for its target
        return wrapped.__func__, wrapped.__self__
    return wrapped._self_parent, wrapped._self_instance


def call_rebound(fix: str, wrapped: Any, overrides: Mapping[str, Any], args: tuple, kwargs: dict) -> Any:
    """Call the bound method ``wrapped`` (as wrapt hands it to fix ``fix``'s wrapper) as a
    private copy whose body reads ``overrides`` in place of the same-named globals (see
    :func:`with_globals`); where it cannot be copied (a wrapper of someone else that cannot
    be rebuilt) it runs unchanged, with a warning."""
    function, owner = unbind(wrapped)
    try:
        copy = with_globals(function, overrides)
    except TypeError as exc:
        name = getattr(function, "__name__", function)
        logger.warning("npu_fixes: %s: %s; %s ran unchanged", fix, exc, name)
        return wrapped(*args, **kwargs)
    return copy.__get__(owner, type(owner))(*args, **kwargs)


def scoped_method(cls: type, name: str, instance: Any, overrides: Mapping[str, Any]) -> Any:
    """Method ``name`` as ``cls`` defines it (wrappers included), reading ``overrides`` in
    place of the same-named module globals, bound to ``instance`` (a stand-in may do)."""
    import inspect

    return with_globals(inspect.getattr_static(cls, name), overrides).__get__(instance, cls)


def code_globals(wrapped: Any, fallback: dict[str, Any]) -> dict[str, Any]:
    """The module globals that ``wrapped`` reads at call time (a probe's scoped copy included,
    so a wrapper decides on the same switches as the code it wraps); ``fallback`` where it
    has none."""
    func = getattr(wrapped, "__func__", wrapped)
    namespace = getattr(func, "__globals__", None)
    return namespace if isinstance(namespace, dict) else fallback


def importing(module_name: str, **overrides: Any) -> dict[str, Any]:
    """Builtins for :func:`with_globals` (``{"__builtins__": importing(...)}``) under which
    ``from MODULE_NAME import NAME`` in the copy's body gets ``overrides[NAME]`` in place of
    the module's ``NAME`` (present or not); every other import is the usual one."""

    def import_(name: str, namespace: Any = None, local: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        module = builtins.__import__(name, namespace, local, fromlist, level)
        if name == module_name and level == 0 and fromlist and any(n in overrides for n in fromlist):
            return ScopedAttributes(module, **overrides)
        return module

    return {**vars(builtins), "__import__": import_}
