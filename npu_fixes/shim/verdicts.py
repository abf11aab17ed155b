"""Probe verdicts kept between processes, so that only the first process of an install probes.

A verdict is what a fix's probe found on the code as it ran there (defective or not, and why).
It is kept under a key that holds everything a probe's answer can depend on: the exact bytes
of the backend's folder and of the loader files a build runs (``torch_npu/_inductor/__init__.py``,
``decomposition.py``), npu_fixes' own run-time code (``fixes/``, ``shim/``), the versions of
Python, torch and Triton (and where that Triton lies: triton-ascend installs one too), the fixes
``NPU_FIXES_DISABLE`` turns off (a fix left out changes what the probes after it see), and the
environment variables that set Inductor, Triton or the backend up (:data:`SETTINGS`).
Any change of those is another key, so a verdict is never used for code it was not found on.
One JSON file per key in the cache folder; it is written whole to a temporary file and renamed
over the old one, so that ranks starting together never read half a file (a file that cannot
be read is a miss, and is written again). ``NPU_FIXES_VERDICT_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from . import switches
from .fix import Probe

SWITCH = "NPU_FIXES_VERDICT_CACHE"
DIRECTORY = "NPU_FIXES_CACHE_DIR"
#: The files of a torch_npu tree (below ``torch_npu/_inductor``) that a verdict depends on.
LOADER_FILES = ("__init__.py", "decomposition.py")
#: Environment variables that set Inductor, Triton or the backend up before a probe runs.
SETTINGS = ("TORCHINDUCTOR_", "TRITON_", "INDUCTOR_", "NPU_", "TORCH_NPU_")
FORMAT = 1
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the npu_fixes package


def enabled() -> bool:
    return bool(switches.flag(SWITCH, True))


def folder() -> Path:
    """``$NPU_FIXES_CACHE_DIR``, else ``npu_fixes/verdicts`` in the user's cache folder."""
    given = os.environ.get(DIRECTORY)
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "npu_fixes" / "verdicts"


def _inductor_dir(module: ModuleType) -> str | None:
    """``torch_npu/_inductor`` of the tree ``module`` was loaded from."""
    path = os.path.dirname(getattr(module, "__file__", None) or "")
    while os.path.basename(path) and not (os.path.basename(path) == "_inductor"
                                          and os.path.basename(os.path.dirname(path)) == "torch_npu"):
        path = os.path.dirname(path)
    return path if os.path.basename(path) else None


def _python_files(root: str, label: str) -> list[tuple[str, str]]:
    """``(label/relative path, path)`` of the Python files below ``root``, in order."""
    return sorted((f"{label}/{os.path.relpath(os.path.join(folder, name), root)}", os.path.join(folder, name))
                  for folder, _, names in os.walk(root) for name in names if name.endswith(".py"))


def _files(inductor: str) -> list[tuple[str, str]]:
    """The files a verdict depends on, named relative to their tree: the same sources anywhere
    (a wheel extracted afresh, a copied site) are the same key."""
    own = [f for sub in ("fixes", "shim") for f in _python_files(os.path.join(_OWN, sub), f"npu_fixes/{sub}")]
    return [*_python_files(os.path.join(inductor, "triton_experimental"), "triton_experimental"),
            *((f, os.path.join(inductor, f)) for f in LOADER_FILES), *own]


#: Content digests of file sets, by the files' paths, sizes and modification times: each set
#: is read once per process while it stays as it is.
_DIGESTS: dict[tuple, str] = {}


def _content(files: list[tuple[str, str]]) -> str:
    stamp = []
    for _, path in files:
        try:
            st = os.stat(path)
            stamp.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append((path, -1, -1))
    found = _DIGESTS.get(tuple(stamp))
    if found is None:
        digest = hashlib.sha256()
        for name, path in files:
            digest.update(f"\0{name}\0".encode())
            with contextlib.suppress(OSError), open(path, "rb") as f:
                digest.update(f.read())
        found = _DIGESTS[tuple(stamp)] = digest.hexdigest()
    return found


def key(module: ModuleType, disabled: Iterable[str]) -> str | None:
    """The key of the verdicts found on ``module``'s tree in this environment (None where the
    module is not part of a torch_npu tree on disk)."""
    inductor = _inductor_dir(module)
    if inductor is None:
        return None
    torch, triton = sys.modules.get("torch"), sys.modules.get("triton")
    settings = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(SETTINGS) and k != DIRECTORY)
    environment = (f"{FORMAT}\0{sys.version}\0torch {getattr(torch, '__version__', '-')}\0"
                   f"triton {getattr(triton, '__version__', '-')} at {getattr(triton, '__file__', '-')}\0"
                   f"{','.join(sorted(disabled))}\0{chr(0).join(settings)}\0")
    return hashlib.sha256((environment + _content(_files(inductor))).encode()).hexdigest()


def load(key_: str) -> dict[str, Probe]:
    """The verdicts kept under ``key_``; none where the file is missing or cannot be read."""
    try:
        data = json.loads((folder() / f"{key_}.json").read_text())
        return {name: Probe(bool(v["defective"]), str(v["detail"])) for name, v in data["verdicts"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def store(key_: str, verdicts: dict[str, Probe]) -> None:
    """Add ``verdicts`` to those kept under ``key_`` (a new file, renamed into place); a cache
    that cannot be written is left as it is."""
    where = folder()
    merged = load(key_) | verdicts
    data = {"format": FORMAT, "verdicts": {n: {"defective": p.defective, "detail": p.detail}
                                           for n, p in sorted(merged.items())}}
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=where, prefix=f".{key_[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(temporary, where / f"{key_}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError:
        pass
