"""alias-size-args: ``torch.masked`` std and var backward under ``dynamic=True`` at both
published wheels, kernels run in Triton's interpreter, judged as the sweep judges them
(tests/programs/alias_size_args.py); the genuine commits keep no aliases (the probe says so)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_probed_repaired_and_undone, run_at_states, run_program
from tests.genuine_states import COMMITS

WHEELS = ("2.13.0", "2.14.0")
FAILING = ("opinfo:masked.std:-:float32:bwd:dynamic:4", "opinfo:masked.var:-:float32:bwd:dynamic:4")
CONTROLS = ("opinfo:masked.std:-:float32:bwd:dynamic:2", "opinfo:masked.std:-:float32:bwd:static:4")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, WHEELS, "alias_size_args", "masked_backward")


@pytest.mark.parametrize("wheel", WHEELS)
def test_probe_says_needed_and_the_fix_applies(runs, wheel):
    assert_probed_repaired_and_undone(runs[wheel], "registers s7: the call passes a size the kernel does not take")


@pytest.mark.parametrize("wheel", WHEELS)
def test_the_launch_stops_as_built_and_equals_eager_with_npu_fixes(runs, wheel):
    res = runs[wheel]
    for sample in FAILING:
        assert res["before"][sample] == ["run-time-error", "TypeError: launcher() got multiple values for argument "
                                                           "'stream'"], sample
        assert res["after"][sample] == ["pass", ""], sample
    for sample in CONTROLS:  # left passing (the dynamic one repaired by mixed-leaf-xmask as built)
        assert res["after"][sample] == ["pass", ""], (sample, res["after"][sample])


def test_the_commits_keep_no_aliases(genuine):
    for state in COMMITS[::4]:  # the first and the last
        res = run_program("alias_size_args", "probe_only", env={"NPU_FIXES": "0"}, location=genuine(state))
        assert res == [False, "the kernel keeps no reduction index aliases"], (state, res)
