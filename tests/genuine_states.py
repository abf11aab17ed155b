"""Genuine states of the backend: the code our users run, as self-builds on CPU.

A self-build at commit C is the published torch-npu 2.13.0 wheel with two parts of commit C
of the public Ascend/pytorch repository in place of the wheel's (:data:`PARTS`): the
``torch_npu/_inductor/triton_experimental/`` folder, and the loader's two files,
``torch_npu/_inductor/__init__.py`` and ``decomposition.py`` (the loader registers that
state's decompositions before the backend's ``_activate()``). Each part comes from, in this
order:

1. ``$NPU_FIXES_UPSTREAM/<part>-C.tar.gz`` (default: ``../shared/upstream`` next to the
   repository, where CI has them);
2. ``git archive C`` of a local Ascend/pytorch clone named by ``$NPU_FIXES_ASCEND_PYTORCH``;
3. for a row of your own, a source tree named by ``$NPU_FIXES_GENUINE_TREE`` (any checkout
   holding those paths), whose defects are not known in advance.

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
INDUCTOR = Path("torch_npu/_inductor")
BACKEND = INDUCTOR / "triton_experimental"
#: The parts of a self-build taken from its commit, by the name of upstream's tarball of each:
#: the paths each replaces in the wheel.
PARTS = {"triton_experimental": (BACKEND,),
         "inductor-loader": (INDUCTOR / "__init__.py", INDUCTOR / "decomposition.py")}
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
    return {f.name: f for f in all_fixes()}[name].present_state.value


class Unavailable(RuntimeError):
    """No source for a genuine state on this machine."""


def upstream_dir() -> Path:
    return Path(os.environ.get("NPU_FIXES_UPSTREAM", REPO.parent / "shared" / "upstream"))


def source_of(state: str, part: str = "triton_experimental") -> Path | bytes:
    """``part`` (a key of :data:`PARTS`) of ``state``: a tarball path, tarball bytes or, for
    :data:`OWN_TREE`, the tree holding its paths."""
    paths = PARTS[part]
    if state == OWN_TREE:
        tree = os.environ.get("NPU_FIXES_GENUINE_TREE")
        if not tree:
            raise Unavailable("NPU_FIXES_GENUINE_TREE is not set")
        for path in paths:
            if not (Path(tree) / path).exists():
                raise Unavailable(f"{tree} has no {path}")
        return Path(tree)
    tarball = upstream_dir() / f"{part}-{state}.tar.gz"
    if tarball.is_file():
        return tarball
    clone = os.environ.get("NPU_FIXES_ASCEND_PYTORCH")
    if not clone:
        raise Unavailable(f"no {tarball} and NPU_FIXES_ASCEND_PYTORCH (an Ascend/pytorch clone) is not set")
    proc = subprocess.run(["git", "-C", clone, "archive", "--format=tar.gz", state, *map(str, paths)],
                          capture_output=True)
    if proc.returncode != 0:
        raise Unavailable(f"git archive {state} in {clone} failed: {proc.stderr.decode().strip()}")
    return proc.stdout


def build(state: str, wheel: Path, dest: Path) -> Path:
    """Write the self-build of ``state`` into ``dest`` (the directory that will hold
    ``torch_npu/``): the wheel's Python files, the parts of ``state`` in place. Returns ``dest``."""
    sources = {part: source_of(state, part) for part in PARTS}
    dest.mkdir(parents=True, exist_ok=True)
    replace_parts(extract_wheel(wheel, dest), sources)
    return dest


def replace_parts(root: Path, sources: dict[str, Path | bytes]) -> None:
    """Replace the paths of each part under ``root`` by those from its source (see
    :func:`source_of`); every call does it afresh, so an existing site gets the sources as
    they are now."""
    for part, source in sources.items():
        paths = PARTS[part]
        for path in paths:
            if (root / path).is_dir():
                shutil.rmtree(root / path)
            else:
                (root / path).unlink(missing_ok=True)
        if isinstance(source, Path) and source.is_dir():
            for path in paths:
                if (source / path).is_dir():
                    shutil.copytree(source / path, root / path)
                else:
                    shutil.copy2(source / path, root / path)
        else:
            _extract(root, source, paths)
        for path in paths:
            if not (root / path).is_file() and not (root / path / "__init__.py").is_file():
                raise Unavailable(f"the {part} archive for {root} holds no {path}")


def _extract(root: Path, source: Path | bytes, paths: tuple[Path, ...]) -> None:
    """The members of the tarball ``source`` at or below ``paths``, extracted into ``root``."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else None
    with tarfile.open(fileobj=stream, name=None if stream else str(source), mode="r:gz") as archive:
        members = [m for m in archive.getmembers() if any(Path(m.name).is_relative_to(p) for p in paths)]
        archive.extractall(root, members=members, filter="data")
