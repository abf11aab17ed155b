"""integer-input-dtype: ``erf`` and dropout's backward of integer, bool and float tensors
compiled through every genuine state and both published wheels with their loader's
decompositions, kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
#: The states whose loader installs its own erf (the others keep Inductor's).
LOADER_ERF = ("bafc50684", *FIXED_UPSTREAM)
PROGRAMS = ("erf-int64", "erf-bool", "erfc-int64", "erf-float32", "dropout-backward-int64-scale-0",
            "dropout-backward-int64-scale-1", "dropout-backward-float32")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "integer_input_dtype", "programs")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "native_dropout_backward gives torch.int64 for an int64 input")
    assert ("erf gives torch.int64" in res["probe_before"][1]) is (state in LOADER_ERF)


@pytest.mark.parametrize("state", STATES)
def test_integer_inputs_keep_their_dtype_as_built_and_equal_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in ("dropout-backward-int64-scale-0", "dropout-backward-int64-scale-1"):
        assert before[label].startswith("torch.int64 "), (label, before[label])
    if state in LOADER_ERF:
        assert before["erf-int64"].startswith("torch.int64 [0, 0, 0, 0] for torch.float32"), before
        assert before["erf-bool"].startswith("torch.int64"), before
    else:
        assert before["erf-int64"] is True and before["erf-bool"] is True
    assert before["erf-float32"] is True and before["erfc-int64"] is True
    assert before["dropout-backward-float32"] is True
    assert after == dict.fromkeys(PROGRAMS, True), after


def test_floating_input_converts_integers_and_bools_only():
    import torch

    from npu_fixes.fixes.integer_input_dtype import floating_input

    seen = []
    decomposition = floating_input(lambda a, *rest: seen.append((a.dtype, rest)) or a)
    for dtype in (torch.int64, torch.bool, torch.float16, torch.float32):
        decomposition(torch.zeros(2, dtype=dtype), "mask", 2.0)
    assert seen == [(torch.float32, ("mask", 2.0)), (torch.float32, ("mask", 2.0)),
                    (torch.float16, ("mask", 2.0)), (torch.float32, ("mask", 2.0))]
