"""Audit a torch_npu install, source tree or wheel for the known defects.

The code is loaded with :mod:`npu_fixes.tools.host`, twice. First untouched: each fix's probe
sees the code as built (``before``: ``needed`` / ``not-needed`` / ``absent`` / ``error``).
Then as a process here loads it, with npu_fixes' own registry armed: the same switches,
version windows, probes and order as the user's process, so ``after`` is exactly the word
``npu-fixes status`` would give there (:class:`~npu_fixes.shim.fix.State`): ``applied``,
``upgrade-needed`` or ``guarded`` where the defect is handled, ``out-of-window``,
``disabled`` or ``failed`` where it is left broken. A fix the process applies although the
code as built shows no defect (an earlier repair changed what its probe sees) is an error.
Whatever the audited code raises while it is loaded, probed or repaired (``SystemExit``
included, ``KeyboardInterrupt`` excepted) is reported, never raised, and so is a call of
``os._exit``; no ``__pycache__`` is written into the audited tree. A backend package with
none of the modules the fixes act on is an unknown layout: an error, not a clean audit.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..fixes import all_fixes
from ..shim import versions
from ..shim.fix import Fix, State, TargetMissing, one_line
from ..shim.pristine import left_as_found
from ..shim.registry import Registry
from . import host

NEEDED, ERROR = "needed", "error"
NOT_NEEDED, ABSENT = State.NOT_NEEDED.value, State.ABSENT.value
APPLIED, FAILED, UPGRADE_NEEDED = State.APPLIED.value, State.FAILED.value, State.UPGRADE_NEEDED.value
#: What a process does where the defect is there and nothing is left broken.
HANDLED = (APPLIED, UPGRADE_NEEDED, State.GUARDED.value)


@dataclasses.dataclass
class FixAudit:
    name: str
    #: What the probe finds on the code as built: needed, not-needed, absent or error.
    before: str
    #: What a process with these versions does: its ``status`` word (``npu_fixes.status()``).
    after: str
    detail: str

    @property
    def left_broken(self) -> bool:
        """The defect is there and a process here neither repairs nor guards it."""
        return self.before == NEEDED and self.after not in HANDLED


@dataclasses.dataclass
class AuditReport:
    version: str | None
    path: str
    fixes: list[FixAudit]
    #: Problems of the audited code outside the fixes' modules (e.g. its version.py raised).
    errors: list[str] = dataclasses.field(default_factory=list)
    #: The versions the decisions were made with (``npu_fixes.shim.versions.seen``).
    versions: dict[str, str | None] = dataclasses.field(default_factory=dict)
    #: What the user must know about those versions (outside the tested windows, undeclared torch).
    notes: list[str] = dataclasses.field(default_factory=list)
    has_backend: bool = True

    @property
    def ok(self) -> bool:
        """Nothing still broken and nothing we could not examine."""
        return not self.errors and not any(f.after == FAILED or f.before == ERROR or f.left_broken
                                           for f in self.fixes)

    @property
    def upgrade_needed(self) -> bool:
        """A known defect is present that only an upgrade of torch_npu removes."""
        return any(f.after == UPGRADE_NEEDED for f in self.fixes)

    def summary(self) -> str:
        """One line: how many fixes end in each state, and what is left to do."""
        counts = collections.Counter(f.after for f in self.fixes)
        states = ", ".join(f"{counts[s.value]} {s.value}" for s in State if counts[s.value])
        broken = [f.name for f in self.fixes if f.left_broken or f.after == FAILED]
        if not self.has_backend:
            verdict = "this torch_npu has no triton_experimental backend, so none of these defects"
        elif broken:
            verdict = f"{len(broken)} defect(s) left broken here: {', '.join(broken)}"
        elif not self.ok:
            verdict = "not every fix could be examined (see the errors)"
        elif self.upgrade_needed:
            verdict = "every repairable defect repaired; the upgrade-needed ones need a newer torch_npu"
        elif counts[APPLIED] or counts[State.GUARDED.value]:
            verdict = "every defect found is repaired or guarded"
        else:
            verdict = "no defect found"
        return f"{states or 'no fix'}: {verdict}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "torch_npu": {"version": self.version, "path": self.path},
            "versions": dict(self.versions),
            "notes": list(self.notes),
            "fixes": [dataclasses.asdict(f) for f in self.fixes],
            "errors": list(self.errors),
            "summary": self.summary(),
        }


def _short_name(fix: Fix) -> str:
    return fix.module.removeprefix(host.BACKEND + ".")


def _before(fix: Fix, loaded: host.HostLoad) -> tuple[str, str]:
    short = _short_name(fix)
    if not loaded.has_backend:
        return ABSENT, "this torch_npu has no triton_experimental backend"
    if short in loaded.errors:
        return ERROR, f"importing {short} failed: {loaded.errors[short]}"
    module = loaded.module(short)
    if module is None:
        return ABSENT, f"no module {fix.module}"
    try:
        fix.locate(module)
    except TargetMissing as exc:
        return ABSENT, str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the audited code's SystemExit too
        return ERROR, one_line(exc)
    try:
        probe = fix.probe(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        return ERROR, f"probe raised {one_line(exc)}"
    return (NEEDED if probe.defective else NOT_NEEDED), probe.detail


def _row(fix: Fix, before: tuple[str, str], run: Registry) -> FixAudit:
    """A fix's row: the probe on the code as built, and what the process in ``run`` did."""
    state, detail = before
    record = run.records[fix.name]
    after = record.state.value
    if record.state is State.PENDING:  # the run never imported its module
        after = ABSENT if state == ABSENT else ERROR
    elif record.state is State.APPLIED:
        module = sys.modules[fix.module]
        try:
            with left_as_found({f.module for f in run.fixes.values()}):
                detail = f"{detail}; after repair: {fix.probe(module).detail}"
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            detail = f"{detail}; after repair the probe raised {one_line(exc)}"
    elif record.state is State.NOT_NEEDED and state == NEEDED:
        detail = f"{detail}; but a process here probes it after the fixes before it and sees no defect"
    elif record.detail and record.detail != detail:  # why the run decided so: a window, a switch, a failure
        detail = f"{detail}; here: {record.detail}"
    return FixAudit(fix.name, state, after, detail)


