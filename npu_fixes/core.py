"""Fix records, states, the wrapt-based patcher and the registry.

A :class:`Fix` names one defect: the module that holds its targets, the dotted
attributes it wraps (or adds, where the module lacks them), version windows, a behavioural
*probe* and an *install* step.
The :class:`Registry` decides, when the target module is imported, what happens to
each fix and records it as a :class:`FixRecord`.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from packaging.specifiers import SpecifierSet

from . import switches, versions

logger = logging.getLogger("npu_fixes")



class State(str, enum.Enum):
    """What happened to one fix in this interpreter."""

    PENDING = "pending"  # target module not imported yet
    APPLIED = "applied"  # probe found the defect; target wrapped; probed again: gone
    NOT_NEEDED = "not-needed"  # probe: fixed upstream; target untouched
    OUT_OF_WINDOW = "out-of-window"  # version outside the fix's window
    ABSENT = "absent"  # module or attribute missing
    DISABLED = "disabled"  # turned off by the environment
    FAILED = "failed"  # probe or install raised, or the repair did not take; target untouched
    UNDONE = "undone"  # restored by npu_fixes.undo()
    REPLACED = "replaced"  # was applied, but its target has been replaced since: not repaired


@dataclasses.dataclass(frozen=True)
class Probe:
    """Outcome of a behavioural probe: is the defect present, and why we think so."""

    defective: bool
    detail: str


class TargetMissing(LookupError):
    """A fix's target attribute does not exist in the loaded module."""


@dataclasses.dataclass(frozen=True)
class Fix:
    """One runtime repair.

    ``probe(module)`` inspects the live target module and reports whether it shows the
    defect. ``install(module, patcher)`` wraps the targets through ``patcher`` so that
    the corrected rule is used. ``signatures`` maps a target to the exact parameter
    names it must have; a mismatch means upstream changed the code and we keep out.
    ``provides`` names attributes the fix adds to the module where they are missing (so,
    unlike targets, they need not exist).
    """

    name: str
    summary: str
    module: str
    targets: tuple[str, ...]
    probe: Callable[[ModuleType], Probe]
    install: Callable[[ModuleType, Patcher], None]
    torch_window: SpecifierSet = SpecifierSet(">=2.13.0.dev0,<2.15")
    torch_npu_window: SpecifierSet = SpecifierSet(">=2.13.0.dev0,<2.15")
    signatures: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    provides: tuple[str, ...] = ()

    @property
    def patched(self) -> tuple[str, ...]:
        """Dotted names (in ``module``) of what the fix replaces or adds."""
        return self.targets + self.provides

    def locate(self, module: ModuleType) -> None:
        """Check every target in ``module``; raise TargetMissing or TypeError (signature)."""
        for dotted in self.targets:
            owner, attr = resolve_owner(module, dotted)
            expected = self.signatures.get(dotted)
            if expected is not None:
                check_signature(dotted, getattr(owner, attr), expected)


def resolve_owner(module: ModuleType, dotted: str) -> tuple[Any, str]:
    """Return ``(owner, attr)`` for ``dotted`` inside ``module``."""
    *path, attr = dotted.split(".")
    owner: Any = module
    for part in path:
        if not hasattr(owner, part):
            raise TargetMissing(f"{module.__name__}.{dotted}: no attribute {part!r}")
        owner = getattr(owner, part)
    try:
        inspect.getattr_static(owner, attr)
    except AttributeError:
        raise TargetMissing(f"{module.__name__}.{dotted}: no attribute {attr!r}") from None
    return owner, attr


def check_signature(dotted: str, func: Any, expected: tuple[str, ...]) -> None:
    """Raise TypeError unless ``func``'s parameters (``self`` aside) are exactly ``expected``."""
    params = tuple(p for p in inspect.signature(func).parameters if p != "self")
    if params != expected:
        raise TypeError(
            f"{dotted} has parameters ({', '.join(params)}); expected "
            f"({', '.join(expected)}): upstream changed it, left untouched"
        )


