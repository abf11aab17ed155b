"""boundary-downcast: the roles, the fixed wheels left alone, the pre-fix wrapper repaired,
and graph-capture behaviour."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.fixes.shared.narrowing import Role, boundary_role, is_dense, narrow_like
from tests.conftest import FIXED_UPSTREAM, run_program, wheel_install
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE, sharing_the_target

FIX = "boundary-downcast"
#: Genuine pre-fix states with this fix's defect.
DEFECTIVE = tuple(state for state in PRE_FIX if FIX in DEFECTS[state])

#: Armed only by npu_fixes.apply() in the program, after the probe; the other fixes of the same
#: target switched off, so that the battery judges this fix alone.
OFF = {"NPU_FIXES": "0", "NPU_FIXES_DISABLE": sharing_the_target(FIX)}


@pytest.fixture(scope="module")
def prefix_runs(prefix_copy):
    return run_program("boundary_downcast", "battery_runs", env=OFF, location=prefix_copy("boundary-downcast"),
                       after=True, undo=True)


@pytest.fixture(scope="module")
def fixed_runs():
    return {v: run_program("boundary_downcast", "battery_runs", env=OFF, location=wheel_install(v))
            for v in FIXED_UPSTREAM}


@pytest.fixture(scope="module")
def genuine_runs(genuine):
    """The battery at each genuine state with the defect, before and after npu_fixes
    applies (one interpreter per state), and at REFERENCE, where it must stay unrepaired."""
    return {state: run_program("boundary_downcast", "battery_runs", env=OFF, location=genuine(state), after=True)
            for state in (*DEFECTIVE, REFERENCE)}


#: The launcher attributes that every state's wrapper copies onto its wrapper.
UPSTREAM_COPIED_ATTRS = ("config", "runnable", "n_regs", "n_spills", "shared", "store_cubin",
                         "fn", "bin", "def_args", "call_args", "_npu_def_args", "cache_hash")

#: Battery cases where our repaired wrapper deliberately differs from upstream's fixed one
#: (5ff81d9c5, and the same function in the 2.13.0/2.14.0 wheels). Every other case,
#: including each wrapper attribute, the input memo, kwargs and extra arguments, must match.
#: The pre-fix states' ``_wrap_launcher_with_downcast`` differs from 5ff81d9c5's only in the
#: defect (``preserve_input``), and ``_memoized_downcast``/``_DTYPE_DOWNCAST_MAP`` are the
#: same text at every state, so no case differs because of other code of a state.
DIFFERS_FROM_UPSTREAM_FIX = {
    "gapped-views": "a view with gaps (x[:, ::2], strides (6, 2)) keeps its strides in the narrow "
                    "temporaries; upstream's .to()/empty_like()/memoised cast make them contiguous "
                    "(3, 1), which the kernel, compiled for (6, 2), addresses wrongly; such an input "
                    "is therefore not memoised either",
    "broadcast-input": "a broadcast input (x.expand(4), stride 0) keeps stride 0 in its narrow copy "
                       "(the span it covers is cast); upstream's .to() makes it contiguous; values equal",
    "broadcast-rows": "a row-broadcast input ((3, 1).expand(3, 4), strides (1, 0)) keeps (1, 0); "
                      "upstream's contiguous copy (4, 1), read by a kernel compiled for (1, 0), gives "
                      "row 0's values where rows 1 and 2 were meant",
    "graph-capture": "while the accelerator captures a graph, input casts are not memoised (a cast "
                     "made in capture lives in the graph's pool and is rewritten by replays); "
                     "upstream memoises during capture too",
}


# -- the rule ------------------------------------------------------------------------------


def test_roles():
    for name in ("out_ptr0", "out_ptr12"):
        assert boundary_role(name, ()) is Role.OUTPUT
        assert boundary_role(name, {name}) is Role.IN_OUT  # mutated: the kernel may read it
    for name in ("in_out_ptr0", "in_out_ptr3"):
        assert boundary_role(name, ()) is Role.IN_OUT
    for name in ("in_ptr0", "ws_ptr", "xnumel"):
        assert boundary_role(name, ()) is Role.INPUT
        assert boundary_role(name, [name]) is Role.IN_OUT


# -- real upstream code ----------------------------------------------------------------------


def check_battery(battery: dict) -> None:
    """What upstream's fixed wrapper does, independently of any copy of it."""
    fast = battery["fastnlp"]
    assert fast["seen"] == [{"stream": 0, "kwargs": [], "nargs": 2, "in_out_ptr0": ["torch.int32", [474] * 4],
                             "xnumel": "4"}]
    assert fast["buffers"] == [[["torch.int64", [475] * 4], "4"]]  # written back, widened
    first = battery["roles-i64"]["seen"][0]
    assert first["in_ptr0"] == ["torch.int32", [1, 2]] and first["in_out_ptr0"] == ["torch.int32", [10, 20]]
    assert first["out_ptr0"] == ["torch.int32"] and first["in_ptr1"] == ["torch.int32", [5, 6]]
    assert battery["roles-i64"]["buffers"][0] == [
        ["torch.int64", [1, 2]], ["torch.int64", [11, 21]], ["torch.int64", [3, 4]],
        ["torch.int64", [7, 8]], "2"]
    assert battery["too-few-args"]["seen"][0]["in_ptr0"] == ["torch.int64", [1]]
    assert battery["wrong-dtype-passes"]["seen"][0]["in_ptr0"] == ["torch.int32", [1]]
    assert battery["extra-kwargs"]["seen"][0]["kwargs"] == ["benchmark"]
    for case in ("not-in-map", "no-downcast-args"):
        assert battery[case]["same_object"] is True
    assert battery["no-def-args"] is True
    assert battery["roles-i64"]["attrs"]["n_regs"] == 7 and battery["roles-i64"]["attrs"]["fn"] is None


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(fixed_runs, version):
    res = fixed_runs[version]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    check_battery(res["battery"])


