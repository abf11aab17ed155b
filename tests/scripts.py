"""The repository's ``scripts/<name>.py`` loaded as modules, for their tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

FOLDER = Path(__file__).resolve().parent.parent / "scripts"


def load(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module of its own (``name`` without ``.py``)."""
    spec = importlib.util.spec_from_file_location(name, FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
