"""The registry: decides each fix when its target module imports (or reloads), from its probe
or from a verdict kept by an earlier process (:mod:`.verdicts`), and keeps one record per fix
for ``status()``, ``apply()`` and ``undo()``."""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from . import switches, verdicts, versions
from .fix import Fix, FixRecord, Probe, State, TargetMissing, resolve_owner
from .patcher import Patcher
from .pristine import left_as_found

logger = logging.getLogger("npu_fixes")


class _ImportWatcher:
    """Meta-path finder that sees the fix modules import or reload (``importlib.reload``
    passes the module as ``target``) and calls ``callback(module)`` once their code ran.
    It asks the finders behind it for the spec, with the parent's path importlib passed,
    and never imports anything itself: importlib calls finders with its global import lock
    held, and an import from there would wait for a package that another thread is still
    importing, while that thread waits for the global lock (a deadlock). Every other name
    it leaves to the finders behind it."""

    def __init__(self, names: set[str], callback: Callable[[ModuleType], None]) -> None:
        self.names, self.callback = names, callback
        self._busy = threading.local()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names or getattr(self._busy, "on", False):
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
    """A module's own loader that calls ``callback(module)`` after executing it. The module
    and its spec get the real loader back before its code runs: only the import is ours."""

    def __init__(self, loader: Any, callback: Callable[[ModuleType], None]) -> None:
        self._loader, self._callback = loader, callback

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        self._callback(module)


