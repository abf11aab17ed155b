"""The pinned-version matrix, one nox session per row.

Every row runs in the environment that ``scripts/setup.sh`` made (``.venv``: torch 2.13.0
CPU, triton 3.6.0, npu_fixes); a row differs only in the torch_npu on ``PYTHONPATH``:

- ``none``: torch_npu not installed; the full test suite (it host-loads the pinned wheels,
  the genuine states and the pre-fix copies as files);
- ``wheel-<version>``: a pinned published wheel, installed ``--no-deps``;
- ``genuine-<commit>``: the 2.13.0 wheel with its ``triton_experimental`` replaced by that
  commit's (``tests/genuine_states.py`` says where the folders come from);
  ``genuine-tree`` does the same with ``$NPU_FIXES_GENUINE_TREE``, a source tree of yours;
- ``prefix-<fix>``: the 2.13.0 wheel with that one defect edited back in
  (``tests/prefix_copies.py``);
- ``install-<variant>``: the audit and the run of a pinned wheel and a genuine state in a venv
  made beside ``.venv`` without an optional package, or with torch's version string edited
  (``tests/install_variants.py``; ``tests/test_installs.py``, which ``none`` runs whole).

Installed rows run ``tests/test_matrix.py``; genuine rows then run upstream's own regression
tests as a peer suite (``tests/upstream_peer.py``), which ``peer-<commit>`` runs alone.
``bash scripts/test.sh`` runs ``none`` (pytest-xdist over every core; its
``tests/test_matrix.py`` runs every installed row as well, in one test session, each row's
programs with its torch_npu on their path), then the rows tagged ``peer`` side by side; a
CI matrix or a maintainer runs one row with ``.venv/bin/nox -s genuine-8bfbb9ed1`` (``-l``
lists them; the installed rows are tagged ``matrix``). For development, ``nox -s unit``
(the in-process unit level) and ``nox -s fix -- <name>`` (one fix's tests);
``nox -s accuracy-table`` prints the model-level table in full.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
from tests import genuine_states, matrix_rows, test_installs, upstream_expectations  # noqa: E402

nox.options.default_venv_backend = "none"
PY = sys.executable  # the .venv's interpreter, which runs nox
CACHE = REPO / ".cache"
WHEELS = Path(os.environ.get("NPU_FIXES_WHEELS", CACHE / "wheels"))


def wheel(version: str) -> Path:
    found = sorted(WHEELS.glob(f"torch_npu-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"no torch_npu {version} wheel in {WHEELS}: run scripts/setup.sh")
    return found[0]


def installed(session: nox.Session, row: str, unavailable: Callable[[str], None] | None = None) -> Path:
    """The site of ``row`` (``tests/matrix_rows.py``), kept in ``.cache`` between runs; where
    a genuine state's folder cannot be had, ``unavailable`` (default: ``session.error``) is
    told why."""
    try:
        return matrix_rows.install(row, wheel, CACHE / f"site-{row.replace(':', '-')}")
    except genuine_states.Unavailable as exc:
        (unavailable or session.error)(str(exc))
    except ValueError as exc:
        session.error(str(exc))


def run_matrix(session: nox.Session, row: str, site: Path) -> None:
    session.run(PY, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_matrix.py", *session.posargs,
                env={"PYTHONPATH": str(site), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                     "NPU_FIXES_MATRIX_ROW": row})


def run_upstream_peer(session: nox.Session, row: str, site: Path) -> None:
    """Upstream's own regression tests (``tests/upstream_peer.py``), read from where they lie."""
    folder = genuine_states.upstream_dir() / upstream_expectations.FOLDER
    if not folder.is_dir():
        session.warn(f"upstream's regression tests not run at {row}: no {folder} (NPU_FIXES_UPSTREAM)")
        return
    session.run(PY, "-m", "pytest", "-p", "tests.upstream_peer", "-p", "no:cacheprovider", "-ra",
                "--rootdir", str(REPO), str(folder),
                env={"PYTHONPATH": str(site), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                     "NPU_FIXES_MATRIX_ROW": row})


#: pytest-xdist over every core, a test module's tests on one worker (they share
#: module-scoped program runs).
PARALLEL = ("-n", "auto", "--dist", "loadfile")


@nox.session(name="none", python=False)
def none(session: nox.Session) -> None:
    """torch_npu absent: the suite but for the model level (``model``) and the gpu-marked
    tests, its 15 slowest tests listed at the end."""
    session.run(PY, "-m", "pytest", *PARALLEL, "-m", "not gpu and not model", "--durations=15", "tests",
                *session.posargs)


@nox.session(python=False)
def model(session: nox.Session) -> None:
    """torch_npu absent: the model-level subset (tests marked ``model``: whole models trained
    through genuine states and wheels, one program each), spread test by test over every core."""
    session.run(PY, "-m", "pytest", "-n", "auto", "--dist", "load", "-m", "model and not gpu",
                "--durations=15", "tests", *session.posargs)


