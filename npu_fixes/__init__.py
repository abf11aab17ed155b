"""npu_fixes: run-time repairs for torch_npu's ``triton_experimental`` Inductor backend.

``import npu_fixes`` imports neither torch nor torch_npu: it arms post-import hooks, and
each fix is decided when its target module finishes importing (or at once, if it already
has). A fix wraps its target only when a behavioural probe shows the defect on the live
code, so an install that already has upstream's fix is left exactly as it is; the defects
upstream has not fixed anywhere are repaired on every install that has them.

``NPU_FIXES=0`` (or off/false/no) turns everything off; ``NPU_FIXES_DISABLE=name,...`` turns single fixes off.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .shim.fix import FixRecord
    from .shim.registry import Registry

from .fixes import FIX_NAMES as FIXES
from .shim import switches

__version__ = "0.1.0"
__all__ = ["FIXES", "apply", "registry", "status", "undo"]

_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    """The process-wide registry of fixes (created on first use)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            from .fixes import all_fixes
            from .shim.registry import Registry

            _registry = Registry(all_fixes())
        return _registry


def status() -> list[FixRecord]:
    """One record per fix: its state, target, versions and a one-line detail."""
    reg = registry()
    if not switches.master_on():
        reg.arm()  # records every fix as disabled, registers nothing
    return reg.status()


def apply() -> list[FixRecord]:
    """Arm the hooks again and apply every fix whose target module is already imported."""
    return registry().apply()


def undo() -> int:
    """Restore every wrapped object to the exact original; return how many were restored."""
    return registry().undo()


def _arm_at_import() -> None:
    """Arm the hooks; an internal error is logged, never raised into the user's import."""
    if not switches.master_on():  # imports nothing more
        return
    try:
        registry().arm()
    except Exception:  # noqa: BLE001
        import logging

        logging.getLogger("npu_fixes").warning("npu_fixes could not arm its fixes", exc_info=True)


_arm_at_import()
