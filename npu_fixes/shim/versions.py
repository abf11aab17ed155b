"""Installed versions of torch and torch_npu, and version-window checks."""

from __future__ import annotations

import functools
import sys
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

#: The versions the backend's fixes were tested with, by package: outside them none is applied.
TESTED_WINDOWS = {"torch": SpecifierSet(">=2.13.0.dev0,<2.15"),
                  "torch_npu": SpecifierSet(">=2.13.0.dev0,<2.15")}


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
    return not version or _contains(str(spec), version)


@functools.lru_cache(maxsize=64)
def _contains(spec: str, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return True
    return SpecifierSet(spec).contains(parsed, prereleases=True)


def seen(torch_npu: str | None = None) -> dict[str, str | None]:
    """The versions a decision here is made with: torch and torch_npu as the fixes read them
    (``torch_npu``, where given, stands for an audited one), Triton's distributions as
    installed."""
    return {"torch": torch_version(),
            "torch-npu": torch_npu if torch_npu is not None else torch_npu_version(),
            "triton": _distribution_version("triton"),
            "triton-ascend": _distribution_version("triton-ascend")}


def declared_torch(requirements: list[str] | None) -> str | None:
    """The torch a torch_npu build declares in its ``Requires-Dist`` lines (``==2.14.0.*``),
    or None where it declares none or they are not known."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requirements or ():
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() == "torch" and not requirement.marker:
            return str(requirement.specifier) or None
    return None


def installed_torch_npu_requirements() -> list[str] | None:
    """The ``Requires-Dist`` lines of the installed torch_npu distribution (None: none installed)."""
    try:
        return metadata.requires("torch-npu") or []
    except metadata.PackageNotFoundError:
        return None


def notes(torch: str | None, torch_npu: str | None, torch_declared: str | None) -> list[str]:
    """What a user must know about these versions: one outside :data:`TESTED_WINDOWS` (nothing
    is applied then), and a torch other than the one torch_npu declares."""
    found = []
    for label, version in (("torch", torch), ("torch_npu", torch_npu)):
        spec = TESTED_WINDOWS[label]
        if not in_window(version, spec):
            found.append(f"{label} {version} is outside the versions npu_fixes was tested with ({spec}): "
                         "its fixes are not applied (see `npu-fixes audit`: which defects this build has)")
    if torch and torch_declared and not in_window(torch, SpecifierSet(torch_declared)):
        found.append(f"torch {torch} is not the torch this torch_npu declares (torch{torch_declared}): "
                     "an untested pairing")
    return found
