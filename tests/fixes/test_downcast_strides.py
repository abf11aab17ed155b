"""downcast-strides: the layer on a stand-in wrapper in-process, then int64 and float64 views
with gaps read by compiled code through every genuine state and both published wheels,
kernels run in Triton's interpreter with the backend's launcher grid, against eager."""

from __future__ import annotations

import types

import pytest
import torch

from npu_fixes.fixes.downcast_strides import keep_strides
from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
VIEWS = ("every-other-row", "first-columns", "float64-rows")
#: The message of ``copy_`` into a destination whose elements overlap.
OVERLAP = "more than one element of the written-to tensor refers to a single memory location"
MODULE = types.SimpleNamespace(_DTYPE_DOWNCAST_MAP={"*i64": (torch.int64, torch.int32),
                                                   "*fp64": (torch.float64, torch.float32)})


def _narrowing(seen: list):
    """A stand-in for the backend's wrapped launcher: records what it gets, writes 5s into
    ``out_ptr0`` and adds 1 to ``in_out_ptr0``."""
    def launcher(in_ptr0, in_out_ptr0, out_ptr0, xnumel, stream=None):
        seen.append({"in": (in_ptr0.dtype, in_ptr0.stride(), in_ptr0.tolist()),
                     "in_out": (in_out_ptr0.dtype, in_out_ptr0.stride())})
        out_ptr0.fill_(5)
        in_out_ptr0.add_(1)
    launcher.fn = "kernel"
    return launcher


def test_views_with_gaps_are_narrowed_with_their_strides_and_written_back():
    seen = []
    args = {"in_ptr0": "*i64", "in_out_ptr0": "*i64", "out_ptr0": "*i64"}
    launcher = keep_strides(MODULE, _narrowing(seen), ["in_ptr0", "in_out_ptr0", "out_ptr0", "xnumel"], args, [])
    assert launcher.fn == "kernel"  # the wrapped launcher's attributes are kept
    source = torch.arange(16)[::2]
    in_out = torch.arange(12).view(4, 3)[:, :2]
    out = torch.zeros(8, dtype=torch.int64)[::2]
    launcher(source, in_out, out, 8, stream=None)
    assert seen == [{"in": (torch.int32, (2,), list(range(0, 16, 2))), "in_out": (torch.int32, (3, 1))}]
    assert out.tolist() == [5] * 4 and in_out.tolist() == [[1, 2], [4, 5], [7, 8], [10, 11]]


def test_an_output_whose_elements_overlap_is_written_back_position_by_position():
    """copy_ refuses a destination whose elements overlap (an expand's strides); each memory
    position the output covers is written once, and nothing outside it."""
    seen = []
    args = {"in_ptr0": "*i64", "in_out_ptr0": "*i64", "out_ptr0": "*i64"}
    launcher = keep_strides(MODULE, _narrowing(seen), ["in_ptr0", "in_out_ptr0", "out_ptr0", "xnumel"], args, [])
    storage = torch.full((12,), -1, dtype=torch.int64)
    out = storage[1:].as_strided((3, 4, 2), (2, 0, 1), 1)  # positions 1..6, each seen 4 times
    with pytest.raises(RuntimeError, match="more than one element"):
        out.copy_(torch.zeros(3, 4, 2, dtype=torch.int64))  # the write-back as built
    launcher(torch.arange(4), torch.zeros(4, dtype=torch.int64), out, 24, stream=None)
    assert storage.tolist() == [-1] + [5] * 6 + [-1] * 5


def test_dense_arguments_and_short_calls_are_left_to_the_wrapped_launcher():
    seen = []
    args = {"in_ptr0": "*i64", "in_out_ptr0": "*i64", "out_ptr0": "*i64"}
    narrowing = _narrowing(seen)
    launcher = keep_strides(MODULE, narrowing, ["in_ptr0", "in_out_ptr0", "out_ptr0", "xnumel"], args, [])
    dense = torch.arange(4)
    launcher(dense, torch.zeros(4, dtype=torch.int64).t(), torch.zeros(4, dtype=torch.int64), 4, stream=None)
    assert seen[0]["in"][:2] == (torch.int64, (1,))  # untouched: the wrapped launcher narrows it
    assert keep_strides(MODULE, narrowing, ["xnumel"], {}, []) is narrowing  # nothing to narrow


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "downcast_strides", "views")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    res = runs[state]
    assert_probed_repaired_and_undone(res)


@pytest.mark.parametrize("state", STATES)
def test_views_read_past_the_copy_as_built_and_right_with_npu_fixes(runs, state):
    """As built, each int64/float64 view with gaps reaches its kernel as a contiguous copy
    that the kernel indexes with the view's strides: it reads past the copy. With npu_fixes
    each equals eager; the contiguous input is right either way. An expanded int64 output
    fails as built when the wrapper copies the kernel's int32 result back into it."""
    before, after = runs[state]["before"], runs[state]["after"]
    for label in VIEWS:
        assert before[label]["error"].startswith("OutOfBounds: "), (label, before[label])
    assert OVERLAP in before["expanded-output"]["error"], before["expanded-output"]
    assert before["contiguous"] == {"equal": True}
    assert all(r == {"equal": True} for r in after.values()), after
