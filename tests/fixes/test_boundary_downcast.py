"""boundary-downcast: the roles, the fixed wheels left alone, the pre-fix wrapper repaired,
the opt-in range check and graph-capture behaviour."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.fixes.boundary_downcast import (
    DowncastRangeError,
    Role,
    boundary_role,
    check_enabled,
    check_fits,
    is_dense,
    narrow_like,
)
from tests.conftest import FIXED_UPSTREAM, host_check, wheel_path
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE

FIX = "boundary-downcast"
#: Genuine pre-fix states with this fix's defect.
DEFECTIVE = tuple(state for state in PRE_FIX if FIX in DEFECTS[state])

# Loaded with NPU_FIXES=0: ``original`` is the untouched target. BATTERY wraps recording
# launchers (which record what they see, then write their outputs the way a kernel would)
# over argument roles, dtypes and pass-through cases, and records kernel-seen values (and
# strides where layouts matter), post-launch buffers, returns and raised errors, identities,
# copied attributes, input-memo use (entries, reused casts) with memo invalidation, the
# dedup switch and graph capture, wrap-time keywords, launch kwargs and extra positionals,
# aliased arguments. ENABLE then arms npu_fixes.
BATTERY = """
import torch
from types import SimpleNamespace as NS
from unittest import mock
from npu_fixes.fixes import boundary_downcast as fix
m = mods["npu_triton_heuristics"]
original = m._wrap_launcher_with_downcast
ATTRS = {"config": "cfg", "runnable": True, "n_regs": 7, "n_spills": 0, "shared": 64,
         "store_cubin": False, "cache_hash": "h", "def_args": ["d"], "call_args": ["c"]}

def triton_poi_fused_0():
    pass

def recording(def_args, mutated=(), attrs=True, strides=False, raises=False):
    log, objs = [], []
    def launcher(*args, stream=None, **kwargs):
        seen = {"stream": stream, "kwargs": sorted(kwargs), "nargs": len(args)}
        objs.append(args)
        for name, a in zip(def_args, args):
            if not isinstance(a, torch.Tensor):
                seen[name] = repr(a)
                continue
            seen[name] = [str(a.dtype)] + ([] if name.startswith("out_ptr") else [a.tolist()])
            if strides:
                seen[name].append(list(a.stride()))
            if name.startswith("out_ptr"):
                a.copy_(torch.arange(a.numel()).reshape(a.shape) + 3)
            elif name.startswith("in_out_ptr"):
                a.add_(1)
            elif name in mutated:
                a.add_(2)
        log.append(seen)
        if raises:
            raise RuntimeError("kernel failed after writing")
        return "ret"
    launcher._npu_def_args = list(def_args)
    launcher.objs = objs
    if attrs:
        for k, v in ATTRS.items():
            setattr(launcher, k, v)
    return launcher, log

def describe(value):
    return getattr(value, "__qualname__", value) if callable(value) else value

def launch(def_args, downcast, mutated, calls, between=None, keywords=False, setup=None, **options):
    launcher, log = recording(def_args, mutated, **options)
    if setup:
        setup(launcher)
    memo_before = len(m._downcast_memo)
    if keywords:
        wrapped = m._wrap_launcher_with_downcast(launcher, downcast_args=downcast, mutated_arg_names=set(mutated))
    else:
        wrapped = m._wrap_launcher_with_downcast(launcher, downcast, mutated)
    out = {"same_object": wrapped is launcher,
           "attrs": {k: describe(getattr(wrapped, k, None)) for k in [*ATTRS, "_npu_def_args", "fn", "bin"]},
           "attr_names": sorted(k for k in vars(wrapped) if k != "objs"),
           "returns": [], "buffers": []}
    for args, kwargs in calls:
        try:
            out["returns"].append(wrapped(*args, **kwargs))
        except Exception as exc:  # what reaches the caller
            out["returns"].append(f"raised {type(exc).__name__}: {exc}")
        out["buffers"].append([[str(a.dtype), a.tolist()] if isinstance(a, torch.Tensor) else repr(a)
                               for a in args])
        if between:
            between()
    # input caching: memo entries added while the sources are alive, and which kernel
    # arguments of each later launch are the very objects of the first one
    out["memo"] = len(m._downcast_memo) - memo_before
    first = launcher.objs[0] if launcher.objs else ()
    out["reused"] = [[name for name, a, b in zip(def_args, first, later) if isinstance(a, torch.Tensor) and a is b]
                     for later in launcher.objs[1:]]
    out["seen"] = log
    return out

