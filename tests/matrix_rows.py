"""The installed rows of the pinned-version matrix and the torch_npu each puts on the path.

A row is ``wheel:<version>`` (a pinned published wheel, installed ``--no-deps``),
``genuine:<commit>`` (the 2.13.0 wheel with that commit's ``triton_experimental``;
``genuine:tree`` with ``$NPU_FIXES_GENUINE_TREE``'s) or ``prefix:<fix>`` (the 2.13.0 wheel
with that one defect edited back in). ``noxfile.py`` makes one nox session of each;
``tests/test_matrix.py`` runs every row side by side in one test session, each row's
programs with its install first on their ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

from tests import genuine_states, prefix_copies

PINNED = ("2.12.0.post3", "2.13.0", "2.14.0")


def rows() -> list[str]:
    """Every installed row; ``genuine:tree`` only where ``$NPU_FIXES_GENUINE_TREE`` is set."""
    tree = [genuine_states.OWN_TREE] if os.environ.get("NPU_FIXES_GENUINE_TREE") else []
    return [*(f"wheel:{v}" for v in PINNED), *(f"genuine:{s}" for s in (*genuine_states.COMMITS, *tree)),
            *(f"prefix:{d}" for d in genuine_states.FIVE)]


def unpack(wheel: Path, site: Path) -> Path:
    """``site`` with ``wheel`` installed ``--no-deps``: its files unpacked where ``pip install
    --target`` puts those of a wheel without a ``.data`` folder, in a fifth of pip's time
    (0.9 s against 4.5 s on this 2-core machine). Kept where it is there already."""
    if not (site / "torch_npu" / "__init__.py").is_file():
        shutil.rmtree(site, ignore_errors=True)
        with zipfile.ZipFile(wheel) as archive:
            if any(name.split("/", 1)[0].endswith(".data") for name in archive.namelist()):
                raise ValueError(f"{wheel} has a .data folder: install it with pip")
            archive.extractall(site)
    return site


def install(row: str, wheel: Callable[[str], Path], site: Path) -> Path:
    """``site`` holding the torch_npu of ``row``, built from the pinned wheels (``wheel``
    finds the one of a version); the commit's parts of a genuine row (its backend and loader
    files) and the edit of a prefix row always made afresh (a tree may have changed)."""
    kind, _, name = row.partition(":")
    if kind == "wheel":
        return unpack(wheel(name), site)
    if kind == "genuine":
        sources = {part: genuine_states.source_of(name, part) for part in genuine_states.PARTS}
        genuine_states.replace_parts(unpack(wheel("2.13.0"), site), sources)
        return site
    if kind == "prefix":
        shutil.rmtree(site, ignore_errors=True)
        prefix_copies.build_prefix_copy(wheel("2.13.0"), site, [name])
        return site
    raise ValueError(f"unknown matrix row {row!r}: wheel:<version>, genuine:<commit> or prefix:<fix>")
