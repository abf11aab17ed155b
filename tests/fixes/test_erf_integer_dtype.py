"""erf-integer-dtype: ``erf`` of integer, bool and float tensors compiled through every genuine
state and both published wheels with their loader's decompositions, kernels run in Triton's
interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PRESENT = ("bafc50684", *FIXED_UPSTREAM)
ALL_RIGHT = dict.fromkeys(("erf-int64", "erf-bool", "erfc-int64", "erf-float32"), True)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "erf_integer_dtype", "erfs")


@pytest.mark.parametrize("state", PRESENT)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and res["state"] == "applied"
    assert "gives torch.int64 for an int64 input, eager torch.float32" in res["probe_before"][1]
    assert res["probe_after"] is False and res["undone"] is True


@pytest.mark.parametrize("state", PRESENT)
def test_integer_erf_truncated_as_built_and_equal_to_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    assert before["erf-int64"].startswith("torch.int64 [0, 0, 0, 0] for torch.float32"), before
    assert before["erf-bool"].startswith("torch.int64"), before
    assert before["erf-float32"] is True and before["erfc-int64"] is True
    assert after == ALL_RIGHT, after


@pytest.mark.parametrize("state", [s for s in STATES if s not in PRESENT])
def test_states_that_keep_inductors_erf_are_right_and_left_alone(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is False and res["state"] == "not-needed"
    assert res["before"] == res["after"] == ALL_RIGHT, res


def test_floating_input_converts_integers_and_bools_only():
    import torch

    from npu_fixes.fixes.erf_integer_dtype import floating_input

    seen = []
    erf = floating_input(lambda a: seen.append(a.dtype) or a)
    for dtype in (torch.int64, torch.bool, torch.float16, torch.float32):
        erf(torch.zeros(2, dtype=dtype))
    assert seen == [torch.float32, torch.float32, torch.float16, torch.float32]
