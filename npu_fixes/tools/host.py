"""Load a torch_npu's ``triton_experimental`` Python code on a machine without CANN or NPU.

``torch_npu/__init__.py`` needs the CANN libraries, so it is never run: the parent
packages ``torch_npu`` and ``torch_npu._inductor`` are provided as bare packages that
point at the real directories, ``torch_npu/version.py`` is loaded on its own, the
``triton_experimental.device`` module (NPU runtime wiring) is replaced by a small
stand-in, and the ``torch.ops.npu`` schemas that module bodies reference are defined
with ``torch.library``. The backend's own modules are then imported for real.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import email.parser
import importlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import types
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

BACKEND = "torch_npu._inductor.triton_experimental"
#: Modules that hold fix targets, imported in this order when present.
BACKEND_MODULES = ("npu_triton_heuristics", "codegen.triton", "lowering", "overrides", "npu_triton_helpers")
#: The loader's modules imported with the backend, by full name (the loader of a build imports
#: them before it activates the backend; their registration is not run here).
LOADER_MODULES = ("torch_npu._inductor.decomposition",)
#: The NPU the CPU stands for, as torch_npu's runtime describes it to the loader's modules: an
#: Ascend910B3 (``SocVersion`` 223 in torch_npu's ``NpuVariables.h``) with 20 cube and 40 vector
#: cores (40: the backend's own default).
SOC_VERSION = 223
CORES = {"cube_core_num": 20, "vector_core_num": 40}

#: Schemas of ``torch.ops.npu`` ops referenced at import time by the backend, and by its
#: loader's decomposition registration (``torch_npu/_inductor/decomposition.py``).
NPU_SCHEMAS = {
    "npu_dtype_cast": "npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    "npu_dtype_cast_backward": "npu_dtype_cast_backward(Tensor grad, ScalarType dtype) -> Tensor",
    "_npu_dtype_cast": "_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    "_npu_dtype_cast_backward": "_npu_dtype_cast_backward(Tensor grad, ScalarType dtype) -> Tensor",
    "_npu_dropout": "_npu_dropout(Tensor self, float p) -> (Tensor, Tensor)",
    "npu_dropout_backward": "npu_dropout_backward(Tensor grad_output, Tensor mask, float p) -> Tensor",
    "npu_rms_norm": "npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    "npu_rms_norm_backward":
        "npu_rms_norm_backward(Tensor dy, Tensor self, Tensor gamma, Tensor rstd) -> (Tensor, Tensor)",
}
#: Tags of those ops, as torch_npu's ``npu_native_functions`` yaml gives them: a random op
#: tagged ``nondeterministic_seeded`` is what Inductor orders with ``control_deps``.
NPU_TAGS = {"_npu_dropout": ("nondeterministic_seeded",)}
_MISSING_OP = re.compile(r"'_OpNamespace' 'npu' object has no attribute '(\w+)'")
_MAX_SCHEMA_RETRIES = 20


class NotTorchNpu(ValueError):
    """The given location is not a torch_npu install, source tree or wheel."""


class RealTorchNpuLoaded(RuntimeError):
    """A real torch_npu is already imported; host-loading would mix two of them."""


@dataclasses.dataclass
class HostLoad:
    """What was loaded: the root holding ``torch_npu/``, its version and the modules."""

    root: Path
    source: Path
    version: str | None
    has_backend: bool
    modules: dict[str, types.ModuleType]
    errors: dict[str, str]
    #: Why ``torch_npu/version.py`` could not be run (None when it ran or is absent).
    version_error: str | None = None

    def module(self, short: str) -> types.ModuleType | None:
        """A loaded module by short name: a backend module's (``"lowering"``), a loader module's full name."""
        return self.modules.get(short)


def find_root(location: str | os.PathLike[str]) -> Path:
    """Return the directory that contains ``torch_npu/`` for an installed package dir,
    a site-packages dir or a source tree; raise :class:`NotTorchNpu` otherwise."""
    try:
        path = Path(location).resolve()
    except RuntimeError:  # Python < 3.13: "Symlink loop from ..."
        raise NotTorchNpu(f"{location}: symbolic link loop") from None
    if not path.exists():
        raise NotTorchNpu(f"{path}: no such file or directory")
    if path.is_dir() and path.name == "torch_npu" and (path / "__init__.py").is_file():
        return path.parent
    if (path / "torch_npu" / "__init__.py").is_file():
        return path
    raise NotTorchNpu(
        f"{path} is not a torch_npu install, source tree or wheel "
        "(expected a torch_npu/__init__.py in it or below it, or a .whl file)"
    )


def extract_wheel(wheel: Path, dest: Path) -> Path:
    """Extract the Python files of ``torch_npu`` from ``wheel`` into ``dest``."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise NotTorchNpu(f"{wheel}: not a readable wheel ({exc})") from None
    with archive:
        names = [n for n in archive.namelist() if n.startswith("torch_npu/") and n.endswith(".py")]
        if "torch_npu/__init__.py" not in names:
            raise NotTorchNpu(f"{wheel}: wheel has no torch_npu/__init__.py")
        for name in names:
            try:
                archive.extract(name, dest)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
                raise NotTorchNpu(f"{wheel}: corrupt wheel, cannot extract {name} ({exc})") from None
    return dest


