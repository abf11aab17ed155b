"""A thin layer over wrapt: wrap, and restore only what is still ours."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from .fix import resolve_owner

logger = logging.getLogger("npu_fixes")


_MISSING = object()  # the original of an added mapping item


@dataclasses.dataclass
class _Patch:
    """One change we made: a wrapt wrapper (``handle``), an added or replaced attribute, or a
    mapping item."""

    kind: str  # "wrap", "add", "replace" or "item"
    owner: Any  # the object (wrap, add, replace) or the mapping (item)
    name: Any  # attribute name or mapping key
    replacement: Any  # what we put there (for "wrap": wrapt's handle)
    original: Any = _MISSING  # "replace", "item": the value before us (_MISSING: there was none)
    seq: int = 0  # the patcher's mark when it was made
    changed: Callable[[], None] | None = None  # "item": drops what was derived from the mapping

    def still_ours(self) -> bool:
        """Whether our change still stands (a reload or another package may have replaced it;
        a wrapper of ours buried under someone else's still counts)."""
        import wrapt

        if self.kind == "item":
            return self.owner.get(self.name, _MISSING) is self.replacement
        current = inspect.getattr_static(self.owner, self.name, _MISSING)
        if self.kind in ("add", "replace"):
            return current is self.replacement
        return current is not _MISSING and wrapt.is_wrapped_by(current, self.replacement)

    def restore(self) -> bool:
        """Undo the change where it still stands; return whether anything was restored.
        Never puts an old object back over a replaced one."""
        import wrapt

        if not self.still_ours():
            return False
        if self.kind == "wrap":  # wrapt splices ours out from under other wrappers
            try:
                removed = wrapt.unwrap_object(self.owner, self.name, self.replacement, missing_ok=True)
                return removed is not None
            except wrapt.WrapperNotOutermostError:  # a non-wrapt wrapper holds ours: leave both
                logger.warning("npu_fixes: cannot unwrap %s.%s: another wrapper sits above ours",
                               getattr(self.owner, "__name__", self.owner), self.name)
                return False
        if self.kind == "add":
            delattr(self.owner, self.name)
        elif self.kind == "replace":
            setattr(self.owner, self.name, self.original)
        elif self.original is _MISSING:
            del self.owner[self.name]
        else:
            self.owner[self.name] = self.original
        if self.changed is not None:
            self.changed()
        return True


class Patcher:
    """Installs wrappers with wrapt's ``wrap_function_wrapper`` and removes exactly those
    (``unwrap_object`` with the handle: a stale restore is refused, a wrapper stacked on top
    of ours stays). Also adds missing attributes and replaces mapping items, which wrapt
    does not do, under the same rule: only what still stands as we left it is restored."""

    def __init__(self) -> None:
        self._patches: dict[tuple[Any, int, Any], _Patch] = {}
        self._seq = 0
        self._scope: str | None = None

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Changes made inside belong to ``name`` (a fix): two fixes may wrap one target,
        each once, and each is told apart from the other's wrapper."""
        outer, self._scope = self._scope, name
        try:
            yield
        finally:
            self._scope = outer

    def _key(self, owner: Any, name: Any) -> tuple[Any, int, Any]:
        return (self._scope, id(owner), name)

    def _record(self, key: tuple[Any, int, Any], patch: _Patch) -> None:
        patch.seq = self._seq
        self._seq += 1
        self._patches.pop(key, None)  # a stale entry: its replacement no longer stands there
        self._patches[key] = patch

    def mark(self) -> int:
        """A point to :meth:`rollback` to: every patch made after it is undone."""
        return self._seq

    def wrap(self, owner: Any, attr: str, wrapper: Callable[..., Any]) -> Any:
        """Wrap ``owner.attr`` with ``wrapper``; applying twice wraps once. Returns wrapt's handle."""
        import wrapt

        key = self._key(owner, attr)
        patch = self._patches.get(key)
        if patch is not None and patch.still_ours():
            return patch.replacement
        # not ours (first time, or replaced behind our back by a reload): wrap what stands there
        handle = wrapt.wrap_function_wrapper(owner, attr, wrapper)
        self._record(key, _Patch("wrap", owner, attr, handle))
        return handle

    def wrap_path(self, module: ModuleType, dotted: str, wrapper: Callable[..., Any]) -> Any:
        """:meth:`wrap` for a dotted target inside ``module``."""
        owner, attr = resolve_owner(module, dotted)
        return self.wrap(owner, attr, wrapper)

    def add(self, owner: Any, attr: str, value: Any) -> None:
        """Set ``owner.attr = value`` where ``owner`` has no ``attr``; :meth:`restore` deletes it."""
        if self.is_wrapped(owner, attr):
            return
        if inspect.getattr_static(owner, attr, _MISSING) is not _MISSING:
            raise ValueError(f"{owner!r} already has {attr!r}: wrap it instead of adding it")
        setattr(owner, attr, value)
        self._record(self._key(owner, attr), _Patch("add", owner, attr, value))

    def replace(self, owner: Any, attr: str, value: Any) -> None:
        """Set ``owner.attr = value`` in place of what stands there, for an object that a
        wrapper cannot stand in for (a Triton JIT function); :meth:`restore` puts the
        original back. Applying twice replaces once."""
        if self.is_wrapped(owner, attr):
            return
        original = inspect.getattr_static(owner, attr)
        setattr(owner, attr, value)
        self._record(self._key(owner, attr), _Patch("replace", owner, attr, value, original))

    def set_item(self, mapping: Any, key: Any, value: Any, changed: Callable[[], None] | None = None) -> None:
        """``mapping[key] = value``, restorable; the first original is the one kept (a key
        that was missing is deleted again). ``changed`` runs after each change, restore
        included (to drop a cache derived from ``mapping``)."""
        patch_key = self._key(mapping, key)
        patch = self._patches.get(patch_key)
        if patch is not None and patch.still_ours():
            patch.replacement = value
        else:
            original = mapping.get(key, _MISSING)
            self._record(patch_key, _Patch("item", mapping, key, value, original, changed=changed))
        mapping[key] = value
        if changed is not None:
            changed()

    def is_wrapped(self, owner: Any, attr: str) -> bool:
        """Whether our change to ``owner.attr`` still stands."""
        patch = self._patches.get(self._key(owner, attr))
        return patch is not None and patch.still_ours()

    def original(self, owner: Any, attr: str) -> Any:
        """The object that stood at ``owner.attr`` (or ``owner[attr]``) before we patched it."""
        patch = self._patches[self._key(owner, attr)]
        return patch.replacement.__wrapped__ if patch.kind == "wrap" else patch.original

    def restore(self) -> int:
        """Undo every change that still stands, newest first; return how many were undone."""
        return self.rollback(0)

    def holds(self, name: str) -> bool:
        """Whether a change of scope ``name`` (one fix) still stands."""
        return any(k[0] == name and patch.still_ours() for k, patch in self._patches.items())

    def restore_scope(self, name: str) -> int:
        """Undo the changes of scope ``name`` (one fix) that still stand, newest first;
        return how many were undone."""
        keys = [k for k in self._patches if k[0] == name]
        return sum(self._patches.pop(key).restore() for key in reversed(keys))

    def rollback(self, mark: int) -> int:
        """Undo the changes made since :meth:`mark` returned ``mark``, newest first; return
        how many still stood and were undone."""
        keys = [k for k, patch in self._patches.items() if patch.seq >= mark]
        return sum(self._patches.pop(key).restore() for key in reversed(keys))

    def __len__(self) -> int:
        return len(self._patches)