def t(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)

ALL = ["in_ptr0", "in_out_ptr0", "out_ptr0", "in_ptr1", "xnumel"]
I64 = {n: "*i64" for n in ALL[:4]}
F64 = {n: "*fp64" for n in ALL[:4]}
THREE = ["in_ptr0", "in_out_ptr0", "out_ptr0", "xnumel"]

def grid():
    return t(list(range(24))).view(4, 6)

def battery():
    r = {}
    r["fastnlp"] = launch(["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, ["in_out_ptr0"],
                          [((t([474] * 4), 4), {"stream": 0})])
    r["roles-i64"] = launch(ALL, I64, ["in_ptr1"], [
        ((t([1, 2]), t([10, 20]), t([0, 0]), t([5, 6]), 2), {"stream": 3}),
        ((t([[1, 2], [3, 4]]), t([[7, 8], [9, 10]]), t([[0, 0], [0, 0]]), t([[1, 1], [2, 2]]), 4), {"stream": None}),
    ])
    r["roles-f64"] = launch(ALL, F64, ["in_ptr1"], [
        ((t([1.5, -2.25], torch.float64), t([1e10, 0.125], torch.float64), t([0.0, 0.0], torch.float64),
          t([3.0, 4.0], torch.float64), 2), {"stream": 1}),
    ])
    r["mutated-out-name"] = launch(["out_ptr0", "xnumel"], {"out_ptr0": "*i64"}, ["out_ptr0"],
                                   [((t([9, 9, 9]), 3), {})])
    r["repeat-input-memo"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                    [((src, t([0, 0]), 2), {}) for src in [t([4, 5])] * 3])
    src = t([4, 5])
    r["memo-invalidated"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                   [((src, t([0, 0]), 2), {}) for _ in range(3)], between=lambda: src.add_(10))
    eps = t(1e-6, torch.float64)  # a 0-d fp64 scalar shared by launches (RMSNorm eps)
    r["scalar-0d-memo"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*fp64", "out_ptr0": "*fp64"}, [],
                                 [((eps, t([0.0], torch.float64), 1), {}) for _ in range(2)])
    with mock.patch.object(m, "npu_dedup_downcast", False):
        r["dedup-off"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                [((src, t([0, 0]), 2), {}) for _ in range(2)])
    capturing, captured_src = NS(is_current_stream_capturing=lambda: True), t([4, 5])
    with mock.patch.object(torch, "npu", capturing, create=True):  # the accelerator's capture test
        r["graph-capture"] = launch(["in_ptr0", "in_out_ptr0", "xnumel"], {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                                    [], [((captured_src, t([1, 2]), 2), {}) for _ in range(2)])
    r["wrong-dtype-passes"] = launch(ALL, I64, [], [((t([1], torch.int32), t([2], torch.int32), t([0], torch.int32),
                                                      t([3], torch.int32), 1), {})])
    r["non-tensor"] = launch(ALL, I64, [], [((None, 5, None, 7, 1), {})])
    r["too-few-args"] = launch(ALL, I64, [], [((t([1]), t([2])), {"stream": 2})])
    r["extra-positional"] = launch(["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [],
                                   [((t([1, 2]), 2, t([8, 9]), "extra"), {"stream": 4})])
    r["extra-kwargs"] = launch(["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [],
                               [((t([1, 2]), 2), {"stream": 5, "benchmark": True})])
    r["keyword-wrap"] = launch(["in_ptr0", "in_out_ptr0", "xnumel"], {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                               ["in_ptr0"], [((t([1, 2]), t([3, 4]), 2), {})], keywords=True)
    r["not-in-map"] = launch(ALL, {"in_ptr0": "*i32", "out_ptr0": "*fp16"}, [], [((t([1]), t([1]), t([1]), t([1]), 1), {})])
    r["no-downcast-args"] = launch(ALL, {}, [], [])
    r["empty"] = launch(THREE, {n: "*i64" for n in THREE[:3]}, [], [((t([]), t([]), t([]), 0), {})])
    r["transposed"] = launch(THREE, {n: "*i64" for n in THREE[:3]}, [],
                             [((grid().t(), grid().t(), grid().t(), 24), {})], strides=True)
    r["gapped-views"] = launch(THREE, {n: "*i64" for n in THREE[:3]}, [],
                               [((grid()[:, ::2], grid()[:, ::2], grid()[:, ::2], 12), {})], strides=True)
    r["broadcast-input"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                  [((t([7]).expand(4), t([0, 0, 0, 0]), 4), {})], strides=True)
    r["broadcast-rows"] = launch(["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                 [((t([[1], [2], [3]]).expand(3, 4), t([0] * 12).view(3, 4), 12), {})],
                                 strides=True)
    aliased = t([7, 8])
    r["aliased-written"] = launch(["in_out_ptr0", "out_ptr0", "xnumel"], {"in_out_ptr0": "*i64", "out_ptr0": "*i64"},
                                  [], [((aliased, aliased, 2), {})])
    aliased_in = t([7, 8])
    r["aliased-input"] = launch(["in_ptr0", "in_out_ptr0", "xnumel"], {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                                [], [((aliased_in, aliased_in, 2), {})])
    r["launcher-raises"] = launch(THREE, {n: "*i64" for n in THREE[:3]}, [],
                                  [((t([1]), t([2]), t([9]), 1), {})], raises=True)
    def fn_and_bin(launcher):
        launcher.fn, launcher.bin = triton_poi_fused_0, "compiled-binary"
    r["fn-bin-attrs"] = launch(["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [], [((t([1]), 1), {})],
                               setup=fn_and_bin)
    bare, _ = recording(ALL, attrs=False)
    del bare._npu_def_args
    r["no-def-args"] = m._wrap_launcher_with_downcast(bare, I64, []) is bare
    return r

result["probe_before"] = fix.probe(m).defective
result["battery"] = battery()
"""

ENABLE = """
import os
os.environ.pop("NPU_FIXES", None)
import npu_fixes
npu_fixes.apply()
result["state"] = {r.name: r for r in npu_fixes.status()}["boundary-downcast"].state.value
result["identical"] = m._wrap_launcher_with_downcast is original
result["probe_after"] = fix.probe(m).defective
"""

# After ENABLE on the pre-fix copy: the range check is read at wrap time.
RANGE_CHECK = """
def range_case(wrapped, *args):
    try:
        wrapped(*args, stream=None)
        return "ok"
    except fix.DowncastRangeError as exc:
        return [isinstance(exc, OverflowError), str(exc)]
def wrap_in(dtype="*i64"):
    launcher, _ = recording(["in_ptr0", "in_out_ptr0", "xnumel"])
    return m._wrap_launcher_with_downcast(launcher, {"in_ptr0": dtype, "in_out_ptr0": dtype}, [])
unchecked = wrap_in()
os.environ["NPU_FIXES_CHECK_DOWNCAST"] = "1"
checked, checked_f = wrap_in(), wrap_in("*fp64")
del os.environ["NPU_FIXES_CHECK_DOWNCAST"]
big, ok = t([1, 2**31]), t([0, 2])
result["range"] = {
    "unchecked": range_case(unchecked, big, ok, 2),
    "in_range": range_case(checked, t([-2**31, 2**31 - 1]), ok, 2),
    "input_too_big": range_case(checked, big, ok, 2),
    "in_out_too_small": range_case(checked, ok, t([-2**31 - 1, 0]), 2),
    "empty": range_case(checked, t([]), t([]), 0),
    "float_inf_nan": range_case(checked_f, t([float("inf"), float("nan")], torch.float64),
                                t([1.0, -1e38], torch.float64), 2),
    "float_too_big": range_case(checked_f, t([1.0, 0.5], torch.float64), t([1e39, 0.0], torch.float64), 2),
}
"""


@pytest.fixture(scope="module")
def prefix_runs(prefix_copy):
    body = BATTERY + ENABLE + "result['battery_after'] = battery()\n" + RANGE_CHECK + """
result["undo"] = npu_fixes.undo()
result["restored"] = m._wrap_launcher_with_downcast is original
"""
    return host_check(prefix_copy("boundary-downcast"), body, env={"NPU_FIXES": "0"})


@pytest.fixture(scope="module")
def fixed_runs():
    return {v: host_check(wheel_path(v), BATTERY + ENABLE, env={"NPU_FIXES": "0"}) for v in FIXED_UPSTREAM}


@pytest.fixture(scope="module")
def genuine_runs(genuine):
    """The battery at each genuine state with the defect, before and after npu_fixes
    applies (one interpreter per state), and at REFERENCE, where it must stay unrepaired."""
    body = BATTERY + ENABLE + "result['battery_after'] = battery()\n"
    return {state: host_check(genuine(state), body, env={"NPU_FIXES": "0"}) for state in (*DEFECTIVE, REFERENCE)}


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


def test_check_switch_values():
    assert check_enabled({"NPU_FIXES_CHECK_DOWNCAST": "1"})
    assert check_enabled({"NPU_FIXES_CHECK_DOWNCAST": " True "})
    for value in ("", "0", "off", "no"):
        assert not check_enabled({"NPU_FIXES_CHECK_DOWNCAST": value})
    assert not check_enabled({})


@pytest.mark.parametrize(
    "wide, narrow", [(torch.int64, torch.int32), (torch.float64, torch.float32)]
)
def test_range_check_sweep(wide, narrow):
    info = torch.finfo(narrow) if narrow.is_floating_point else torch.iinfo(narrow)
    limits = (float(info.min), float(info.max)) if narrow.is_floating_point else (info.min, info.max)
    for low, high in [limits, (0, 0), (-5, 5), (limits[0], 0), (0, limits[1])]:
        check_fits(torch.tensor([low, high], dtype=wide), narrow, "in_ptr0", "k")
    for bad in ([limits[1] * 2], [limits[0] * 2, 0]) if narrow.is_floating_point else (
        [limits[1] + 1], [limits[0] - 1, 0], [2**40]
    ):
        with pytest.raises(DowncastRangeError, match=r"'in_out_ptr0'.*outside") as exc:
            check_fits(torch.tensor(bad, dtype=wide), narrow, "in_out_ptr0", "k")
        assert isinstance(exc.value, OverflowError)
        assert str(limits[1]) in str(exc.value)


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


def test_range_check_is_opt_in_and_names_the_argument(prefix_runs):
    r = prefix_runs["range"]
    assert r["unchecked"] == "ok"  # read when wrapped: turning it on later changes nothing
    assert r["in_range"] == "ok" and r["empty"] == "ok" and r["float_inf_nan"] == "ok"
    for case, name, found in [("input_too_big", "in_ptr0", "2147483648"),
                              ("in_out_too_small", "in_out_ptr0", "-2147483649"),
                              ("float_too_big", "in_out_ptr0", "1e+39")]:
        is_overflow, message = r[case]
        assert is_overflow is True
        assert f"'{name}'" in message and found in message and "outside" in message, message
    assert "2147483647" in r["input_too_big"][1]


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


def test_check_switch_on_a_fixed_install_says_it_does_nothing():
    res = host_check(wheel_path("2.13.0"), """
import npu_fixes
rec = {r.name: r for r in npu_fixes.status()}["boundary-downcast"]
result["state"], result["detail"] = rec.state.value, rec.detail
""", env={"NPU_FIXES_CHECK_DOWNCAST": "1"})
    assert res["state"] == "not-needed"
    assert "NPU_FIXES_CHECK_DOWNCAST has no effect here: upstream's own wrapper runs" in res["detail"]
