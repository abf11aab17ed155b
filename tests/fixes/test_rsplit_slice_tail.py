"""rsplit-slice-tail: the slice alignment on kernel sources in-process, then sums over
2^16 elements compiled through every genuine state and both published wheels, kernels run
in Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.rsplit_slice_tail import PROBE_SOURCE, aligned
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import BEYOND, COMMITS, UNFIXED

NAME = "rsplit-slice-tail"
STATES = (*COMMITS, *FIXED_UPSTREAM)
#: Reads past each core's slice: a wrong value where the buffer goes on past the tensor.
WRONG = ("sum", "mean", "square-sum", "outer-sum")
CONTROLS = ("sum-masked", "sum-short")
#: 8bfbb9ed1 splits only the OUTER sum.
UNSPLIT = {"8bfbb9ed1": {"sum", "mean", "square-sum", "sum-exact-buffer"}}
PARTIAL = "for r0_offset in range(r0__lo, r0__hi, R0_BLOCK):"


def _partial(src: str) -> str:
    return src.replace("for r0_offset in range(0, r0_numel, R0_BLOCK):", PARTIAL)


def test_aligned_rounds_the_slice_up_to_the_block():
    out = aligned(_partial(PROBE_SOURCE))
    assert ("    r0__per_core = ((r0_numel + rsplit_nsplit - 1) // rsplit_nsplit + R0_BLOCK - 1) "
            "// R0_BLOCK * R0_BLOCK\n") in out
    assert out.count("\n") == PROBE_SOURCE.count("\n") and aligned(out) is None  # once
    old = _partial(PROBE_SOURCE).replace("rsplit_nsplit - 1) // rsplit_nsplit", "total_thread - 1) // total_thread")
    assert ("r0__per_core = ((r0_numel + total_thread - 1) // total_thread + R0_BLOCK - 1) // R0_BLOCK * R0_BLOCK"
            in aligned(old))  # 8bfbb9ed1's form


@pytest.mark.parametrize("src", [
    PROBE_SOURCE,  # not rewritten into the partial stage: no slice loop
    _partial(PROBE_SOURCE).replace("r0_mask = tl.full([R0_BLOCK], True, tl.int1)[:, None]",
                                   "r0_mask = r0_index < r0__hi"),  # a mask bounds the slice
    _partial(PROBE_SOURCE).replace("r0__per_core = (r0_numel + rsplit_nsplit - 1) // rsplit_nsplit",
                                   "r0__per_core = r0_numel // rsplit_nsplit"),  # another formula
])
def test_other_kernels_are_left_alone(src):
    assert aligned(src) is None


def test_the_blocks_cover_every_element_once():
    """The rule's arithmetic: with slices rounded up to the block, the blocks of the 40
    slices of a length the block divides cover [0, n) exactly once."""
    for n in (65536, 2**20, 3 * 65536):
        for block in (8, 512, 4096, 65536):
            per_core = ((n + 39) // 40 + block - 1) // block * block
            covered = []
            for core in range(40):
                lo, hi = core * per_core, min(core * per_core + per_core, n)
                covered.extend(range(lo, hi, block))
            assert covered == list(range(0, n, block)), (n, block)


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "rsplit_slice_tail", "tails")


def test_the_defect_is_at_every_state_and_wheel():
    assert BEYOND[NAME] == set(COMMITS) and NAME in UNFIXED


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res)


@pytest.mark.parametrize("state", STATES)
def test_wrong_without_right_with(runs, state):
    """Without npu_fixes every split sum over 2^16 elements reads past its cores' slices:
    wrong values, and a load past the buffer where the tensor is all of it. With npu_fixes
    every program equals eager, split over the same programs as before."""
    before, after = runs[state]["before"], runs[state]["after"]
    unsplit = UNSPLIT.get(state, set())
    for label in WRONG:
        got = before[label]
        if label in unsplit:
            assert got["equal"] is True, (label, got)
        else:  # a wrong value, or a read past the buffer
            assert got.get("equal") is False or got["error"].startswith("OutOfBounds: "), (label, got)
    if "sum-exact-buffer" in unsplit:
        assert before["sum-exact-buffer"]["equal"] is True
    else:
        assert before["sum-exact-buffer"]["error"].startswith("OutOfBounds: "), before["sum-exact-buffer"]
    assert all(before[label]["equal"] for label in CONTROLS), before
    assert all(r.get("equal") for r in after.values()), after
    for label in WRONG:  # where split, still split: the partial stage on all 40 programs
        if label not in unsplit:
            assert [len(after[label]["launches"]), after[label]["launches"][0]] == [2, [40, 40]], label
