"""The decompositions torch_npu's loader installs in Inductor's tables (``decomposition.py``'s
``_override_*`` functions): what one installs, run with the tables put back after, and the
wrapping of its entry, made after each run of the function and at once where it ran before
npu_fixes was armed (integer-input-dtype, safe-softmax-guard)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ...shim.patcher import Patcher


def installed(module: types.ModuleType, override: str, op: Any) -> Any:
    """The decomposition of ``op`` that the live ``override`` installs; Inductor's tables are
    put back as they were."""
    from torch._decomp.decompositions_for_rng import extra_random_decomps
    from torch._inductor.decomposition import decompositions
    from torch._inductor.lowering import lowerings

    tables = (decompositions, extra_random_decomps, lowerings)
    before = [dict(table) for table in tables]
    try:
        getattr(module, override)()
        return decompositions.get(op)
    finally:
        for table, saved in zip(tables, before, strict=True):
            table.clear()
            table.update(saved)


def _wrap_entry(module: types.ModuleType, patcher: Patcher, op: Any,
                wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """The loader's entry of ``op`` replaced by ``wrap(entry)``, in Inductor's table and in the
    copy of it Inductor keeps (``fast_random_decomps``) where that is made already."""
    from torch._inductor import decomposition

    entry = decomposition.decompositions.get(op)
    if getattr(entry, "__module__", None) != module.__name__:  # not the loader's, or wrapped already
        return
    fixed = wrap(entry)
    fixed.__wrapped__ = entry  # type: ignore[attr-defined]
    patcher.set_item(decomposition.decompositions, op, fixed)
    copies = getattr(decomposition, "fast_random_decomps", None)
    if copies is not None and copies.cache_info().currsize:
        patcher.set_item(copies(), op, fixed)


def wrap_installed(module: types.ModuleType, patcher: Patcher, override: str, op: Any,
                   wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """After each run of ``override``, and now where it ran already, its entry of ``op`` is
    ``wrap(entry)``."""
    def after(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        _wrap_entry(module, patcher, op, wrap)
        return result

    patcher.wrap_path(module, override, after)
    _wrap_entry(module, patcher, op, wrap)  # the loader ran before npu_fixes was armed