@nox.session(python=False)
def docs(session: nox.Session) -> None:
    """The documentation generated from the fix catalogue and the sweeps' reports is current
    (else: run ``python -m npu_fixes.tools.catalogue`` and ``python scripts/sweep_summary.py``),
    and the site builds with warnings as errors."""
    session.run(PY, "-m", "npu_fixes.tools.catalogue", "--check")
    session.run(PY, "scripts/sweep_summary.py", "--check")
    session.run(PY, "-m", "mkdocs", "build", "--strict", "--quiet", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """ruff over the repository."""
    session.run(PY, "-m", "ruff", "check", ".")


@nox.session(python=False, default=False)
def unit(session: nox.Session) -> None:
    """The shim's and the fixes' in-process unit level: no test program, no GPU, not the
    cross entropy kernels (``tests/ops``: minutes in Triton's interpreter)."""
    session.run(PY, "-m", "pytest", *PARALLEL, "-m", "not gpu and not program", "--ignore", "tests/ops",
                "tests", *session.posargs)


@nox.session(python=False, default=False)
def fix(session: nox.Session) -> None:
    """One fix's tests (torch_npu absent): ``nox -s fix -- launch-grid [pytest args]``."""
    if not session.posargs:
        session.error("name the fix: nox -s fix -- launch-grid (npu-fixes status lists them)")
    name, *rest = session.posargs
    tests = REPO / "tests" / "fixes" / f"test_{name.replace('-', '_')}.py"
    if not tests.is_file():
        known = sorted(p.stem[5:].replace("_", "-") for p in tests.parent.glob("test_*.py"))
        session.error(f"no tests for a fix named {name!r}; known: {', '.join(known)}")
    session.run(PY, "-m", "pytest", *PARALLEL, "-m", "not gpu", str(tests), *rest)


@nox.session(name="accuracy-table", python=False, default=False)
def accuracy_table(session: nox.Session) -> None:
    """The README's model-level table in full (``scripts/accuracy_table.py``): the accuracy
    models through every genuine state and the 2.13.0 and 2.14.0 wheels, as built and with
    npu_fixes, on CPU (12 to 16 minutes on 2 cores). Extra arguments go to the script."""
    backends = []
    for state in genuine_states.COMMITS:
        backends.append(f"{state}={installed(session, f'genuine:{state}')}")
    backends += [f"wheel-{v}={wheel(v)}" for v in ("2.13.0", "2.14.0")]
    session.run(PY, "scripts/accuracy_table.py", *backends, *session.posargs,
                env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})


@nox.session(python=False, default=False)
def sweep(session: nox.Session) -> None:
    """The sweep's whole corpus (``npu-fixes sweep``) through every genuine state and the
    2.13.0 and 2.14.0 wheels, as built and with npu_fixes (``scripts/sweep_states.py``:
    results in ``benchmarks/results/``). Extra arguments go to ``npu-fixes sweep``."""
    states = [f"{state}={installed(session, f'genuine:{state}')}" for state in genuine_states.COMMITS]
    states += [f"wheel-{v}={wheel(v)}" for v in ("2.13.0", "2.14.0")]
    session.run(PY, "scripts/sweep_states.py", *states, "--", *session.posargs)


def install_row(variant: str):
    def row(session: nox.Session) -> None:
        session.run(PY, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_installs.py", "-k", variant,
                    *session.posargs)
    row.__doc__ = (f"a venv of {variant} (tests/install_variants.py): the audit says what the run does "
                   "there (the none row runs every one).")
    return row


def wheel_row(version: str):
    def row(session: nox.Session) -> None:
        run_matrix(session, f"wheel:{version}", installed(session, f"wheel:{version}"))
    row.__doc__ = f"torch_npu {version} installed."
    return row


def genuine_site(session: nox.Session, state: str) -> Path:
    """The self-build of ``state``; the session is skipped where its folder cannot be had."""
    return installed(session, f"genuine:{state}",
                     lambda why: session.skip(f"genuine state {state} not run: {why}"))


def genuine_row(state: str):
    def row(session: nox.Session) -> None:
        site = genuine_site(session, state)
        run_matrix(session, f"genuine:{state}", site)
        run_upstream_peer(session, f"genuine:{state}", site)
    row.__doc__ = (f"self-build at {state}: the 2.13.0 wheel with that triton_experimental."
                   if state != genuine_states.OWN_TREE else
                   "self-build from $NPU_FIXES_GENUINE_TREE: the 2.13.0 wheel with its triton_experimental.")
    return row


def peer_row(state: str):
    def row(session: nox.Session) -> None:
        run_upstream_peer(session, f"genuine:{state}", genuine_site(session, state))
    row.__doc__ = f"upstream's own regression tests at genuine-{state}'s self-build (its second half)."
    return row


def prefix_row(defect: str):
    def row(session: nox.Session) -> None:
        run_matrix(session, f"prefix:{defect}", installed(session, f"prefix:{defect}"))
    row.__doc__ = f"pre-fix copy of the 2.13.0 wheel with the {defect} defect alone."
    return row


for _version in matrix_rows.PINNED:
    nox.session(wheel_row(_version), name=f"wheel-{_version}", python=False, tags=["matrix"])
for _state in (*genuine_states.COMMITS, genuine_states.OWN_TREE):
    nox.session(genuine_row(_state), name=f"genuine-{_state}", python=False, tags=["matrix"])
    nox.session(peer_row(_state), name=f"peer-{_state}", python=False, tags=["peer"])
for _defect in genuine_states.FIVE:
    nox.session(prefix_row(_defect), name=f"prefix-{_defect}", python=False, tags=["matrix"])
for _variant in test_installs.VARIANTS:
    nox.session(install_row(_variant), name=f"install-{_variant}", python=False, default=False,
                tags=["installs"])
