"""flat-rnode-mask: a reduction over a split range loading through its whole-range node,
compiled through every genuine state and both published wheels, kernels run in Triton's
interpreter (every load bounds-checked), against eager."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
DEFECTIVE = ("scattered-amax", "scattered-amax-dynamic")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "flat_rnode_mask", "reductions")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res, "gets no r0_mask")


@pytest.mark.parametrize("state", STATES)
def test_reads_past_the_input_as_built_and_equals_eager_with_npu_fixes(runs, state):
    """At 8bfbb9ed1 the compile stops first on a defect dualview-fold repairs; with it
    repaired, the load reads past the input as at the later states."""
    before, after = runs[state]["before"], runs[state]["after"]
    first = "Unregistered range symbol: r0_2" if state == "8bfbb9ed1" else "a load outside every buffer"
    for label in DEFECTIVE:
        assert first in str(before[label]), (label, before[label])
    assert before["plain-amax"] is True, "a reduction with no whole-range node is right as built"
    assert after == dict.fromkeys((*DEFECTIVE, "plain-amax", "shifted-loss"), True), after


@pytest.mark.parametrize("state", STATES)
def test_the_shifted_label_loss_reads_past_its_buffer_as_built(runs, state):
    """``F.cross_entropy(logits[..., :-1, :], labels[..., 1:])`` over 2 x 1023 tokens: its final
    reduction loads the per-token loss through the node its tree was split from (``r0_0 = r0_1
    + 1023*r0_2``), unmasked, and its last block of 512 reads one element past the buffer; up to
    95c9094da the reduction is generated otherwise (at 8bfbb9ed1 the compile stops first on a
    defect dualview-fold repairs) and equals eager."""
    before = runs[state]["before"]["shifted-loss"]
    if state == "8bfbb9ed1":
        assert "Unregistered range symbol: r0_0" in str(before), before
    elif state == "95c9094da":
        assert before is True
    else:
        assert "a load outside every buffer" in str(before), before
