"""local-scalar-dense-lowering: graphs with a captured float ``.item()`` compiled through
every genuine state and the fixed wheel, kernels run in Triton's interpreter with the
backend's launcher grid, against eager (the rule is control-deps-lowering's, tested there)."""

from __future__ import annotations

import pytest

from tests.conftest import run_at_states
from tests.genuine_states import COMMITS

NAME = "local-scalar-dense-lowering"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
STOPS = "FallbackKernel output type <class 'torch.SymFloat'> is not supported"


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "local_scalar_dense_lowering", "item")


def test_the_wheel_computes_both_graphs(runs):
    expected = {"clamp-max-item": {"equal": True}, "scale-by-item": {"equal": True}}
    assert runs[WHEEL]["before"] == runs[WHEEL]["after"] == expected


@pytest.mark.parametrize("state", COMMITS)
def test_repaired_state_computes_what_the_wheel_computes(runs, state):
    """Before: ``clamp(y, max=x.max().item())`` stops in lowering (the scalar feeding only a
    kernel argument builds). After: both equal eager, as with the wheel's own code; undo
    brings the defect back."""
    res = runs[state]
    assert STOPS in res["before"]["clamp-max-item"]["error"], res["before"]
    assert res["before"]["scale-by-item"] == {"equal": True}
    assert res["after"] == runs[WHEEL]["before"]
    assert res["probe_after"] is False and res["undone"] is True
