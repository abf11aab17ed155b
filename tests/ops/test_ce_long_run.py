"""CPU smoke test of examples/ce_long_run.py: a few steps, tp=1 and tp=2 (gloo)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, last_json

SMALL = ["--device", "cpu", "--steps", "6", "--vocab", "512", "--d-model", "32", "--layers", "2", "--warmup", "3",
         "--heads", "2", "--seq", "16", "--batch", "4", "--label-smoothing", "0.1"]


def run_example(out: Path, tp: int, *extra: str) -> tuple[dict, list[list[float]]]:
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "ce_long_run.py"), *SMALL,
                           "--tp", str(tp), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = last_json(proc)
    rows = (out / f"ce_long_run_tp{tp}.csv").read_text().splitlines()[1:]
    assert (out / f"ce_long_run_tp{tp}.log").exists()
    return summary, [[float(v) for v in row.split(",")[1:]] for row in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[dict, list[list[float]]]]:
    return {tp: run_example(tmp_path_factory.mktemp(f"tp{tp}"), tp) for tp in (1, 2)}


@pytest.mark.parametrize("tp", [1, 2])
def test_curves_agree_and_are_reported(runs: dict, tp: int) -> None:
    summary, curves = runs[tp]
    assert summary["tp"] == tp and summary["steps"] == len(curves) == 6
    assert summary["mape_percent"] < 1e-3  # fp32 on CPU: the same loss up to rounding
    assert abs(summary["first_loss"]["ours"] - math.log(512)) < 0.5
    assert all(math.isfinite(v) for row in curves for v in row)
    assert summary["step_ms"]["ours"] > 0 and summary["step_ms"]["torch"] > 0


def test_vocabulary_parallel_head_trains_like_the_single_device_one(runs: dict) -> None:
    (_, single), (_, split) = runs[1], runs[2]
    for a, b in zip(single, split, strict=True):
        assert a == pytest.approx(b, rel=1e-4)


def test_control_pairs_train_two_pytorch_runs(tmp_path: Path) -> None:
    same, _ = run_example(tmp_path / "same", 1, "--pair", "torch-torch")
    assert same["pair"] == "torch-torch" and same["mape_percent"] == 0.0  # CPU: deterministic
    nudged, curves = run_example(tmp_path / "nudged", 1, "--pair", "perturbed-torch")
    assert nudged["pair"] == "perturbed-torch"
    assert nudged["mape_percent"] < 1e-3 and len(curves) == 6  # the change hides in rounding here
