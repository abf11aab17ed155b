"""Threads importing the backend package and its submodules at once never deadlock with
npu_fixes armed (tests/programs/import_race.py: a stand-in backend whose package imports
its submodules slowly, every order of the imports in turn, each round under a timeout).
A lock cycle that importlib detects and raises (``cycles``: a thread importing a submodule
first takes its lock, then imports the package) is CPython's own behaviour, not a hang.

Today's failure this guards against: importlib calls meta-path finders with its global
import lock held; a finder that imports from there (wrapt's post-import-hook finder
imports the parent package) waits for a package another thread is importing, which waits
for the global lock. npu_fixes' watcher asks the finders behind it instead."""

from __future__ import annotations

import pytest

from npu_fixes.shim import autoload as _autoload
from tests.conftest import run_program

#: Rounds per thread count: every ordered pair of the five imports, half the ordered
#: triples, a few orders of all five (without the repair, round 0 or 1 already hangs).
ROUNDS = {2: 20, 3: 30, 5: 10}


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_concurrent_backend_imports_never_hang(threads):
    res = run_program("import_race", "race_and_exit", threads=threads, rounds=ROUNDS[threads], timeout=20, arm=True)
    assert res | {"cycles": 0} == {"rounds": ROUNDS[threads], "hung": [], "errors": [], "cycles": 0, "armed": True}


def test_the_stand_in_imports_cleanly_without_npu_fixes():
    res = run_program("import_race", "race_and_exit", threads=3, rounds=20, timeout=20, arm=False)
    assert res | {"cycles": 0} == {"rounds": 20, "hung": [], "errors": [], "cycles": 0, "armed": False}


def test_autoload_arming_while_other_threads_import_never_hangs(tmp_path):
    """The .pth arms npu_fixes while torch imports in one thread and the backend in others
    (a fresh interpreter: torch must not be imported yet)."""
    _autoload.enable(tmp_path)
    res = run_program("import_race", "race_and_exit", fresh=True, threads=3, rounds=30, timeout=60,
                      arm=True, site_dir=str(tmp_path))
    assert res | {"cycles": 0} == {"rounds": 30, "hung": [], "errors": [], "cycles": 0, "armed": True}
