"""Audit a torch_npu install, source tree or wheel for the known defects.

The code is loaded with :mod:`npu_fixes.tools.host`; each fix's probe runs on the untouched
code (``needed`` / ``not-needed`` / ``absent`` / ``error``), then the needed fixes are
installed on the loaded code and probed again (``applied``: the defect is gone; ``failed``);
a defect no run-time repair can fix is ``upgrade-needed`` (its guard, if any, installed), or
``guarded`` where its guard is installed and no torch_npu fixes it.
After the probe, the words are ``npu-fixes status``' (:class:`~npu_fixes.shim.fix.State`).
Whatever the audited code raises while it is loaded, probed or repaired (``SystemExit``
included, ``KeyboardInterrupt`` excepted) is reported, never raised, and so is a call of
``os._exit``; no ``__pycache__`` is written into the audited tree. A backend package with
none of the modules the fixes act on is an unknown layout: an error, not a clean audit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from ..fixes import all_fixes
from ..shim.fix import Fix, State, TargetMissing, one_line
from ..shim.patcher import Patcher
from . import host

NEEDED, ERROR, NOTHING = "needed", "error", "-"
NOT_NEEDED, ABSENT = State.NOT_NEEDED.value, State.ABSENT.value
APPLIED, FAILED, UPGRADE_NEEDED = State.APPLIED.value, State.FAILED.value, State.UPGRADE_NEEDED.value


@dataclasses.dataclass
class FixAudit:
    name: str
    before: str
    after: str
    detail: str


@dataclasses.dataclass
class AuditReport:
    version: str | None
    path: str
    fixes: list[FixAudit]
    #: Problems of the audited code outside the fixes' modules (e.g. its version.py raised).
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing still broken and nothing we could not examine."""
        return not self.errors and all(f.after != FAILED and f.before != ERROR for f in self.fixes)

    @property
    def upgrade_needed(self) -> bool:
        """A known defect is present that only an upgrade of torch_npu removes."""
        return any(f.after == UPGRADE_NEEDED for f in self.fixes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "torch_npu": {"version": self.version, "path": self.path},
            "fixes": [dataclasses.asdict(f) for f in self.fixes],
            "errors": list(self.errors),
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


def _after(fix: Fix, loaded: host.HostLoad, patcher: Patcher) -> tuple[str, str]:
    module = loaded.module(_short_name(fix))
    assert module is not None
    try:
        if fix.install is not None:
            with patcher.scope(fix.name):
                fix.install(module, patcher)
        if not fix.repairable:
            return fix.present_state.value, ""
        probe = fix.probe(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        return FAILED, f"repair raised {one_line(exc)}"
    return (FAILED if probe.defective else APPLIED), probe.detail


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

    Raises :class:`npu_fixes.tools.host.NotTorchNpu` for a location that is not torch_npu.
    """
    import npu_fixes

    if location is None:
        found = host.installed_location()
        if found is None:
            raise host.NotTorchNpu("no torch_npu is installed here; pass --torch-npu PATH")
        location = found
    npu_fixes.registry().disarm()  # the audit installs on the loaded code itself
    # not a fix of the backend or of its loader: nothing to audit in a torch_npu tree
    backend = [fix for fix in all_fixes()
               if fix.module.startswith(host.BACKEND + ".") or fix.module in host.LOADER_MODULES]
    with host.no_bytecode(), _exits_reported():  # probes may import more of the audited tree
        loaded = host.load(location)
        patcher = Patcher()
        results = []
        for fix in backend:
            before, detail = _before(fix, loaded)
            after = NOTHING
            if before == NEEDED:
                after, repaired = _after(fix, loaded, patcher)
                detail = f"{detail}; after repair: {repaired}" if repaired else detail
            results.append(FixAudit(fix.name, before, after, detail))
    errors = [e for e in (loaded.version_error, _unknown_layout(loaded, backend)) if e]
    return AuditReport(loaded.version, str(loaded.source), results, errors)
