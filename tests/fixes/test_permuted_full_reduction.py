"""permuted-full-reduction: the re-rank on lines in-process, then full reductions of
permuted views compiled through every genuine state and the fixed wheel, kernels run in
Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.permuted_full_reduction import PROBE_STORE, rerank_body, reranked
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "permuted-full-reduction"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
BROKEN = ("sum", "amax", "sum+1", "permute3-sum")
CONTROLS = ("keepdim-sum", "2d-t-sum")
RANK_ERROR = "ValueError: Expected pointer argument to have shape"


def test_reranked_gives_the_wheels_index():
    """The probe's store becomes what the 2.13.0 wheel emits for it."""
    assert reranked(PROBE_STORE, [0, 1], 3) == (
        "    tl.store(out_ptr0 + (tl.full([1, 1, 1], 0, tl.int32).broadcast_to(1, 1, XBLOCK)), tmp2, None)")
    assert reranked("tl.store(p + tl.full([1], 0, tl.int64).broadcast_to(XBLOCK), v, m)", [0], 2) == (
        "tl.store(p + tl.full([1, 1], 0, tl.int64).broadcast_to(1, XBLOCK), v, m)")


@pytest.mark.parametrize("line", [
    "tmp0 = tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)",  # not a store
    "tl.store(out_ptr0 + (tl.full([1, 1, 1], 0, tl.int32).broadcast_to(1, 1, XBLOCK)), tmp2, None)",  # rank 3
    "tl.store(out_ptr0 + (x0), tmp2, xmask)",  # no scalar index
    "tl.store(out_ptr0 + (tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, R0_BLOCK)), tmp2, None)",  # 2 extents, 1 slot
    "tl.store(out_ptr0 + (tl.full([1, 2], 0, tl.int32).broadcast_to(XBLOCK, 1)), tmp2, None)",  # not all ones
    "for r0_offset in range(0, r0_numel, R0_BLOCK):",  # not a statement of its own
    "tl.store(out_ptr0, tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1), None)",  # the value, not the address
])
def test_other_lines_are_left_alone(line):
    assert reranked(line, [0, 1], 3) is None


def test_rerank_body_keeps_deferred_lines_deferred():
    class Deferred:  # Inductor's DeferredLine: the text in .line, a copy by _new_line
        def __init__(self, line):
            self.line = line

        def _new_line(self, line):
            return Deferred(line)

    plain, deferred, other = PROBE_STORE, Deferred(PROBE_STORE), Deferred("tmp2 = tmp1")
    kernel = NS(body=NS(_lines=[plain, deferred, other, 7]))
    rerank_body(kernel, [0, 1], 3)
    first, second, third, fourth = kernel.body._lines
    assert first == reranked(PROBE_STORE, [0, 1], 3)
    assert isinstance(second, Deferred) and second.line == first and deferred.line == PROBE_STORE
    assert third is other and fourth == 7


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "permuted_full_reduction", "reductions")


@pytest.mark.parametrize("state", STATES)
def test_broken_builds_without_and_equal_eager_with(runs, state):
    """Before: the four permuted full reductions stop at the kernel build where the defect
    is, and equal eager elsewhere (the wheel: the reference). After: all six equal eager at
    every state; where the fix applied, undo brings the defect back."""
    res = runs[state]
    for label in BROKEN:
        if state in BEYOND[NAME]:
            assert res["before"][label]["error"].startswith(RANK_ERROR), (label, res["before"][label])
        else:
            assert res["before"][label] == {"equal": True}, (label, res["before"][label])
    assert all(res["before"][label] == {"equal": True} for label in CONTROLS), res["before"]
    assert res["after"] == dict.fromkeys((*BROKEN, *CONTROLS), {"equal": True}), res["after"]
    assert res["probe_after"] is False
    assert res["undone"] is (state in BEYOND[NAME])