@dataclasses.dataclass
class FixRecord:
    """The state of one fix in this interpreter (what ``npu_fixes.status()`` returns)."""

    name: str
    state: State
    target: str
    detail: str = ""
    torch_version: str | None = None
    torch_npu_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        return data


def one_line(exc: BaseException) -> str:
    """``Type: message``, cut at the message's first line break."""
    text = f"{type(exc).__name__}: {exc}".splitlines()
    return text[0] if text else type(exc).__name__


_MISSING = object()  # the original of an added mapping item


@dataclasses.dataclass
class _Patch:
    """One change we made: a wrapt wrapper (``handle``), an added attribute or a mapping item."""

    kind: str  # "wrap", "add" or "item"
    owner: Any  # the object (wrap, add) or the mapping (item)
    name: Any  # attribute name or mapping key
    replacement: Any  # what we put there (for "wrap": wrapt's handle)
    original: Any = _MISSING  # "item" only: the value before us (_MISSING: there was none)
    seq: int = 0  # the patcher's mark when it was made

    def still_ours(self) -> bool:
        """Whether our change still stands (a reload or another package may have replaced it;
        a wrapper of ours buried under someone else's still counts)."""
        import wrapt

        if self.kind == "item":
            return self.owner.get(self.name, _MISSING) is self.replacement
        current = inspect.getattr_static(self.owner, self.name, _MISSING)
        if self.kind == "add":
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
                return wrapt.unwrap_object(self.owner, self.name, self.replacement, missing_ok=True) is not None
            except wrapt.WrapperNotOutermostError:  # a non-wrapt wrapper holds ours: leave both
                logger.warning("npu_fixes: cannot unwrap %s.%s: another wrapper sits above ours",
                               getattr(self.owner, "__name__", self.owner), self.name)
                return False
        if self.kind == "add":
            delattr(self.owner, self.name)
        elif self.original is _MISSING:
            del self.owner[self.name]
        else:
            self.owner[self.name] = self.original
        return True


class Patcher:
    """Installs wrappers with wrapt's ``wrap_function_wrapper`` and removes exactly those
    (``unwrap_object`` with the handle: a stale restore is refused, a wrapper stacked on top
    of ours stays). Also adds missing attributes and replaces mapping items, which wrapt
    does not do, under the same rule: only what still stands as we left it is restored."""

    def __init__(self) -> None:
        self._patches: dict[tuple[int, Any], _Patch] = {}
        self._seq = 0

    def _record(self, key: tuple[int, Any], patch: _Patch) -> None:
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

        key = (id(owner), attr)
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
        self._record((id(owner), attr), _Patch("add", owner, attr, value))

    def set_item(self, mapping: Any, key: Any, value: Any) -> None:
        """``mapping[key] = value``, restorable; the first original is the one kept (a key
        that was missing is deleted again)."""
        patch_key = (id(mapping), key)
        patch = self._patches.get(patch_key)
        if patch is not None and patch.still_ours():
            patch.replacement = value
        else:
            self._record(patch_key, _Patch("item", mapping, key, value, mapping.get(key, _MISSING)))
        mapping[key] = value

    def is_wrapped(self, owner: Any, attr: str) -> bool:
        """Whether our change to ``owner.attr`` still stands."""
        patch = self._patches.get((id(owner), attr))
        return patch is not None and patch.still_ours()

    def original(self, owner: Any, attr: str) -> Any:
        """The object that stood at ``owner.attr`` (or ``owner[attr]``) before we patched it."""
        patch = self._patches[(id(owner), attr)]
        return patch.replacement.__wrapped__ if patch.kind == "wrap" else patch.original

    def restore(self) -> int:
        """Undo every change that still stands, newest first; return how many were undone."""
        return self.rollback(0)

    def rollback(self, mark: int) -> int:
        """Undo the changes made since :meth:`mark` returned ``mark``, newest first; return
        how many still stood and were undone."""
        keys = [k for k, patch in self._patches.items() if patch.seq >= mark]
        return sum(self._patches.pop(key).restore() for key in reversed(keys))

    def __len__(self) -> int:
        return len(self._patches)


