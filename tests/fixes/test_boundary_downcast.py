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

# Loaded with NPU_FIXES=0: ``original`` is the untouched target. BATTERY wraps recording
# launchers (which record what they see, then write their outputs the way a kernel would)
# over argument roles, dtypes and pass-through cases, and records kernel-seen values,
# post-launch buffers, identities and copied attributes. ENABLE then arms npu_fixes.
BATTERY = """
import torch
from npu_fixes.fixes import boundary_downcast as fix
m = mods["npu_triton_heuristics"]
original = m._wrap_launcher_with_downcast
ATTRS = {"config": "cfg", "runnable": True, "n_regs": 7, "n_spills": 0, "shared": 64,
         "store_cubin": False, "cache_hash": "h", "def_args": ["d"], "call_args": ["c"]}

def recording(def_args, mutated=(), attrs=True):
    log = []
    def launcher(*args, stream=None, **kwargs):
        seen = {"stream": stream, "kwargs": sorted(kwargs), "nargs": len(args)}
        for name, a in zip(def_args, args):
            if not isinstance(a, torch.Tensor):
                seen[name] = repr(a)
                continue
            seen[name] = [str(a.dtype)] + ([] if name.startswith("out_ptr") else [a.tolist()])
            if name.startswith("out_ptr"):
                a.copy_(torch.arange(a.numel()).reshape(a.shape) + 3)
            elif name.startswith("in_out_ptr"):
                a.add_(1)
            elif name in mutated:
                a.add_(2)
        log.append(seen)
        return "ret"
    launcher._npu_def_args = list(def_args)
    if attrs:
        for k, v in ATTRS.items():
            setattr(launcher, k, v)
    return launcher, log

def launch(def_args, downcast, mutated, calls):
    launcher, log = recording(def_args, mutated)
    wrapped = m._wrap_launcher_with_downcast(launcher, downcast, mutated)
    out = {"same_object": wrapped is launcher,
           "attrs": {k: getattr(wrapped, k, None) for k in [*ATTRS, "_npu_def_args", "fn", "bin"]},
           "returns": [], "buffers": []}
    for args, kwargs in calls:
        out["returns"].append(wrapped(*args, **kwargs))
        out["buffers"].append([[str(a.dtype), a.tolist()] if isinstance(a, torch.Tensor) else repr(a)
                               for a in args])
    out["seen"] = log
    return out

def t(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)

ALL = ["in_ptr0", "in_out_ptr0", "out_ptr0", "in_ptr1", "xnumel"]
I64 = {n: "*i64" for n in ALL[:4]}
F64 = {n: "*fp64" for n in ALL[:4]}

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
    r["wrong-dtype-passes"] = launch(ALL, I64, [], [((t([1], torch.int32), t([2], torch.int32), t([0], torch.int32),
                                                      t([3], torch.int32), 1), {})])
    r["non-tensor"] = launch(ALL, I64, [], [((None, 5, None, 7, 1), {})])
    r["too-few-args"] = launch(ALL, I64, [], [((t([1]), t([2])), {"stream": 2})])
    r["extra-kwargs"] = launch(["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [],
                               [((t([1, 2]), 2), {"stream": 5, "benchmark": True})])
    r["not-in-map"] = launch(ALL, {"in_ptr0": "*i32", "out_ptr0": "*fp16"}, [], [((t([1]), t([1]), t([1]), t([1]), 1), {})])
    r["no-downcast-args"] = launch(ALL, {}, [], [])
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

# After ENABLE on the pre-fix copy: graph capture (simulated through the capture
# detector) keeps nothing in a module cache; the range check is read at wrap time.
CAPTURE_AND_CHECK = """
from unittest import mock
def caches():
    return {"memo": len(m._downcast_memo), "prefix_out_cache": len(m._npu_prefix_downcast_out_cache)}
def run_once(detector):
    with mock.patch.object(fix, "capture_detector", return_value=detector):
        launcher, log = recording(["in_ptr0", "in_out_ptr0", "xnumel"], ["in_out_ptr0"])
        wrapped = m._wrap_launcher_with_downcast(launcher, {"in_ptr0": "*i64", "in_out_ptr0": "*i64"}, [])
    src, io = t([1, 2]), t([3, 4])
    wrapped(src, io, 2, stream=None)
    return [caches(), log[0], io.tolist()]
m._downcast_memo.clear()
m._npu_prefix_downcast_out_cache.clear()  # filled by the pre-fix battery above
result["capturing"] = run_once(lambda: True)
def broken():
    raise RuntimeError("no accelerator")
result["detector_error"] = run_once(broken)
m._downcast_memo.clear()
result["not_capturing"] = run_once(None)

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
    body = BATTERY + ENABLE + "result['battery_after'] = battery()\n" + CAPTURE_AND_CHECK + """
result["undo"] = npu_fixes.undo()
result["restored"] = m._wrap_launcher_with_downcast is original
"""
    return host_check(prefix_copy("boundary-downcast"), body, env={"NPU_FIXES": "0"})


@pytest.fixture(scope="module")
def fixed_runs():
    return {v: host_check(wheel_path(v), BATTERY + ENABLE, env={"NPU_FIXES": "0"}) for v in FIXED_UPSTREAM}


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


def test_prefix_copy_is_detected_and_matches_upstream_after_fix(prefix_runs, fixed_runs):
    res = prefix_runs
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"], res["battery_after"]
    for version in FIXED_UPSTREAM:
        assert after == fixed_runs[version]["battery"]
    check_battery(after)
    # the seed's symptom before the fix: the in/out buffer's contents never reach the kernel
    assert before["fastnlp"]["seen"][0]["in_out_ptr0"] != ["torch.int32", [474] * 4]
    assert res["undo"] >= 1 and res["restored"] is True


def test_capture_mode_keeps_no_module_cache(prefix_runs):
    seen = {"stream": None, "kwargs": [], "nargs": 3, "in_ptr0": ["torch.int32", [1, 2]],
            "in_out_ptr0": ["torch.int32", [3, 4]], "xnumel": "2"}
    caches, log, io = prefix_runs["capturing"]
    assert caches == {"memo": 0, "prefix_out_cache": 0} and log == seen and io == [4, 5]
    # no capture (or no usable detector): the input memo works as upstream's does
    assert prefix_runs["not_capturing"] == [{"memo": 1, "prefix_out_cache": 0}, seen, [4, 5]]
    assert prefix_runs["detector_error"][0]["memo"] == 1


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
    for view, dense in ((base, True), (base.t(), True), (base[:, ::2], False), (base[1:3], True)):
        assert is_dense(view) is dense
        for keep in (True, False):
            twin = narrow_like(view, torch.int32, keep_values=keep)
            assert twin.dtype == torch.int32 and twin.shape == view.shape and twin.stride() == view.stride()
            if keep:
                assert torch.equal(twin.long(), view)
