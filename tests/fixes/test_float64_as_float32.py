"""float64-as-float32 (guard): float64 programs at every genuine commit and the 2.13.0 and
2.14.0 wheels, kernels run in Triton's interpreter, against eager
(tests/programs/float64_as_float32.py)."""

from __future__ import annotations

import re
import warnings

import pytest

from npu_fixes.fixes import float64_as_float32 as fix
from tests.conftest import run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, "2.13.0", "2.14.0")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "float64_as_float32", "warned")


def test_only_float64_arguments_are_named():
    assert fix.float64_arguments({"in_ptr0": "*i64", "in_ptr1": "*fp64", "out_ptr0": "*fp64"}) == [
        "in_ptr1", "out_ptr0"]
    assert fix.float64_arguments({"in_ptr0": "*i64"}) == []


def test_the_warning_names_kernel_and_arguments_and_can_be_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error", fix.Float64AsFloat32Warning)
        with pytest.raises(fix.Float64AsFloat32Warning,
                           match=r"^triton_poi_0: float64 arguments 'in_ptr0', 'out_ptr0' computed in float32"):
            fix.warn("triton_poi_0", ["in_ptr0", "out_ptr0"])


@pytest.mark.parametrize("state", STATES)
def test_float64_is_float32_as_built_silently_and_named_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and "reached the kernel as [1073741824.0]" in res["probe_before"][1]
    assert res["state"] == "guarded" and res["probe_after"] is False and res["undone"] is True, res
    for config in ("before", "after"):
        # float32 keeps 128 s steps at 1.8e9 s: minutes off by up to a second's worth
        assert res[config]["timestamps"] > 1e-3 and res[config]["float32"] == 0.0, res[config]
    assert res["before"]["warnings"] == []
    assert len(res["after"]["warnings"]) == 1, res["after"]
    assert re.match(r"triton_\w+: float64 arguments 'in_ptr0', 'out_ptr0' computed in float32: ",
                    res["after"]["warnings"][0]), res["after"]