def requirements(location: str | os.PathLike[str]) -> list[str] | None:
    """The ``Requires-Dist`` lines of the torch_npu at ``location``: a wheel's metadata, or
    that of the ``torch_npu-*.dist-info`` beside an install; None where there is none (a
    source tree)."""
    source = Path(location)
    try:
        if source.is_file():
            with zipfile.ZipFile(source) as archive:
                names = [n for n in archive.namelist()
                         if re.fullmatch(r"torch_npu-[^/]*\.dist-info/METADATA", n)]
                text = archive.read(names[0]).decode() if names else None
        else:
            found = sorted(find_root(source).glob("torch_npu-*.dist-info/METADATA"))
            text = found[0].read_text() if found else None
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, NotTorchNpu):
        return None
    return None if text is None else email.parser.Parser().parsestr(text).get_all("Requires-Dist") or []


def backend_dir(root: Path) -> Path:
    """The ``triton_experimental`` folder of the torch_npu tree at ``root``."""
    return root / Path(*BACKEND.split("."))


def installed_location() -> Path | None:
    """Directory of the installed torch_npu package, found without importing it."""
    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _bare_package(name: str, path: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    module.__package__ = name
    module.__file__ = None
    # a spec as an imported package has one: ``importlib.util.find_spec`` (transformers asks it)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__spec__.submodule_search_locations = module.__path__
    sys.modules[name] = module
    return module


def _device_stand_in() -> types.ModuleType:
    """Replacement for ``triton_experimental.device``: a raw stream of 0, no registration."""
    module = types.ModuleType(f"{BACKEND}.device")
    module.__doc__ = "npu_fixes host stand-in: no NPU runtime on this machine."
    module.get_current_raw_stream = lambda device_index=0: 0
    for name in ("register_backend_for_npu", "register_device_op_overrides_for_npu",
                 "register_interface_for_npu"):
        setattr(module, name, lambda: None)
    return module


def _language_stand_in() -> None:
    """Where the host's Triton has no triton-ascend language extension, an empty
    ``tl.extra.cann``: the backend's helper module reads ``tl.extra.cann.libdevice`` when
    imported, and kernel text only names its functions. (``npu_fixes.tools.interpret``
    gives kernels it runs a working one.)"""
    try:
        import triton.language.extra as extra
    except ImportError:  # no Triton: the modules that need it report the error
        return
    if hasattr(extra, "cann") or hasattr(extra, "ascend"):
        return
    cann = types.ModuleType("triton.language.extra.cann")
    cann.__doc__ = "npu_fixes host stand-in: triton-ascend is not installed here."
    cann.libdevice = types.ModuleType("triton.language.extra.cann.libdevice")
    extra.cann = cann


_LIBRARY: list = []  # keeps the torch.library fragment alive


def _define_npu_op(name: str, schema: str | None = None) -> None:
    import torch

    if hasattr(torch.ops.npu, name):
        return
    if not _LIBRARY:
        _LIBRARY.append(torch.library.Library("npu", "FRAGMENT"))
    tags = tuple(getattr(torch.Tag, tag) for tag in NPU_TAGS.get(name, ()))
    _LIBRARY[0].define(schema or f"{name}(Tensor self) -> Tensor", tags=tags)


@contextlib.contextmanager
def npu_runtime_answers() -> Iterator[None]:
    """While open, torch_npu's runtime answers the device queries of the loader's modules as
    :data:`SOC_VERSION` and :data:`CORES` say: ``torch_npu.npu._backends.get_soc_version`` and
    ``torch.npu``'s current device and its properties (the wheels' ``decomposition.py`` imports
    ``_inductor/config.py``, which asks both when imported)."""
    import torch

    npu = types.ModuleType("torch_npu.npu")
    npu.__path__ = []  # a package, whose one submodule is the one below
    backends = types.ModuleType("torch_npu.npu._backends")
    backends.get_soc_version = lambda: SOC_VERSION
    device = types.SimpleNamespace(current_device=lambda: 0,
                                   get_device_properties=lambda index=None: types.SimpleNamespace(**CORES))
    stand_ins = {npu.__name__: npu, backends.__name__: backends}
    saved = {name: sys.modules.get(name) for name in stand_ins}
    had_npu, torch_npu_attr = hasattr(torch, "npu"), getattr(torch, "npu", None)
    sys.modules.update(stand_ins)
    torch.npu = device
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if had_npu:
            torch.npu = torch_npu_attr
        else:
            del torch.npu


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an exception raised by the code being loaded."""
    return f"{type(exc).__name__}: {exc}"


def _load_version(root: Path) -> tuple[str | None, str | None]:
    """The version from ``torch_npu/version.py`` and, if running it raised, why."""
    module = types.ModuleType("torch_npu.version")
    path = root / "torch_npu" / "version.py"
    sys.modules["torch_npu.version"] = module
    if path.is_file():
        try:
            exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the audited code's, reported
            return None, f"torch_npu/version.py raised {_describe(exc)}"
    version = getattr(module, "__version__", None)
    return (str(version) if version else None), None


@contextlib.contextmanager
def no_bytecode() -> Iterator[None]:
    """Import without writing ``__pycache__`` into the tree being loaded."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved


def _import_with_schemas(name: str) -> types.ModuleType:
    """Import ``name``; an unknown ``torch.ops.npu`` op gets a generic schema, then retry."""
    for _ in range(_MAX_SCHEMA_RETRIES):
        try:
            return importlib.import_module(name)
        except AttributeError as exc:
            missing = _MISSING_OP.search(str(exc))
            if not missing:
                raise
            sys.modules.pop(name, None)
            _define_npu_op(missing.group(1))
    raise ImportError(f"{name}: too many unknown torch.ops.npu ops")


def unload() -> None:
    """Forget every ``torch_npu`` module (host-loaded or not) from ``sys.modules``."""
    for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
        del sys.modules[name]


def load(location: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None) -> HostLoad:
    """Load the ``triton_experimental`` modules of the torch_npu at ``location``.

    ``location`` is an installed ``torch_npu`` directory, a directory containing
    ``torch_npu/`` (site-packages or a source tree) or a ``.whl`` file. Wheels are
    extracted into ``workdir`` (by default a temporary directory, removed at exit). The modules are
    registered in ``sys.modules`` under their real names, so post-import hooks fire. No
    ``__pycache__`` is written into the loaded tree. Whatever the loaded code raises while
    it is imported (``SystemExit`` too) is reported in ``errors``/``version_error``.
    """
    source = Path(location)
    root = locate(source, workdir)
    existing = sys.modules.get("torch_npu")
    if existing is not None and getattr(existing, "__file__", None):
        raise RealTorchNpuLoaded(
            "a real torch_npu is already imported in this process; "
            "host-load in a fresh process with TORCH_DEVICE_BACKEND_AUTOLOAD=0"
        )
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    import torch  # noqa: F401  (the backend modules need it)

    with no_bytecode():
        return _load_modules(root, source)


def locate(location: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None) -> Path:
    """The root holding ``torch_npu/`` for ``location`` (a wheel is extracted first, into
    ``workdir`` or a temporary directory removed at exit); :class:`NotTorchNpu` where there
    is none. Nothing is loaded."""
    source = Path(location)
    try:
        return _locate(source, workdir)
    except OSError as exc:  # e.g. permission denied: the location is unusable
        where = exc.filename or source
        raise NotTorchNpu(f"{where}: {exc.strerror or exc}") from None


def _locate(source: Path, workdir: str | os.PathLike[str] | None) -> Path:
    if source.is_file() and source.suffix == ".whl":
        if workdir:
            dest = Path(workdir)
        else:  # our own temporary directory: removed when the interpreter exits
            dest = Path(tempfile.mkdtemp(prefix="npu_fixes_wheel_"))
            atexit.register(shutil.rmtree, dest, ignore_errors=True)
        return extract_wheel(source, dest)
    if source.is_file():
        raise NotTorchNpu(f"{source}: a file that is not a .whl")
    return find_root(source)


def _load_modules(root: Path, source: Path) -> HostLoad:
    unload()
    _bare_package("torch_npu", root / "torch_npu")
    _bare_package("torch_npu._inductor", root / "torch_npu" / "_inductor")
    version, version_error = _load_version(root)
    load_result = HostLoad(root, source.resolve(), version, backend_dir(root).is_dir(), {}, {}, version_error)
    if not load_result.has_backend:
        return load_result

    for op, schema in NPU_SCHEMAS.items():
        _define_npu_op(op, schema)
    sys.modules[f"{BACKEND}.device"] = _device_stand_in()
    _language_stand_in()
    wanted = [(short, f"{BACKEND}.{short}") for short in BACKEND_MODULES] + [(n, n) for n in LOADER_MODULES]
    for key, name in wanted:
        path = root / Path(*name.split("."))
        if not (path.with_suffix(".py").is_file() or path.is_dir()):
            continue
        answers = npu_runtime_answers() if name in LOADER_MODULES else contextlib.nullcontext()
        try:
            with answers:
                load_result.modules[key] = _import_with_schemas(name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported per module, SystemExit included
            load_result.errors[key] = _describe(exc)
    return load_result
