"""Genuine states of the backend: the code our users run, as self-builds on CPU.

A self-build at commit C is the published torch-npu 2.13.0 wheel with its
``torch_npu/_inductor/triton_experimental/`` replaced by that folder at commit C of the
public Ascend/pytorch repository. The folder comes from, in this order:

1. ``$NPU_FIXES_UPSTREAM/triton_experimental-C.tar.gz`` (default: ``../shared/upstream``
   next to the repository, where CI has it);
2. ``git archive C`` of a local Ascend/pytorch clone named by ``$NPU_FIXES_ASCEND_PYTORCH``;
3. for a row of your own, a source tree named by ``$NPU_FIXES_GENUINE_TREE`` (any checkout
   holding ``torch_npu/_inductor/triton_experimental``), whose defects are not known in
   advance.

Without a source, :func:`source_of` raises :class:`Unavailable` with the reason.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from npu_fixes.fixes import all_fixes
from npu_fixes.shim import catalogue
from npu_fixes.tools.host import extract_wheel

REPO = Path(__file__).resolve().parent.parent
BACKEND = Path("torch_npu/_inductor/triton_experimental")
FIVE = ("rsplit-outer", "dualview-fold", "launch-grid", "boundary-downcast", "rng-capture-gate")

_CATALOGUE = {f.name: f.about for f in all_fixes() if f.module.startswith("torch_npu.")}
COMMITS = tuple(catalogue.COMMITS)
#: Commit -> the five fixes' defects present there (read from the fixes' catalogue entries).
DEFECTS: dict[str, frozenset[str]] = {c: frozenset(n for n in FIVE if c in _CATALOGUE[n].present) for c in COMMITS}
#: The backend's defects beyond the five, by the name of the fix or guard that handles each:
#: the genuine commits where the defect is present (the fixes' catalogue entries).
BEYOND: dict[str, frozenset[str]] = {n: about.present & catalogue.EVERY_COMMIT
                                     for n, about in _CATALOGUE.items() if n not in FIVE}
#: Fix name -> the states that lack the code it repairs (status: ``absent``, audit: ``absent``).
ABSENT: dict[str, frozenset[str]] = {n: about.absent for n, about in _CATALOGUE.items() if about.absent}
#: The defects no published state has fixed: present in the 2.13.0 and 2.14.0 wheels too.
UNFIXED = frozenset(n for n, about in _CATALOGUE.items() if about.fixed_in == catalogue.NOT_FIXED)
#: Environment that switches their fixes off: a published wheel then gets none of ours.
WITHOUT_UNFIXED = {"NPU_FIXES_DISABLE": ",".join(sorted(UNFIXED))}
PRE_FIX = tuple(c for c in COMMITS if DEFECTS[c])
#: The commit where upstream fixed the last of the five: the reference behaviour.
REFERENCE = "5ff81d9c5"
#: Name of the row built from ``$NPU_FIXES_GENUINE_TREE``.
OWN_TREE = "tree"


def needed_at(state: str) -> frozenset[str]:
    """Every defect (the five and those beyond) present at a genuine state."""
    return DEFECTS[state] | {name for name, states in BEYOND.items() if state in states}


def absent_at(state: str) -> frozenset[str]:
    """The fixes whose target code a genuine state does not have."""
    return frozenset(name for name, states in ABSENT.items() if state in states)


def untouched(needed: frozenset[str]) -> dict[str, bool]:
    """Backend fix name -> whether its first target stays the very object it was when the
    fixes in ``needed`` are applied: not where a needed fix with an install (a repair or a
    guard) changed that target (several fixes share targets)."""
    from npu_fixes.fixes import all_fixes

    backend = [f for f in all_fixes() if f.module.startswith("torch_npu.")]
    changed = {(f.module, t) for f in backend if f.name in needed and f.install for t in f.targets}
    return {f.name: (f.module, f.targets[0]) not in changed for f in backend}


def sharing_the_target(name: str) -> str:
    """The other fixes that patch the first target of fix ``name``, comma-separated (for
    ``NPU_FIXES_DISABLE``: a run that checks that fix alone leaves its target as it was)."""
    from npu_fixes.fixes import all_fixes

    fixes = {f.name: f for f in all_fixes()}
    ours = fixes[name]
    return ",".join(n for n, f in fixes.items() if n != name
                    and (f.module, *f.targets[:1]) == (ours.module, *ours.targets[:1]))


def expected_state(name: str, needed: frozenset[str], absent: frozenset[str] = frozenset()) -> str:
    """What status() says of backend fix ``name`` when the defects in ``needed`` are present
    and the code of the fixes in ``absent`` is missing."""
    from npu_fixes.fixes import all_fixes

    if name in absent:
        return "absent"
    if name not in needed:
        return "not-needed"
    return "applied" if {f.name: f for f in all_fixes()}[name].repairable else "upgrade-needed"


class Unavailable(RuntimeError):
    """No source for a genuine state on this machine."""


def upstream_dir() -> Path:
    return Path(os.environ.get("NPU_FIXES_UPSTREAM", REPO.parent / "shared" / "upstream"))


def source_of(state: str) -> Path | bytes:
    """The backend folder of ``state``: a tarball path, tarball bytes or a tree's folder."""
    if state == OWN_TREE:
        tree = os.environ.get("NPU_FIXES_GENUINE_TREE")
        if not tree:
            raise Unavailable("NPU_FIXES_GENUINE_TREE is not set")
        folder = Path(tree) / BACKEND
        if not folder.is_dir():
            raise Unavailable(f"{tree} has no {BACKEND}")
        return folder
    tarball = upstream_dir() / f"triton_experimental-{state}.tar.gz"
    if tarball.is_file():
        return tarball
    clone = os.environ.get("NPU_FIXES_ASCEND_PYTORCH")
    if not clone:
        raise Unavailable(f"no {tarball} and NPU_FIXES_ASCEND_PYTORCH (an Ascend/pytorch clone) is not set")
    proc = subprocess.run(["git", "-C", clone, "archive", "--format=tar.gz", state, str(BACKEND)],
                          capture_output=True)
    if proc.returncode != 0:
        raise Unavailable(f"git archive {state} in {clone} failed: {proc.stderr.decode().strip()}")
    return proc.stdout


def build(state: str, wheel: Path, dest: Path) -> Path:
    """Write the self-build of ``state`` into ``dest`` (the directory that will hold
    ``torch_npu/``): the wheel's Python files, its backend folder replaced. Returns ``dest``."""
    source = source_of(state)
    dest.mkdir(parents=True, exist_ok=True)
    replace_backend(extract_wheel(wheel, dest), source)
    return dest


def replace_backend(root: Path, source: Path | bytes) -> None:
    """Replace ``root/torch_npu/.../triton_experimental`` by the folder from ``source``."""
    shutil.rmtree(root / BACKEND, ignore_errors=True)
    if isinstance(source, Path) and source.is_dir():
        shutil.copytree(source, root / BACKEND)
        return
    stream = io.BytesIO(source) if isinstance(source, bytes) else None
    with tarfile.open(fileobj=stream, name=None if stream else str(source), mode="r:gz") as archive:
        members = [m for m in archive.getmembers() if Path(m.name).is_relative_to(BACKEND)]
        if not members:
            raise Unavailable(f"the archive for {root} holds no {BACKEND}")
        archive.extractall(root, members=members, filter="data")
    if not (root / BACKEND / "__init__.py").is_file():
        raise Unavailable(f"the archive holds no {BACKEND}/__init__.py")
