"""The probe verdicts kept between processes (``npu_fixes/shim/verdicts.py``): a second process
of an install decides without probing, the same; another tree, Triton, switch or setting is another key;
a damaged file is a miss; writers at once never leave a half file; status() still confirms
every repair by a probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from npu_fixes.shim import verdicts
from tests.conftest import REPO, run_program, wheel_path
from tests.matrix_rows import install

REPAIRED = ("applied", "upgrade-needed", "guarded")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A self-build at 8bfbb9ed1 (the most defects)."""
    return install("genuine:8bfbb9ed1", wheel_path, tmp_path_factory.mktemp("genuine-8bfbb9ed1"))


def decide(site, cache, setup=None, switch="1"):
    return run_program("verdicts", "decided", location=str(site), setup=setup, fresh=True,
                       env={verdicts.SWITCH: switch, verdicts.DIRECTORY: str(cache)})


def kept(cache) -> dict:
    (path,) = cache.glob("*.json")
    return json.loads(path.read_text())["verdicts"]


@pytest.fixture(scope="module")
def cold_and_warm(site, tmp_path_factory):
    cache = tmp_path_factory.mktemp("verdicts")
    return cache, decide(site, cache), decide(site, cache)


def test_a_second_process_decides_the_same_without_probing(cold_and_warm):
    cache, cold, warm = cold_and_warm
    assert cold["probes_at_load"] > len(cold["at_load"]) / 2 and warm["probes_at_load"] == 0
    assert warm["at_load"] == cold["at_load"]
    assert sum(state in REPAIRED for state in cold["at_load"].values()) > 20
    assert {name: state for name, (state, _) in warm["status"].items()} == cold["at_load"]
    assert set(kept(cache)) == {n for n, s in cold["at_load"].items() if s in (*REPAIRED, "not-needed")}


def test_status_confirms_each_repair_taken_from_the_cache_by_a_probe(cold_and_warm):
    _, cold, warm = cold_and_warm
    applied = sorted(n for n, s in warm["at_load"].items() if s == "applied")
    assert sorted(warm["probes_by_status"]) == applied and cold["probes_by_status"] == []
    assert all(warm["status"][n][1].endswith("(verdict from the cache)") for n in applied)


def test_a_cached_repair_that_does_not_take_is_rolled_back_at_status(cold_and_warm, site):
    """rng-capture-gate's install sabotaged in the warm process: the cache says needed, the
    repair is installed, and status()'s probe finds it did not take."""
    cache, cold, _ = cold_and_warm
    sabotaged = decide(site, cache, setup="cli:sabotaged_gate")
    assert sabotaged["probes_at_load"] == 0 and sabotaged["at_load"]["rng-capture-gate"] == "applied"
    state, detail = sabotaged["status"]["rng-capture-gate"]
    assert state == "failed" and detail.startswith("repair did not take, rolled back")


def test_the_switch_turns_the_cache_off(site, tmp_path):
    res = decide(site, tmp_path, switch="0")
    assert res["probes_at_load"] > 0 and not list(tmp_path.iterdir())


def test_a_damaged_file_is_a_miss_and_written_again(cold_and_warm, site, tmp_path):
    cache, cold, _ = cold_and_warm
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / next(cache.glob("*.json")).name).write_text('{"format": 1, "verdicts": {"rsplit-outer": ')
    res = decide(site, damaged)
    assert res["probes_at_load"] == cold["probes_at_load"] and res["at_load"] == cold["at_load"]
    # the verdicts again (their details may quote uninitialised memory the probe read)
    assert {n: v["defective"] for n, v in kept(damaged).items()} == {n: v["defective"] for n, v in kept(cache).items()}


def _tree(root, text: str) -> types.SimpleNamespace:
    backend = root / "torch_npu" / "_inductor" / "triton_experimental"
    backend.mkdir(parents=True, exist_ok=True)
    for name in verdicts.LOADER_FILES:
        (backend.parent / name).write_text("")
    (backend / "lowering.py").write_text(text)
    return types.SimpleNamespace(__name__=f"{backend}.lowering", __file__=str(backend / "lowering.py"))


def test_the_key_holds_the_tree_the_switches_and_triton(tmp_path, monkeypatch):
    one = _tree(tmp_path / "a", "x = 1\n")
    same = _tree(tmp_path / "b", "x = 1\n")
    other = _tree(tmp_path / "c", "x = 2\n")
    key = verdicts.key(one, ())
    assert key == verdicts.key(one, ()) and len(key) == 64
    assert verdicts.key(same, ()) == key  # the same sources elsewhere (a wheel extracted afresh)
    assert verdicts.key(other, ()) != key
    assert verdicts.key(one, ("launch-grid",)) != key
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")  # a setting Inductor reads: another key
    assert verdicts.key(one, ()) != key
    monkeypatch.delenv("TORCHINDUCTOR_MAX_AUTOTUNE")
    assert verdicts.key(one, ()) == key
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__="3.2.0", __file__="/elsewhere"))
    assert verdicts.key(one, ()) != key
    assert verdicts.key(types.SimpleNamespace(__name__="m", __file__=str(tmp_path / "m.py")), ()) is None


def test_writers_at_once_never_leave_a_half_file(tmp_path):
    """Eight processes store verdicts under one key at once, 30 times each: the file is whole
    after each rename (a writer may drop another's verdict, which only costs a probe later), and
    no temporary file is left."""
    env = dict(os.environ, **{verdicts.DIRECTORY: str(tmp_path)})
    procs = [subprocess.Popen([sys.executable, "-m", "tests.programs.verdicts", "store_many",
                               json.dumps({"key": "k" * 64, "name": f"fix-{i}", "times": 30})], env=env, cwd=REPO)
             for i in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    assert [p.name for p in tmp_path.iterdir()] == [f"{'k' * 64}.json"]
    data = json.loads((tmp_path / f"{'k' * 64}.json").read_text())
    assert data["format"] == verdicts.FORMAT and data["verdicts"]
    assert all(v["defective"] is True and v["detail"].startswith(f"{name} ") for name, v in data["verdicts"].items())
