"""safe-softmax-guard: attention with query rows whose every key is masked, compiled through
both published wheels with their loader's decompositions (and the genuine states, which keep
Inductor's), kernels run in Triton's interpreter, against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

ALL_RIGHT = dict.fromkeys(("padded-attention", "safe-softmax", "unmasked-attention"), True)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, (*FIXED_UPSTREAM, "bafc50684"), "safe_softmax_guard", "programs")


@pytest.mark.parametrize("state", FIXED_UPSTREAM)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "gives [nan, nan, nan, nan] for a row of -inf")


@pytest.mark.parametrize("state", FIXED_UPSTREAM)
def test_fully_masked_rows_are_nan_as_built_and_zeros_with_npu_fixes(runs, state):
    """2 sequences x 4 heads x 2 query rows with no key to attend to, 16 features each."""
    before, after = runs[state]["before"], runs[state]["after"]
    assert before["padded-attention"] == "NaN at 256 elements, eager 0", before
    assert before["safe-softmax"] == "NaN at 6 elements, eager 0", before
    assert before["unmasked-attention"] is True
    assert after == ALL_RIGHT, after


@pytest.mark.parametrize("state", COMMITS[-1:])
def test_the_commits_keep_inductors_safe_softmax(runs, state):
    res = runs[state]
    assert res["state"] == "absent" and res["before"] == res["after"] == ALL_RIGHT, res


def test_guarded_zeroes_only_rows_of_minus_infinity():
    import torch

    from npu_fixes.fixes.safe_softmax_guard import guarded

    safe = guarded(lambda x, dim, dtype=None: torch.softmax(x, dim))
    rows = torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 0.0]])
    assert safe(rows, -1).tolist() == [[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]]