def _disagreements(rows: list[FixAudit]) -> list[str]:
    """Fixes a process here applies (or guards) although the code as built shows no defect: an
    earlier fix's repair changed what their probe sees."""
    return [f"{f.name}: the code as built shows no defect, but a process here finds one after the fixes "
            f"before it ({f.after})" for f in rows if f.before == NOT_NEEDED and f.after in HANDLED]


class AuditedCodeExited(Exception):
    """The audited code called ``os._exit``: reported as its error, the audit goes on."""


@contextlib.contextmanager
def _exits_reported() -> Iterator[None]:
    """Inside, ``os._exit`` raises :class:`AuditedCodeExited` instead of ending the process:
    code of the audited tree that calls it (at import or in a probe) becomes an error row
    instead of an audit that stops without a word. Restored on the way out."""
    real = os._exit

    def reported(status: int) -> None:
        raise AuditedCodeExited(f"os._exit({status})")

    os._exit = reported
    try:
        yield
    finally:
        os._exit = real


def _unknown_layout(loaded: host.HostLoad, fixes: list[Fix]) -> str | None:
    """Why the backend's layout is unknown: it is there, but none of the modules the fixes
    act on (a layout this npu-fixes does not know: a module moved or renamed)."""
    if not loaded.has_backend:
        return None
    shorts = sorted({_short_name(fix) for fix in fixes if fix.module.startswith(host.BACKEND + ".")})
    if any(loaded.module(s) is not None or s in loaded.errors for s in shorts):
        return None
    return (f"unknown layout: {host.BACKEND} has none of the modules npu-fixes acts on "
            f"({', '.join(shorts)}); this npu-fixes cannot tell whether its fixes are needed")


def audit(location: str | os.PathLike[str] | None = None) -> AuditReport:
    """Audit the torch_npu at ``location`` (default: the installed one) in this process.

    The backend is loaded twice: untouched, where each fix's probe sees the code as built
    (the ``before`` column); then as a process here loads it, npu_fixes armed with the same
    registry, switches, version windows, probes and order as a user's process (``after``).
    Raises :class:`npu_fixes.tools.host.NotTorchNpu` for a location that is not torch_npu.
    """
    import npu_fixes

    if location is None:
        found = host.installed_location()
        if found is None:
            raise host.NotTorchNpu("no torch_npu is installed here; pass --torch-npu PATH")
        location = found
    npu_fixes.registry().disarm()  # the audit decides with a registry of its own
    # not a fix of the backend or of its loader: nothing to audit in a torch_npu tree
    backend = [fix for fix in all_fixes()
               if fix.module.startswith(host.BACKEND + ".") or fix.module in host.LOADER_MODULES]
    root = host.locate(location)  # a wheel is extracted once, for both loads
    with host.no_bytecode(), _exits_reported():  # probes may import more of the audited tree
        loaded = host.load(root)
        befores = [_before(fix, loaded) for fix in backend]
        host.unload()  # armed, the registry decides each module as the second load imports it
        run = Registry(backend, keep_verdicts=False)  # the audit probes, whatever a cache holds
        run.arm()
        try:
            host.load(root)
        finally:
            run.disarm()
        rows = [_row(fix, before, run) for fix, before in zip(backend, befores, strict=True)]
    seen = versions.seen(loaded.version)
    declared = versions.declared_torch(host.requirements(location))
    notes = versions.notes(seen["torch"], loaded.version, declared)
    errors = [e for e in (loaded.version_error, _unknown_layout(loaded, backend)) if e] + _disagreements(rows)
    return AuditReport(loaded.version, str(Path(location).resolve()), rows, errors, seen, notes,
                       loaded.has_backend)
