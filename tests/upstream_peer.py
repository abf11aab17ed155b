"""Pytest plugin: upstream's own regression tests as a peer suite of a genuine matrix row.

``noxfile.py`` runs it after ``tests/test_matrix.py`` in each genuine row, and alone in
``peer-<commit>``::

    python -m pytest -p tests.upstream_peer $NPU_FIXES_UPSTREAM/tests-5ff81d9c5

with ``NPU_FIXES_MATRIX_ROW=genuine:<state>`` and the row's torch_npu on ``PYTHONPATH``.
Before collection it imports npu_fixes (its hooks armed, as in a user's process) and
host-loads that torch_npu (no CANN here, so ``torch_npu/__init__.py`` never runs;
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``): each fix is decided as its module is imported.
Upstream's files then import the backend as they do upstream; they are read where they
are, never copied. ``tests/upstream_expectations.py`` marks each test with what this state
should give (strict expected failures carry their reason); a test missing from that table,
or a table entry not collected, stops the run.

Two adjustments, neither changing what a test checks:

- PyTorch's ``common_utils`` imports ``expecttest``. The real package comes with the test
  extras (``setup.cfg``); where it is missing, a stand-in with the two names PyTorch uses
  takes its place, and the header says so.
- pytest 9 reports each failing ``subTest`` on its own and counts the test itself as
  passed, which turns a strict expected failure into an unexpected pass. Upstream's test
  classes get a ``subTest`` that lets the first failure end the test as a plain failure,
  its parameters added to the error as a note.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
import unittest
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import genuine_states, upstream_expectations

ROW = os.environ.get("NPU_FIXES_MATRIX_ROW", "")
KIND, _, STATE = ROW.partition(":")
_seen: dict[str, str] = {}  # what configure found, for the header


def tests_dir() -> Path:
    """Where upstream's regression test files are read from."""
    return genuine_states.upstream_dir() / upstream_expectations.FOLDER


def _expecttest() -> str:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.__doc__ = "npu_fixes stand-in: the real expecttest is not installed."
        stand_in.ACCEPT = False
        stand_in.TestCase = unittest.TestCase  # these tests never call assertExpectedInline
        sys.modules["expecttest"] = stand_in
        return "stand-in (pip install -e .[test] brings the real one)"
    return "installed"


@contextlib.contextmanager
def _subtest(self: unittest.TestCase, msg: object = None, **params: object) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        exc.add_note(f"in subTest {msg or ''}{params}")
        raise


def pytest_configure(config: pytest.Config) -> None:
    if KIND != "genuine" or not STATE:
        raise pytest.UsageError(f"tests.upstream_peer needs NPU_FIXES_MATRIX_ROW=genuine:<state>, not {ROW!r}")
    if not tests_dir().is_dir():
        raise pytest.UsageError(f"upstream's regression tests are not run: no {tests_dir()} "
                                "(NPU_FIXES_UPSTREAM names the folder that holds it)")
    sys.dont_write_bytecode = True  # no __pycache__ next to upstream's files
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    _seen["expecttest"] = _expecttest()

    from npu_fixes.tools import host  # imports npu_fixes: its hooks are armed before the backend loads

    location = host.installed_location()
    if location is None:
        raise pytest.UsageError("no torch_npu on sys.path: the row's site must be on PYTHONPATH")
    loaded = host.load(location)
    if loaded.errors or not loaded.has_backend:
        raise pytest.UsageError(f"host-loading {location} failed: {loaded.errors or 'no backend'}")
    _seen["torch_npu"] = f"{loaded.version} at {loaded.root}"


def _has_helper(module: str, name: str) -> bool:
    from npu_fixes.tools.host import BACKEND

    owner = sys.modules.get(f"{BACKEND}.{module}")
    return owner is not None and hasattr(owner, name)


def _key(item: pytest.Item) -> str:
    cls = getattr(item, "cls", None)
    return f"{item.path.name}::{cls.__name__ + '::' if cls else ''}{item.name}"


def expectations() -> dict[str, upstream_expectations.Expectation]:
    """Upstream test -> what it should give in this process (this state, these fixes)."""
    import npu_fixes
    from npu_fixes.fixes import FIX_NAMES

    live = {record.name: record.state.value for record in npu_fixes.status()}
    return {test: upstream_expectations.expect(test, STATE, FIX_NAMES, _has_helper, live)
            for test in upstream_expectations.EXERCISES}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    table = expectations()
    keys = {_key(item) for item in items}
    unknown = sorted(keys - set(table))
    if unknown:
        raise pytest.UsageError(f"upstream tests missing from tests/upstream_expectations.py: {unknown}")
    if not config.option.keyword and not config.option.markexpr:
        missing = sorted(set(table) - keys)
        if missing:
            raise pytest.UsageError(f"tests/upstream_expectations.py lists tests not collected: {missing}")
    for item in items:
        if getattr(item, "cls", None) is not None:
            item.cls.subTest = _subtest
        want = table[_key(item)]
        if want.outcome == "xfail":
            item.add_marker(pytest.mark.xfail(strict=want.strict, reason=want.reason))


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"upstream peer suite: {tests_dir()} at {ROW}",
            f"torch_npu (host-loaded): {_seen.get('torch_npu')}; expecttest: {_seen.get('expecttest')}"]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    import npu_fixes

    terminalreporter.section(f"upstream peer suite at {STATE}: expected outcomes")
    for test, want in expectations().items():
        terminalreporter.write_line(f"{want.outcome:5} {test.rpartition('::')[2]}: {want.reason}")
    terminalreporter.write_line(
        "npu_fixes: " + ", ".join(f"{r.name}={r.state.value}" for r in npu_fixes.status()))
