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


#: Version-string lines, by the file that holds one.
VERSION_LINES = {"version.py": ("^__version__ = .*$", "__version__ = '{}'"), "METADATA": ("^Version: .*$", "Version: {}")}


def _linked(source: Path, dest: Path, edited: set[str], version: str, left_out: set[str] = frozenset()) -> None:
    """``dest`` holding a link to each entry of ``source`` but ``left_out``; the paths of
    ``edited`` (relative to ``source``) copied instead, their version string set to ``version``,
    the folders above them made of links in turn."""
    dest.mkdir(exist_ok=True)
    for entry in sorted(set(os.listdir(source)) - left_out - {"__pycache__"}):
        below = {path.partition("/")[2] for path in edited if path.startswith(f"{entry}/")}
        if below:
            _linked(source / entry, dest / entry, below, version)
        elif entry in edited:
            pattern, line = VERSION_LINES[entry]
            text = (source / entry).read_text()
            (dest / entry).write_text(re.sub(pattern, line.format(version), text, count=1, flags=re.M))
        else:
            (dest / entry).symlink_to(source / entry)


def make_venv(dest: Path, leave_out: tuple[str, ...] = (), torch_version: str | None = None) -> Path:
    """A venv at ``dest`` with the test venv's packages but the distributions ``leave_out``;
    with ``torch_version``, torch's version string (module and metadata) edited to it.
    Returns the venv's interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    edited = {"torch/version.py", *(f"{e}/METADATA" for e in _entries("torch") if e.endswith(".dist-info"))}
    _linked(SITE, dest / SITE.relative_to(Path(sys.prefix)), edited if torch_version else set(), torch_version or "",
            set().union(*map(_entries, leave_out)))
    return dest / "bin" / "python"


def torch_npu_as(site: Path, dest: Path, version: str) -> Path:
    """``dest``: the torch_npu install at ``site`` with the version string ``version`` in its
    ``torch_npu/version.py`` (a copy; every other entry a link)."""
    _linked(site, dest, {"torch_npu/version.py"}, version)
    return dest
