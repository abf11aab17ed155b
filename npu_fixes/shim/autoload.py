"""Automatic load at interpreter start, through a one-line ``.pth`` file.

Standard library only. The ``.pth`` line is self-contained: it puts a tiny finder at
the front of ``sys.meta_path`` that does nothing until ``torch`` starts importing; then
it goes inert, and torch's own loader imports :mod:`npu_fixes` (which arms the import
hooks) just before torch's code runs. Not the finder itself: importlib calls finders with
its global import lock held, and an import from there can deadlock against another
thread's import. The finder stays in ``sys.meta_path``: importlib is iterating that very
list when the finder runs, so removing itself there would make importlib skip the next
finder (another package's hook, an editable install's finder).
Running the line twice is harmless (the finder is inserted once), ``NPU_FIXES=0`` (or
off/false/no, as :mod:`npu_fixes.shim.switches` reads it) skips it, and an error while
importing ``npu_fixes`` is logged, never raised into the user's ``import torch``; that
warning's remedy (delete the ``.pth``) works without npu-fixes, which may be the very
thing that was uninstalled.
"""

from __future__ import annotations

import errno
import os
import site
import sysconfig
from pathlib import Path

PTH_NAME = "npu_fixes-autoload.pth"

FINDER_CODE = """\
import os, sys
if os.environ.get('NPU_FIXES', '').strip().lower() not in ('0', 'false', 'no', 'off') and not any(
        getattr(f, '_npu_fixes_autoload', False) for f in sys.meta_path):
    class _NpuFixesAutoload:
        _npu_fixes_autoload = True
        done = False

        @staticmethod
        def arm():
            try:
                import npu_fixes
            except Exception as exc:
                import logging
                logging.getLogger('npu_fixes').warning(
                    'npu_fixes autoload: cannot import npu_fixes (%s); %s', exc, __REMEDY__)

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name != 'torch' or cls.done:
                return None
            cls.done = True
            for finder in list(sys.meta_path):
                find = None if finder is cls else getattr(finder, 'find_spec', None)
                spec = find and find(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            if not hasattr(spec.loader, 'exec_module'):
                cls.arm()
                return spec
            loader = spec.loader

            class Arming:
                def __getattr__(self, attr):
                    return getattr(loader, attr)

                def create_module(self, spec):
                    return loader.create_module(spec)

                def exec_module(self, module):
                    module.__loader__ = module.__spec__.loader = loader
                    cls.arm()
                    loader.exec_module(module)
            spec.loader = Arming()
            return spec
    sys.meta_path.insert(0, _NpuFixesAutoload)
"""

#: The whole ``.pth`` file: one line, run by ``site`` because it starts with ``import``.
PTH_LINE = "import sys; exec(%r)\n"


def site_dir() -> Path:
    """This environment's site-packages (where ``site`` reads ``.pth`` files)."""
    return Path(sysconfig.get_path("purelib"))


def site_dirs() -> list[Path]:
    """The directories whose ``.pth`` files this interpreter runs at start-up."""
    found = [*getattr(site, "getsitepackages", list)()]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    found += [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return [Path(d) for d in dict.fromkeys(found)]


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def is_site_dir(directory: str | os.PathLike[str] | None = None) -> bool:
    """Whether this interpreter reads ``.pth`` files from ``directory`` (default: :func:`site_dir`)."""
    target = directory if directory is not None else site_dir()
    return any(_same(target, d) for d in site_dirs())


def pth_path(directory: str | os.PathLike[str] | None = None) -> Path:
    """The ``.pth`` file in ``directory`` (default: :func:`site_dir`)."""
    return Path(directory if directory is not None else site_dir()) / PTH_NAME


def finder_code(remedy: str) -> str:
    """The finder code; its warning (npu_fixes cannot be imported) ends with ``remedy``."""
    return FINDER_CODE.replace("__REMEDY__", repr(remedy))


def pth_text(path: Path) -> str:
    # Not `npu-fixes autoload disable`: this warning shows when npu-fixes is gone.
    return PTH_LINE % (finder_code(f"delete {path} to remove this autoload"),)


def arm() -> None:
    """Insert the finder now (what the ``.pth`` line does); for ``sitecustomize.py``."""
    exec(finder_code("remove the npu_fixes lines from sitecustomize.py"), {})  # noqa: S102


def enable(directory: str | os.PathLike[str] | None = None) -> Path:
    """Write the ``.pth`` file (idempotent) and return its path; OSError if it cannot."""
    path = pth_path(directory)
    text = pth_text(path)
    if not path.is_file() or path.read_text() != text:
        for parent in (path.parent, *path.parent.parents):  # the first one there must be a dir
            if parent.exists():
                if not parent.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(parent))
                break
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def disable(directory: str | os.PathLike[str] | None = None) -> bool:
    """Remove the ``.pth`` file; return whether there was one."""
    path = pth_path(directory)
    if path.is_file():
        path.unlink()
        return True
    return False


def is_enabled(directory: str | os.PathLike[str] | None = None) -> bool:
    """Whether the ``.pth`` file is there and holds the line :func:`enable` writes, for
    whatever spelling of its path (see :func:`is_site_dir`: whether it is read)."""
    mark = "NPU_FIXES_PTH_PATH"  # stands for the path: written verbatim, whatever the quoting
    head, _, tail = pth_text(Path(mark)).partition(mark)
    try:
        text = pth_path(directory).read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return text.startswith(head) and text.endswith(tail) and "\n" not in text[len(head):-len(tail)]
