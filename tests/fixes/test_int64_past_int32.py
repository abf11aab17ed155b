"""int64-past-int32 (guard): int64 programs at every genuine commit and the 2.13.0 and 2.14.0
wheels, kernels run in Triton's interpreter, against eager; the guard's layer on a recording
launcher (tests/programs/int64_past_int32.py)."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.fixes import int64_past_int32 as fix
from npu_fixes.fixes.shared.narrowing import Role
from tests.conftest import run_at_states, run_program
from tests.genuine_states import COMMITS

STATES = (*COMMITS, "2.13.0", "2.14.0")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "int64_past_int32", "guarded")


def test_only_int64_arguments_the_kernel_reads_are_checked():
    plan = [(0, "in_ptr0", torch.int64, torch.int32, Role.INPUT),
            (1, "in_out_ptr0", torch.int64, torch.int32, Role.IN_OUT),
            (2, "in_ptr1", torch.int64, torch.int32, Role.IN_OUT),  # a mutated graph input
            (3, "out_ptr0", torch.int64, torch.int32, Role.OUTPUT),
            (4, "in_ptr2", torch.float64, torch.float32, Role.INPUT),
            (5, "ws_ptr", torch.int64, torch.int32, Role.INPUT)]  # a workspace the kernel writes first
    assert fix.checked_arguments(plan) == [(0, "in_ptr0")]


def test_check_passes_int32_range_and_names_the_argument_past_it():
    info = torch.iinfo(torch.int32)
    fix.check("k", [("in_ptr0", torch.tensor([info.min, info.max])), ("in_ptr1", torch.tensor([], dtype=torch.long))])
    fix.check("k", [])
    for bad in ([info.max + 1], [0, info.min - 1], [2**62]):
        with pytest.raises(fix.Int64PastInt32, match=r"^k: int64 argument 'in_ptr1' holds values in") as exc:
            fix.check("k", [("in_ptr0", torch.tensor([1, 2])), ("in_ptr1", torch.tensor(bad))])
        assert isinstance(exc.value, OverflowError) and str(max(bad, key=abs)) in str(exc.value)
        assert "NPU_FIXES_DISABLE=int64-past-int32" in str(exc.value)


@pytest.mark.parametrize("state", STATES)
def test_a_value_past_int32_is_cut_as_built_and_stops_the_launch_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and "reached the kernel as [-2147483641]" in res["probe_before"][1]
    assert res["state"] == "guarded" and res["probe_after"] is False and res["undone"] is True, res
    assert res["before"]["past-int32"] == [1, 4, 1]  # eager: [2**40 + 1, 4, -2**35 + 1]
    assert res["after"]["past-int32"].startswith("Int64PastInt32: triton kernel: int64 argument 'in_ptr0' holds "
                                                 "values in [-34359738368, 1099511627776], past int32's")
    for program in ("in-range", "written-only"):  # left as built: equal to eager
        assert res["before"][program] is True and res["after"][program] is True, program


def test_the_layer_checks_inputs_alone_outside_capture(genuine):
    res = run_program("int64_past_int32", "layer", env={"NPU_FIXES": "0"}, location=genuine("bafc50684"))
    assert res["in_ptr0"].startswith("triton kernel: int64 argument 'in_ptr0' holds values in [2147483648, "), res
    # What the kernel writes is not checked: an in/out buffer, a mutated graph input, a pure output.
    assert res["in_out_ptr0"][0] == [5] and res["in_ptr1"][:2] == [[5], [5]] and res["out_ptr0"][:3] == [[5]] * 3
    assert res["none"][:3] == [[5], [5], [5]]
    # A buffer the compiled code allocated for itself is not checked (Inductor's circular pad reads
    # one before anything writes it): cut, no error.
    assert res["allocated"][0] == [-2147483648]
    assert res["capturing"][:3] == [[-2147483648]] * 3  # no synchronisation during capture: cut
