"""Small real installs beside the test venv, for the audit and the run on what users have:
a venv whose site-packages holds the test venv's packages (as links) but some left out
(``numpy``, ``expecttest``, ``torch``), or torch with its version string edited (2.14.1, a patch
release inside the window; 2.15.0, past it); a torch_npu install whose version string says
another release. Each is made in a second and takes no disk: only the edited files are copies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

#: The test venv's site-packages, whose entries the variants link to.
SITE = Path(sysconfig.get_paths()["purelib"])


def _entries(distribution: str) -> set[str]:
    """The site-packages entries of an installed ``distribution`` (its packages, its
    ``dist-info``, its ``.libs``), from its own record of its files."""
    return {f.parts[0] for f in metadata.distribution(distribution).files or () if f.parts[0] != ".."}


def make_venv(dest: Path, leave_out: tuple[str, ...] = (), torch_version: str | None = None) -> Path:
    """A venv at ``dest`` with the test venv's packages but the distributions ``leave_out``;
    with ``torch_version``, torch's version string (module and metadata) edited to it.
    Returns the venv's interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = dest / SITE.relative_to(Path(sys.prefix))
    skipped = set().union(*map(_entries, leave_out))
    edited = {e for e in _entries("torch") if e == "torch" or e.endswith(".dist-info")} if torch_version else set()
    for entry in sorted(set(os.listdir(SITE)) - skipped - {"__pycache__"}):
        if entry in edited:
            _edited_torch(SITE / entry, site / entry, torch_version)
        else:
            (site / entry).symlink_to(SITE / entry)
    return dest / "bin" / "python"


def _edited_torch(source: Path, dest: Path, version: str) -> None:
    """``torch/`` or its ``dist-info`` at ``dest`` with the version string ``version``: the
    edited file a copy, every other entry a link."""
    dest.mkdir()
    edited = {"version.py": r"^__version__ = .*$", "METADATA": r"^Version: .*$"}
    for entry in os.listdir(source):
        pattern = edited.get(entry)
        if pattern is None:
            (dest / entry).symlink_to(source / entry)
            continue
        text = (source / entry).read_text()
        line = f"__version__ = '{version}'" if entry == "version.py" else f"Version: {version}"
        (dest / entry).write_text(re.sub(pattern, line, text, count=1, flags=re.M))


def torch_npu_as(site: Path, dest: Path, version: str) -> Path:
    """``dest``: the torch_npu install at ``site`` with the version string ``version`` in its
    ``torch_npu/version.py`` (a copy; every other entry a link)."""
    dest.mkdir()
    for entry in os.listdir(site):
        if entry != "torch_npu":
            (dest / entry).symlink_to(site / entry)
    (dest / "torch_npu").mkdir()
    for entry in os.listdir(site / "torch_npu"):
        if entry != "version.py":
            (dest / "torch_npu" / entry).symlink_to(site / "torch_npu" / entry)
    text = (site / "torch_npu" / "version.py").read_text()
    (dest / "torch_npu" / "version.py").write_text(re.sub(r"^__version__ = .*$", f"__version__ = '{version}'",
                                                          text, count=1, flags=re.M))
    return dest

