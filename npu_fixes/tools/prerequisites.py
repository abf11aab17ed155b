"""What each command needs installed beyond npu_fixes' own requirements, checked before it
starts: a missing one is one line that names what to install (exit 2), not a traceback."""

from __future__ import annotations

import importlib.util

#: Import name -> what to install for it.
INSTALL = {
    "torch": "torch (2.13 or 2.14)",
    "triton": "triton==3.6.0 (or the triton-ascend of your NPU stack)",
    "numpy": "numpy",
    "expecttest": "expecttest",
}
#: What a command needs: the audit host-loads the backend (torch, and Triton, which its modules
#: import); the sweep and ``accuracy --interpret`` run its kernels in Triton's interpreter (numpy),
#: the sweep's corpus is PyTorch's OpInfo database (its test utilities import expecttest).
NEEDS = {
    "audit": ("torch", "triton"),
    "sweep": ("torch", "triton", "numpy", "expecttest"),
    "accuracy": ("torch",),
    "accuracy --interpret": ("torch", "triton", "numpy"),
}


def missing(command: str) -> str | None:
    """Why ``command`` cannot run here (one line naming what to install), or None."""
    absent = [name for name in NEEDS[command] if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    verb = "is" if len(absent) == 1 else "are"
    return (f"{command} needs {', '.join(absent)}, which {verb} not installed here: "
            f"install {', '.join(INSTALL[name] for name in absent)}")
