"""int32-address-wrap (guard): a sum over 2^31 + 64 elements compiled through every
genuine state and the fixed wheel (the kernel generated, recorded at its launch, not run),
and kernels under 2^31 elements run in Triton's interpreter against eager."""

from __future__ import annotations

import pytest

from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "int32-address-wrap"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
NARROW = {"numels": {"xnumel": "i32", "r0_numel": "i32"}, "literal": True}


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "int32_address_wrap", "guard")


@pytest.mark.parametrize("state", STATES)
def test_a_kernel_past_2_31_elements_is_refused_where_it_would_wrap(runs, state):
    """Without npu_fixes the genuine states emit the kernel with int32 numels (the count
    2147483712 written into it as a literal, which Triton types unsigned): its addresses
    would wrap. The wheel emits int64 numel arguments. With npu_fixes the genuine states'
    compile stops with the guard's error, naming the count and the upgrade; undo brings
    the narrow kernel back. Kernels under 2^31 elements equal eager either way."""
    res = runs[state]
    if state in BEYOND[NAME]:
        assert res["before"] == res["undone"] == NARROW
        assert res["after"]["error"].startswith("Int32AddressWrap: a kernel over 2147483712 elements")
        assert "upgrade to the torch-npu 2.13.0 wheel" in res["after"]["error"]
    else:
        wide = {"numels": {"xnumel": "i64", "r0_numel": "i64"}, "literal": False}
        assert res["before"] == res["after"] == res["undone"] == wide
    assert res["controls"] == {"sum": True, "pointwise": True}