class _ReloadWatcher:
    """Meta-path finder that sees ``importlib.reload`` of the fix modules (importlib passes
    the module being reloaded as ``target``; a first import passes None, and wrapt's
    post-import hooks cover that) and calls ``callback(module)`` once its code ran again.
    Everything else it leaves to the finders behind it."""

    def __init__(self, names: set[str], callback: Callable[[ModuleType], None]) -> None:
        self.names, self.callback = names, callback
        self._busy = threading.local()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if target is None or name not in self.names or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = next((found for finder in list(sys.meta_path) if finder is not self
                         and (found := getattr(finder, "find_spec", lambda *a: None)(name, path, target))),
                        None)
        finally:
            self._busy.on = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self.callback)
        return spec


class _NotifyingLoader:
    """A module's own loader that calls ``callback(module)`` after executing it."""

    def __init__(self, loader: Any, callback: Callable[[ModuleType], None]) -> None:
        self._loader, self._callback = loader, callback

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._callback(module)


class Registry:
    """Evaluates fixes when their modules import, and keeps one record per fix."""

    def __init__(self, fixes: Iterable[Fix]) -> None:
        self.fixes = {fix.name: fix for fix in fixes}
        self.patcher = Patcher()
        self.records = {
            fix.name: FixRecord(fix.name, State.PENDING, f"{fix.module}.{fix.patched[0]}")
            for fix in self.fixes.values()
        }
        self._lock = threading.RLock()
        self._armed = False
        self._hooks_registered: set[str] = set()
        self._warned_env = False
        self._watcher: _ReloadWatcher | None = None

    # -- environment -----------------------------------------------------------------
    def _switches(self) -> tuple[bool, set[str]]:
        master_off = not switches.master_on()
        names, unknown = switches.disabled(self.fixes)
        if unknown and not self._warned_env:
            self._warned_env = True
            logger.warning(
                "%s names unknown fix(es) %s; valid names: %s",
                switches.DISABLE,
                ", ".join(unknown),
                ", ".join(self.fixes),
            )
        return master_off, names

    # -- arming ------------------------------------------------------------------------
    def arm(self) -> None:
        """Register post-import hooks; a fix applies when its module is (or was) imported."""
        import wrapt

        with self._lock:
            master_off, _ = self._switches()
            if master_off:
                for rec in self.records.values():
                    rec.state, rec.detail = State.DISABLED, f"{switches.MASTER} is off"
                return
            for rec in self.records.values():  # switched on again: decided afresh
                if rec.state is State.DISABLED:
                    rec.state, rec.detail = State.PENDING, ""
            self._armed = True
            names = {fix.module for fix in self.fixes.values()}
            if self._watcher is None:  # backend reloads get the repairs again
                self._watcher = _ReloadWatcher(names, self._on_import)
                sys.meta_path.insert(0, self._watcher)
            for module_name in names:
                if module_name not in self._hooks_registered:
                    self._hooks_registered.add(module_name)
                    wrapt.register_post_import_hook(self._on_import, module_name)
                elif module_name in sys.modules:
                    self._on_import(sys.modules[module_name])

    def disarm(self) -> None:
        """Stop reacting to imports (wrapt offers no unregister; the hook checks this flag)."""
        with self._lock:
            self._armed = False

    def _on_import(self, module: ModuleType) -> None:
        if not self._armed:
            return
        with self._lock:
            for fix in self.fixes.values():
                if fix.module == module.__name__:
                    self.evaluate(fix, module)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, fix: Fix, module: ModuleType) -> FixRecord:
        """Decide and record the state of ``fix`` for the loaded ``module``."""
        with self._lock:
            rec = self.records[fix.name]
            if rec.state is State.APPLIED and self._targets_still_ours(fix, module):
                return rec
            torch_v, npu_v = versions.torch_version(), versions.torch_npu_version()
            rec.torch_version, rec.torch_npu_version = torch_v, npu_v
            state, detail = self._decide(fix, module, torch_v, npu_v)
            rec.state, rec.detail = state, detail
            if state is State.APPLIED:
                logger.info(
                    "applied %s: patched %s (torch %s, torch_npu %s)",
                    fix.name,
                    ", ".join(f"{fix.module}.{t}" for t in fix.patched),
                    torch_v or "unknown",
                    npu_v or "unknown",
                )
            elif state is State.FAILED:
                logger.warning("npu_fixes: %s failed and was left untouched: %s", fix.name, detail)
            return rec

    def _targets_still_ours(self, fix: Fix, module: ModuleType) -> bool:
        try:
            return all(self.patcher.is_wrapped(*resolve_owner(module, t)) for t in fix.patched)
        except TargetMissing:
            return False

    def _decide(
        self, fix: Fix, module: ModuleType, torch_v: str | None, npu_v: str | None
    ) -> tuple[State, str]:
        master_off, off = self._switches()
        if master_off:
            return State.DISABLED, f"{switches.MASTER} is off"
        if fix.name in off:
            return State.DISABLED, f"{switches.DISABLE} names {fix.name}"
        for label, spec, version in (
            ("torch", fix.torch_window, torch_v),
            ("torch_npu", fix.torch_npu_window, npu_v),
        ):
            if not versions.in_window(version, spec):
                return State.OUT_OF_WINDOW, f"{label} {version} not in {spec}"
        try:
            fix.locate(module)
        except TargetMissing as exc:
            return State.ABSENT, str(exc)
        except Exception as exc:  # noqa: BLE001 - a changed target must never break imports
            return State.FAILED, f"target check raised {type(exc).__name__}: {exc}"
        try:
            probe = fix.probe(module)
        except Exception as exc:  # noqa: BLE001
            return State.FAILED, f"probe raised {type(exc).__name__}: {exc}"
        if not probe.defective:
            return State.NOT_NEEDED, probe.detail
        mark = self.patcher.mark()
        try:
            fix.install(module, self.patcher)
        except Exception as exc:  # noqa: BLE001
            self.patcher.rollback(mark)
            return State.FAILED, f"install raised {type(exc).__name__}: {exc}"
        try:  # `applied` only where the probe now sees the defect gone
            after = fix.probe(module)
        except Exception as exc:  # noqa: BLE001
            self.patcher.rollback(mark)
            return State.FAILED, f"probe after install raised {type(exc).__name__}: {exc}"
        if after.defective:
            self.patcher.rollback(mark)
            return State.FAILED, f"repair did not take, rolled back: {after.detail}"
        return State.APPLIED, probe.detail

    # -- public operations ----------------------------------------------------------------
    def apply(self) -> list[FixRecord]:
        """(Re-)arm the hooks; :meth:`arm` evaluates every fix whose module is already imported."""
        with self._lock:
            self.arm()
            return self.status()

    def undo(self) -> int:
        """Restore every original object and stop reacting to imports."""
        with self._lock:
            self.disarm()
            count = self.patcher.restore()
            for rec in self.records.values():
                if rec.state is State.APPLIED:
                    rec.state, rec.detail = State.UNDONE, "restored by npu_fixes.undo()"
            return count

    def mark_absent(self, module_name: str, detail: str) -> None:
        """Record the still-pending fixes of a module that cannot be imported as absent."""
        with self._lock:
            for fix in self.fixes.values():
                rec = self.records[fix.name]
                if fix.module == module_name and rec.state is State.PENDING:
                    rec.state, rec.detail = State.ABSENT, detail

    def status(self) -> list[FixRecord]:
        """One record per fix; an applied fix whose target no longer holds our repair (replaced
        outside a reload we saw, or its module object swapped) is reported ``replaced``."""
        with self._lock:
            for fix in self.fixes.values():
                rec, module = self.records[fix.name], sys.modules.get(fix.module)
                if rec.state is State.APPLIED and not (module and self._targets_still_ours(fix, module)):
                    rec.state = State.REPLACED
                    rec.detail = "its target was replaced after the repair; npu_fixes.apply() repairs it again"
            return [dataclasses.replace(rec) for rec in self.records.values()]