class Registry:
    """Evaluates fixes when their modules import, and keeps one record per fix."""

    def __init__(self, fixes: Iterable[Fix], keep_verdicts: bool = True) -> None:
        """``keep_verdicts``: probe verdicts are taken from and added to the cache of
        :mod:`.verdicts` (where ``NPU_FIXES_VERDICT_CACHE`` leaves it on)."""
        self.fixes = {fix.name: fix for fix in fixes}
        self._keep_verdicts = keep_verdicts
        #: Verdicts by key: those read from the cache and those found here, not yet written.
        self._verdicts: dict[str, dict[str, Probe]] = {}
        self._found: dict[str, dict[str, Probe]] = {}
        #: Fixes applied on a cached verdict whose repair no probe has confirmed in this process yet.
        self._unverified: set[str] = set()
        #: The verdict key of a module as it imports, by (module, disabled fixes): made once an import.
        self._keys: dict[tuple[int, frozenset[str]], str | None] = {}
        self.patcher = Patcher()
        self.records = {
            fix.name: FixRecord(fix.name, State.PENDING, f"{fix.module}.{fix.patched[0]}")
            for fix in self.fixes.values()
        }
        self._watched = frozenset(fix.module for fix in self.fixes.values())
        self._lock = threading.RLock()
        self._armed = False
        self._warned_env = False
        self._warned_versions: set[str] = set()
        self._watcher: _ImportWatcher | None = None

    # -- environment -----------------------------------------------------------------
    def _switches(self) -> tuple[bool, set[str]]:
        master_off = not switches.master_on()
        renamed = {old: fix.name for fix in self.fixes.values() for old in fix.old_names}
        names, unknown, old = switches.disabled(self.fixes, renamed=renamed)
        if (unknown or old) and not self._warned_env:
            self._warned_env = True
            if unknown:
                logger.warning(
                    "%s names unknown fix(es) %s; valid names: %s, or %s for every fix",
                    switches.DISABLE,
                    ", ".join(unknown),
                    ", ".join(self.fixes),
                    switches.ALL,
                )
            for was, now in old.items():
                logger.warning("%s: %r is the old name of %r (deprecated; it still works): use %r",
                               switches.DISABLE, was, now, now)
        return master_off, names

    # -- arming ------------------------------------------------------------------------
    def arm(self) -> None:
        """Watch the fix modules' imports; a fix applies when its module is (or was) imported."""
        with self._lock:
            master_off, _ = self._switches()
            if master_off:  # a repair (or guard) in place stays and says so, until undo()
                for name, rec in self.records.items():
                    if not self.patcher.holds(name):
                        rec.state, rec.detail = State.DISABLED, f"{switches.MASTER} is off"
                return
            for rec in self.records.values():  # switched on again: decided afresh
                if rec.state is State.DISABLED:
                    rec.state, rec.detail = State.PENDING, ""
            self._armed = True
            if self._watcher is None:
                self._watcher = _ImportWatcher(set(self._watched), self._on_import)
                sys.meta_path.insert(0, self._watcher)
            for module_name in sorted(self._watched):
                if module_name in sys.modules:
                    self._on_import(sys.modules[module_name])

    def disarm(self) -> None:
        """Stop reacting to imports (the watcher stays in ``sys.meta_path``: importlib may be
        iterating it right now; the callback checks this flag)."""
        with self._lock:
            self._armed = False

    def _on_import(self, module: ModuleType) -> None:
        if not self._armed:
            return
        with self._lock:
            self._keys.clear()  # the module's code ran (again): its tree may have changed since
            try:
                for fix in self.fixes.values():
                    if fix.module == module.__name__:
                        self.evaluate(fix, module)
            finally:
                self._keys.clear()
                for key, found in self._found.items():
                    verdicts.store(key, found)
                self._found.clear()

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, fix: Fix, module: ModuleType) -> FixRecord:
        """Decide and record the state of ``fix`` for the loaded ``module``."""
        with self._lock:
            rec = self.records[fix.name]
            in_place = (State.APPLIED, State.UPGRADE_NEEDED, State.GUARDED)
            if rec.state in in_place and self._targets_still_ours(fix, module):
                return rec  # our repair (or guard) is in place: never probe our own wrapper
            # What is left of an earlier repair (a reload replaced only part of it, e.g. a
            # wrapper on a torch class next to the reloaded module's function) goes first:
            # the probe must judge upstream's code, not ours.
            self.patcher.restore_scope(fix.name)
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

    def _warn_out_of_window(self, found: str, spec: Any) -> None:
        """One WARNING per version outside a window: its fixes are left out."""
        if found not in self._warned_versions:
            self._warned_versions.add(found)
            logger.warning("npu_fixes: %s is outside the versions its fixes were tested with (%s): they "
                           "are not applied here; `npu-fixes audit` says which defects this build has",
                           found, spec)

    def _targets_still_ours(self, fix: Fix, module: ModuleType) -> bool:
        try:
            with self.patcher.scope(fix.name):
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
                self._warn_out_of_window(f"{label} {version}", spec)
                return State.OUT_OF_WINDOW, f"{label} {version} not in {spec}"
        try:
            fix.locate(module)
        except TargetMissing as exc:
            return State.ABSENT, str(exc)
        except Exception as exc:  # noqa: BLE001 - a changed target must never break imports
            return State.FAILED, f"target check raised {type(exc).__name__}: {exc}"
        key = self._key(module, off)
        if key is not None and key not in self._verdicts:
            self._verdicts[key] = verdicts.load(key)
        cached = self._verdicts[key].get(fix.name) if key is not None else None
        try:
            probe = cached or self._probe(fix, module)
        except Exception as exc:  # noqa: BLE001
            return State.FAILED, f"probe raised {type(exc).__name__}: {exc}"
        if key is not None and cached is None:  # kept once the decision is made (below)
            self._found.setdefault(key, {})[fix.name] = probe
        if not probe.defective:
            return State.NOT_NEEDED, probe.detail
        mark = self.patcher.mark()
        try:
            if fix.install is not None:
                with self.patcher.scope(fix.name):
                    fix.install(module, self.patcher)
        except Exception as exc:  # noqa: BLE001
            self.patcher.rollback(mark)
            self._forget(key, fix.name)
            return State.FAILED, f"install raised {type(exc).__name__}: {exc}"
        if fix.present_state is State.GUARDED:  # the guard is on; no torch_npu has the fix
            logger.info("guarded %s: %s", fix.name, probe.detail)
            return State.GUARDED, probe.detail
        if not fix.repairable:  # the guard is on; the defect stays until torch_npu is upgraded
            logger.warning("npu_fixes: %s: %s", fix.name, probe.detail)
            return State.UPGRADE_NEEDED, probe.detail
        if cached is not None:  # confirmed by a probe when status() is first asked
            self._unverified.add(fix.name)
            return State.APPLIED, f"{probe.detail} (verdict from the cache)"
        try:  # `applied` only where the probe now sees the defect gone
            after = self._probe(fix, module)
        except Exception as exc:  # noqa: BLE001
            self.patcher.rollback(mark)
            self._forget(key, fix.name)
            return State.FAILED, f"probe after install raised {type(exc).__name__}: {exc}"
        if after.defective:
            self.patcher.rollback(mark)
            self._forget(key, fix.name)
            return State.FAILED, f"repair did not take, rolled back: {after.detail}"
        return State.APPLIED, probe.detail

    def _key(self, module: ModuleType, off: set[str]) -> str | None:
        """The verdict key of ``module`` (None: the cache is off, or not for this module)."""
        if not (self._keep_verdicts and verdicts.enabled()):
            return None
        memo = (id(module), frozenset(off))
        if memo not in self._keys:
            self._keys[memo] = verdicts.key(module, off)
        return self._keys[memo]

    def _probe(self, fix: Fix, module: ModuleType) -> Probe:
        with left_as_found(self._watched):
            return fix.probe(module)

    def _forget(self, key: str | None, name: str) -> None:
        """A verdict whose decision failed is not kept."""
        if key is not None:
            self._found.get(key, {}).pop(name, None)

    def _verify(self) -> None:
        """Probe the repairs applied on a cached verdict: ``applied`` stays only where the probe
        sees the defect gone; otherwise the repair is rolled back and the fix ``failed``."""
        for name in sorted(self._unverified):
            self._unverified.discard(name)
            fix, rec = self.fixes[name], self.records[name]
            module = sys.modules.get(fix.module)
            if rec.state is not State.APPLIED or module is None or not self._targets_still_ours(fix, module):
                continue
            try:
                after = self._probe(fix, module)
                failure = f"repair did not take, rolled back: {after.detail}" if after.defective else None
            except Exception as exc:  # noqa: BLE001
                failure = f"probe after install raised {type(exc).__name__}: {exc}"
            if failure:
                self.patcher.restore_scope(name)
                rec.state, rec.detail = State.FAILED, failure
                logger.warning("npu_fixes: %s failed and was rolled back: %s", name, failure)

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
            for name, rec in self.records.items():
                if rec.state is State.APPLIED:
                    rec.state, rec.detail = State.UNDONE, "restored by npu_fixes.undo()"
                elif rec.state in (State.UPGRADE_NEEDED, State.GUARDED) and self.fixes[name].install:
                    rec.detail += " (its guard was removed by npu_fixes.undo())"
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
            self._verify()
            for fix in self.fixes.values():
                rec, module = self.records[fix.name], sys.modules.get(fix.module)
                if rec.state is State.APPLIED and not (module and self._targets_still_ours(fix, module)):
                    rec.state = State.REPLACED
                    rec.detail = "target replaced after the repair; npu_fixes.apply() repairs it again"
            return [dataclasses.replace(rec) for rec in self.records.values()]
