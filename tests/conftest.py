"""Shared fixtures: pinned torch_npu wheels, fresh-interpreter runs, throwaway modules."""

from __future__ import annotations

import atexit
import compileall
import inspect
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from tests import forkserver
from tests.matrix_rows import PINNED

# This process keeps no probe verdict either (see _base_env).
os.environ["NPU_FIXES_VERDICT_CACHE"] = "0"
# Without a CUDA GPU, Triton kernels run in its interpreter. Set here, before anything
# (collection included) imports triton: Triton decides at import and @triton.jit time.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parent.parent
WHEEL_DIR = Path(os.environ.get("NPU_FIXES_WHEELS", REPO / ".cache" / "wheels"))
FIXED_UPSTREAM = ("2.13.0", "2.14.0")


#: The helpers below that start a program in an interpreter of its own.
PROGRAM_RUNNERS = frozenset({"run_program", "run_python", "cli"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that run a program in an interpreter of their own get the ``program`` marker
    (``-m "not program"`` is the in-process unit level); tests marked ``gpu`` are skipped
    where no CUDA GPU is present."""
    program = pytest.mark.program
    for item in items:
        if _runs_programs(item):
            item.add_marker(program)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def _runs_programs(item: pytest.Item) -> bool:
    """Whether the test function or one of its fixtures calls a ``PROGRAM_RUNNERS`` helper,
    directly or through functions of the test suite (its own module's or imported)."""
    info = getattr(item, "_fixtureinfo", None)
    fixtures = [defs[-1].func for defs in (info.name2fixturedefs.values() if info else ()) if defs]
    seen: set[object] = set()
    return any(_calls_runner(func, seen) for func in [getattr(item, "function", None), *fixtures])


def _calls_runner(func, seen: set[object]) -> bool:
    if not inspect.isfunction(func) or func in seen:
        return False
    seen.add(func)
    names: set[str] = set()
    codes = [func.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if inspect.iscode(c))
    if names & PROGRAM_RUNNERS:
        return True
    local = [func.__globals__.get(n) for n in names]
    return any(_calls_runner(f, seen) for f in local
               if inspect.isfunction(f) and f.__module__.split(".")[0] == "tests")


def wheel_path(version: str) -> Path:
    """The pinned torch_npu wheel; `scripts/test.sh` downloads them."""
    found = sorted(WHEEL_DIR.glob(f"torch_npu-{version}-*.whl"))
    if not found:
        pytest.fail(
            f"torch_npu {version} wheel not found in {WHEEL_DIR}; run `bash scripts/test.sh` "
            "(it downloads the pinned wheels) or set NPU_FIXES_WHEELS"
        )
    return found[0]


def with_bytecode(root: Path) -> Path:
    """Compile the bytecode of ``root/torch_npu/_inductor``, as pip does when it installs a
    wheel, checked against each source's hash (a file edited later is never run stale).
    ``host.load`` writes none into the tree it loads, so without it every program that
    host-loads the tree compiles the backend's 12,000 lines again (0.1 s)."""
    compileall.compile_dir(root / "torch_npu" / "_inductor", quiet=1,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    return root


#: version -> that pinned wheel installed in this process's folder (see ``wheel_install``).
_WHEEL_INSTALLS: dict[str, Path] = {}
#: Folders this process made and removes at the end (pytest_unconfigure).
_OWN_DIRS: list[str] = []


def wheel_install(version: str) -> Path:
    """The pinned wheel ``version`` as pip installs it, for programs that host-load the
    wheel's code: its torch_npu Python files extracted once per test process, their
    backend's bytecode compiled. Host-loading the ``.whl`` itself extracts it afresh in
    every program (0.8 s a program against 0.2 s); tests of that path pass ``wheel_path``."""
    if version not in _WHEEL_INSTALLS:
        from npu_fixes.tools.host import extract_wheel

        root = Path(tempfile.mkdtemp(prefix=f"npu-fixes-wheel-{version}-"))
        _OWN_DIRS.append(str(root))
        _WHEEL_INSTALLS[version] = with_bytecode(extract_wheel(wheel_path(version), root))
    return _WHEEL_INSTALLS[version]


def _base_env() -> dict[str, str]:
    """The environment of every test program before its own additions."""
    # Switches of this process (NPU_FIXES*, the ops tests' TRITON_INTERPRET) stay here. So
    # does CI: with it set, PyTorch's make_fallback raises for ops that have a decomposition
    # (a check meant for PyTorch's own CI), and the backend's registration trips over it.
    # So do COLUMNS and LINES (pytest-xdist sets them in its workers): a program's output
    # is not a terminal's, and tables must not be cut to the width of the one running pytest.
    # PYTEST_CURRENT_TEST names the running test: kept, it would make every test's programs
    # differ from the fork server's environment and start a new server per test.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NPU_FIXES")
           and k not in ("TRITON_INTERPRET", "CI", "COLUMNS", "LINES", "PYTEST_CURRENT_TEST")}
    env["NPU_FIXES_WHEELS"] = str(WHEEL_DIR)
    # Probe verdicts are not kept between test programs (a test that stands in for a probe or
    # a defect must not leave its verdict to the next): tests/test_verdicts.py turns them on.
    env["NPU_FIXES_VERDICT_CACHE"] = "0"
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    # Every compile lowers through the code under test (no FX graph or autograd cache hit);
    # the C++ it builds is shared by the whole session (see INDUCTOR_CACHE).
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    if INDUCTOR_CACHE in os.environ:
        env["TORCHINDUCTOR_CACHE_DIR"] = os.environ[INDUCTOR_CACHE]
    return env


#: The test programs' Inductor cache folder: one per test session, made by the process that
#: starts first (pytest-xdist's workers inherit it), removed by that process at the end;
#: or one given in this variable (``scripts/test.sh`` gives every matrix row one).
INDUCTOR_CACHE = "PYTEST_NPU_FIXES_INDUCTOR_CACHE"
_OWN_CACHE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    if INDUCTOR_CACHE not in os.environ:
        os.environ[INDUCTOR_CACHE] = tempfile.mkdtemp(prefix="npu-fixes-inductor-")
        _OWN_CACHE.append(os.environ[INDUCTOR_CACHE])


def pytest_unconfigure(config: pytest.Config) -> None:
    while _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE.pop(), ignore_errors=True)
        os.environ.pop(INDUCTOR_CACHE, None)
    while _OWN_DIRS:
        shutil.rmtree(_OWN_DIRS.pop(), ignore_errors=True)
    _WHEEL_INSTALLS.clear()


_SERVER: forkserver.ForkServer | None = None
#: The fork servers that made first steps of their own (``run_program``'s ``first_steps``),
#: by those steps and their environment.
_STARTED: dict[tuple[str, str], forkserver.ForkServer] = {}


def _server(env: dict[str, str], first_steps: str | None) -> forkserver.ForkServer:
    """The fork server for a program with ``env``: this process's (started on first use, again
    where the environment changed), or the one that made ``first_steps`` in ``env``."""
    global _SERVER
    if first_steps is not None:
        key = (first_steps, json.dumps(env, sort_keys=True))
        if key not in _STARTED:
            _STARTED[key] = forkserver.ForkServer(env, str(REPO), first_steps)
            atexit.register(_STARTED[key].stop)
        return _STARTED[key]
    server_env = {k: v for k, v in _base_env().items() if k != "PYTHONPATH"}
    if _SERVER is None or not forkserver.forkable(server_env, _SERVER.env):
        if _SERVER is not None:
            _SERVER.stop()
        _SERVER = forkserver.ForkServer(server_env, str(REPO))
        atexit.register(_SERVER.stop)
    return _SERVER


def _forked(argv: Sequence[str], env: dict[str, str], timeout: float,
            preload: Sequence[str], first_steps: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` as a child of a fork server (``_server``), which imports ``preload``
    first."""
    server = _server(env, first_steps)
    with tempfile.TemporaryDirectory(prefix="npu-fixes-program-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        code = server.run(argv, env, str(REPO), out, err, timeout, preload)
        return subprocess.CompletedProcess([sys.executable, *argv], code,
                                           Path(out).read_text(errors="replace"),
                                           Path(err).read_text(errors="replace"))


def _run(argv: Sequence[str], env: dict[str, str] | None, check: bool, path: Sequence[Path], fresh: bool,
         python: str | None = None, preload: Sequence[str] = (),
         first_steps: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGV`` with ``path`` (first) and the repo importable: forked from the fork
    server (``tests/forkserver.py``: torch already imported) unless ``fresh`` is asked for,
    ``env`` sets a variable read at import time or another ``python`` is named, then in a
    fresh interpreter (of ``python``, default this one's). ``preload``: modules the fork
    server imports before it forks (``tests/forkserver.py``). ``first_steps``: the program's
    first steps (code), the same for many programs: forked from a server that made them in a
    fresh interpreter with this environment, once for all such programs (and imported
    ``preload`` after them)."""
    full_env = _base_env()
    full_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*map(str, path), str(REPO), os.environ.get("PYTHONPATH")]))
    full_env.update(env or {})
    if first_steps is not None:
        if fresh or python is not None:
            raise ValueError("first_steps: made in a server's fresh interpreter; not with fresh or python")
        proc = _forked(argv, full_env, 600, preload, first_steps)
    elif not fresh and python is None and forkserver.forkable(full_env, _base_env()):
        proc = _forked(argv, full_env, 600, preload)
    else:
        proc = subprocess.run(
            [python or sys.executable, *argv], capture_output=True, text=True, env=full_env, cwd=REPO, timeout=600,
        )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_python(code: str, env: dict[str, str] | None = None, check: bool = True,
               path: Sequence[Path] = (), fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the one-line ``code`` (``python -c``) in an interpreter of its own (see ``_run``)."""
    return _run(["-c", textwrap.dedent(code)], env, check, path, fresh)


def run_program(module: str, program: str, env: dict[str, str] | None = None,
                check: bool = True, path: Sequence[Path] = (), fresh: bool = False,
                python: str | None = None, preload: Sequence[str] = (), first_steps: str | None = None,
                **kwargs):
    """Run ``program`` of ``tests.programs.<module>`` with ``kwargs`` in an interpreter of
    its own: forked from the fork server, or a fresh one where ``fresh`` (the point of the
    test is a process that has imported nothing yet) or another ``python`` is named, or forked
    after ``first_steps`` made in a fresh one (see ``_run``). With ``check`` (the
    default) it must succeed and its JSON result is returned; without, the completed process is."""
    proc = _run(["-m", f"tests.programs.{module}", program, json.dumps(kwargs, default=str)],
                env, check, path, fresh, python, preload, first_steps)
    return last_json(proc) if check else proc


def run_at_states(genuine, states: Sequence[str], module: str, program: str, **kwargs) -> dict[str, dict]:
    """``program`` of ``tests.programs.<module>`` with ``kwargs``, npu_fixes off at start
    (``NPU_FIXES=0``), one interpreter for each of ``states``: genuine commits (self-builds
    made by the ``genuine`` fixture) and pinned wheel versions (``wheel_install``)."""
    return {s: run_program(module, program, env={"NPU_FIXES": "0"},
                           location=wheel_install(s) if s in PINNED else genuine(s), **kwargs) for s in states}


def cli(*args: str, env: dict[str, str] | None = None, path: Sequence[Path] = (),
        setup: str | None = None, fresh: bool = False, preload: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``npu-fixes ARGS`` in an interpreter of its own (see ``run_program``), after the
    program ``setup`` ("module:program" of tests.programs) where given; its exit status is
    the caller's to check."""
    return run_program("cli", "run", env=env, check=False, path=path, fresh=fresh, preload=preload,
                       argv=list(args), setup=setup)


def assert_probed_repaired_and_undone(res: dict, says: str = "") -> None:
    """A :func:`tests.programs.with_npu_fixes` result of a state with the defect: the probe
    found it (its detail holding ``says``), the fix applied, the probe finds it no more, and
    ``npu_fixes.undo()`` brings it back."""
    assert res["probe_before"][0] is True and says in res["probe_before"][1], res["probe_before"]
    assert res["state"] == "applied" and res["probe_after"] is False and res["undone"] is True, res


def last_json(proc: subprocess.CompletedProcess[str]):
    """The JSON document printed on the last stdout line."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def make_module(tmp_path, monkeypatch):
    """Write a module into a temp dir on sys.path; return its name (not yet imported)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created = []

    def make(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        created.append(name)
        return name

    yield make
    for name in created:
        sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def prefix_copy(tmp_path_factory):
    """Build (once per arguments) a pre-fix copy of a pinned wheel; returns its root dir,
    the directory containing ``torch_npu/``, usable with ``npu_fixes.tools.host.load``."""
    from tests import prefix_copies as tool
    built: dict[tuple[str, tuple[str, ...]], Path] = {}

    def build(defects: tuple[str, ...] | str = "all", version: str = "2.13.0") -> Path:
        chosen = tuple(str(d) for d in tool.DEFECTS) if defects == "all" else tuple(
            [defects] if isinstance(defects, str) else defects
        )
        key = (version, chosen)
        if key not in built:
            out = tmp_path_factory.mktemp(f"prefix-{version}-{'-'.join(chosen) or 'none'}"[:60])
            tool.build_prefix_copy(wheel_path(version), out, chosen)
            built[key] = with_bytecode(out)
        return built[key]

    return build


@pytest.fixture(scope="session")
def genuine(tmp_path_factory):
    """Build (once per state) the self-build of a genuine backend state (see
    ``tests/genuine_states.py``); returns its root dir, usable with ``npu_fixes.tools.host.load``."""
    from tests import genuine_states

    built: dict[str, Path] = {}

    def build(state: str) -> Path:
        if state not in built:
            try:
                built[state] = with_bytecode(genuine_states.build(
                    state, wheel_path("2.13.0"), tmp_path_factory.mktemp(f"genuine-{state}")))
            except genuine_states.Unavailable as exc:
                pytest.fail(f"genuine state {state} not available: {exc}")
        return built[state]

    return build


def backend_targets() -> dict[str, list[str]]:
    """Fix name -> [module, first target] of every torch_npu backend fix, for the programs'
    ``backend_targets`` (which must not import npu_fixes themselves)."""
    from npu_fixes.fixes import all_fixes

    return {f.name: [f.module, f.targets[0]] for f in all_fixes() if f.module.startswith("torch_npu.")}
