"""Installed versions of torch and torch_npu, and version-window checks."""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def _distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torch_version() -> str | None:
    """torch's version: the imported module's, else the installed distribution's."""
    module = sys.modules.get("torch")
    version = getattr(module, "__version__", None)
    return str(version) if version else _distribution_version("torch")


def torch_npu_version() -> str | None:
    """torch_npu's version: a loaded ``torch_npu.version`` (also a host-loaded copy, which
    may have none) wins over the installed distribution's."""
    module = sys.modules.get("torch_npu.version")
    if module is not None:
        version = getattr(module, "__version__", None)
        return str(version) if version else None
    return _distribution_version("torch-npu")


def in_window(version: str | None, spec: SpecifierSet) -> bool:
    """True when ``version`` lies in ``spec``; an unknown or unparsable version is let
    through, so that the behavioural probe decides."""
    if not version:
        return True
    try:
        parsed = Version(version)
    except InvalidVersion:
        return True
    return spec.contains(parsed, prereleases=True)