def differing(battery: dict, reference: dict) -> set[str]:
    assert battery.keys() == reference.keys()
    return {case for case in reference if battery[case] != reference[case]}


def test_prefix_copy_is_detected_and_matches_upstream_after_fix(prefix_runs, fixed_runs):
    res = prefix_runs
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"], res["battery_after"]
    for version in FIXED_UPSTREAM:
        assert differing(after, fixed_runs[version]["battery"]) == DIFFERS_FROM_UPSTREAM_FIX.keys()
    check_battery(after)
    # the seed's symptom before the fix: the in/out buffer's contents never reach the kernel
    assert before["fastnlp"]["seen"][0]["in_out_ptr0"] != ["torch.int32", [474] * 4]
    assert res["undo"] >= 1 and res["restored"] is True


# -- genuine states: the code our users run --------------------------------------------------


def test_reference_state_is_left_identical(genuine_runs, fixed_runs):
    res = genuine_runs[REFERENCE]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    assert res["battery_after"] == res["battery"]
    check_battery(res["battery"])
    for version in FIXED_UPSTREAM:  # the same function as the published wheels
        assert res["battery"] == fixed_runs[version]["battery"]


@pytest.mark.parametrize("state", DEFECTIVE)
def test_genuine_state_is_repaired_to_reference(genuine_runs, state):
    res, reference = genuine_runs[state], genuine_runs[REFERENCE]["battery"]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"], res["battery_after"]
    assert differing(after, reference) == DIFFERS_FROM_UPSTREAM_FIX.keys()
    check_battery(after)
    # the defect at this state: in/out and mutated buffers lose their input
    assert before["fastnlp"]["seen"][0]["in_out_ptr0"] != ["torch.int32", [474] * 4]
    assert {"fastnlp", "roles-i64", "roles-f64", "keyword-wrap"} <= differing(before, reference)
    # what the old wrapper did besides the defect is kept: memo, pass-throughs, attributes
    for case in ("repeat-input-memo", "memo-invalidated", "scalar-0d-memo", "dedup-off",
                 "wrong-dtype-passes", "non-tensor", "too-few-args", "not-in-map", "no-def-args"):
        assert before[case] == after[case] == reference[case], case
    assert after["repeat-input-memo"]["reused"] == [["in_ptr0"]] * 2
    assert after["fn-bin-attrs"]["attr_names"] == sorted(UPSTREAM_COPIED_ATTRS)
    assert after["fn-bin-attrs"]["attrs"]["fn"] == "triton_poi_fused_0"


def test_aliased_written_arguments_write_back_in_argument_order(genuine_runs, fixed_runs):
    """in_out_ptr0 and out_ptr0 on one buffer: the later argument's result stays, as in
    upstream's fix (the repair once wrote all outputs back before all in/outs)."""
    for res in (*(genuine_runs[s]["battery_after"] for s in DEFECTIVE), genuine_runs[REFERENCE]["battery"]):
        assert res["aliased-written"]["buffers"] == [[["torch.int64", [3, 4]], ["torch.int64", [3, 4]], "2"]]


def test_listed_differences_are_what_they_say(genuine_runs):
    for state in DEFECTIVE:
        ours, upstream = genuine_runs[state]["battery_after"], genuine_runs[REFERENCE]["battery"]
        gapped = [ours["gapped-views"]["seen"][0][n][-1] for n in ("in_ptr0", "in_out_ptr0", "out_ptr0")]
        assert gapped == [[6, 2]] * 3
        assert [upstream["gapped-views"]["seen"][0][n][-1] for n in ("in_ptr0", "in_out_ptr0", "out_ptr0")] == [[3, 1]] * 3
        assert ours["gapped-views"]["buffers"] == upstream["gapped-views"]["buffers"]
        assert ours["graph-capture"]["reused"] == [[]] and upstream["graph-capture"]["reused"] == [["in_ptr0"]]
        for case, kept, contiguous in (("broadcast-input", [0], [1]), ("broadcast-rows", [1, 0], [4, 1])):
            assert ours[case]["seen"][0]["in_ptr0"][-1] == kept, case
            assert upstream[case]["seen"][0]["in_ptr0"][-1] == contiguous, case
            assert ours[case]["buffers"] == upstream[case]["buffers"], case
        for case in DIFFERS_FROM_UPSTREAM_FIX:
            assert {k for k in ours[case] if ours[case][k] != upstream[case][k]} <= {"seen", "memo", "reused"}


def test_narrow_like_keeps_the_compiled_strides():
    base = torch.arange(4 * 6, dtype=torch.int64).view(4, 6)
    broadcast = torch.tensor([[1], [2], [3]]).expand(3, 4)  # strides (1, 0): overlapping elements
    for view, dense in ((base, True), (base.t(), True), (base[:, ::2], False), (base[1:3], True),
                        (torch.tensor([7]).expand(4), False), (broadcast, False), (base[1:, 2:], False)):
        assert is_dense(view) is dense
        for keep in (True, False):
            twin = narrow_like(view, torch.int32, keep_values=keep)
            assert twin.dtype == torch.int32 and twin.shape == view.shape and twin.stride() == view.stride()
            if keep:
                assert torch.equal(twin.long(), view)
