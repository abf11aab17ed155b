"""Programs of tests/fixes/test_boundary_downcast.py."""

from __future__ import annotations

import os

from tests.programs import host_load, main

ATTRS = {"config": "cfg", "runnable": True, "n_regs": 7, "n_spills": 0, "shared": 64,
         "store_cubin": False, "cache_hash": "h", "def_args": ["d"], "call_args": ["c"]}
ALL = ["in_ptr0", "in_out_ptr0", "out_ptr0", "in_ptr1", "xnumel"]
I64 = {n: "*i64" for n in ALL[:4]}
F64 = {n: "*fp64" for n in ALL[:4]}
THREE = ["in_ptr0", "in_out_ptr0", "out_ptr0", "xnumel"]


def triton_poi_fused_0():
    pass


def recording(def_args, mutated=(), attrs=True, strides=False, raises=False):
    """A launcher that records what it sees, then writes its outputs the way a kernel
    would; and its log."""
    import torch

    log, objs = [], []

    def launcher(*args, stream=None, **kwargs):
        seen = {"stream": stream, "kwargs": sorted(kwargs), "nargs": len(args)}
        objs.append(args)
        for name, a in zip(def_args, args, strict=False):
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


def launch(m, def_args, downcast, mutated, calls, between=None, keywords=False, setup=None, **options):
    """Wrap a recording launcher with ``m``'s wrapper and launch it with each of ``calls``."""
    import torch

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
    out["reused"] = [[name for name, a, b in zip(def_args, first, later, strict=False) if isinstance(a, torch.Tensor) and a is b]
                     for later in launcher.objs[1:]]
    out["seen"] = log
    return out


def t(values, dtype=None):
    """A tensor of ``values`` (int64 unless ``dtype`` says otherwise)."""
    import torch

    return torch.tensor(values, dtype=torch.int64 if dtype is None else dtype)


def grid():
    return t(list(range(24))).view(4, 6)


def battery(m) -> dict:
    """Recording launchers wrapped by ``m``'s wrapper over argument roles, dtypes and
    pass-through cases: kernel-seen values (and strides where layouts matter), post-launch
    buffers, returns and raised errors, identities, copied attributes, input-memo use
    (entries, reused casts) with memo invalidation, the dedup switch and graph capture,
    wrap-time keywords, launch kwargs and extra positionals, aliased arguments."""
    from types import SimpleNamespace as NS
    from unittest import mock

    import torch

    r = {}
    r["fastnlp"] = launch(m, ["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, ["in_out_ptr0"],
                          [((t([474] * 4), 4), {"stream": 0})])
    r["roles-i64"] = launch(m, ALL, I64, ["in_ptr1"], [
        ((t([1, 2]), t([10, 20]), t([0, 0]), t([5, 6]), 2), {"stream": 3}),
        ((t([[1, 2], [3, 4]]), t([[7, 8], [9, 10]]), t([[0, 0], [0, 0]]), t([[1, 1], [2, 2]]), 4), {"stream": None}),
    ])
    r["roles-f64"] = launch(m, ALL, F64, ["in_ptr1"], [
        ((t([1.5, -2.25], torch.float64), t([1e10, 0.125], torch.float64), t([0.0, 0.0], torch.float64),
          t([3.0, 4.0], torch.float64), 2), {"stream": 1}),
    ])
    r["mutated-out-name"] = launch(m, ["out_ptr0", "xnumel"], {"out_ptr0": "*i64"}, ["out_ptr0"],
                                   [((t([9, 9, 9]), 3), {})])
    r["repeat-input-memo"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"},
                                    [], [((src, t([0, 0]), 2), {}) for src in [t([4, 5])] * 3])
    src = t([4, 5])
    r["memo-invalidated"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"},
                                   [], [((src, t([0, 0]), 2), {}) for _ in range(3)], between=lambda: src.add_(10))
    eps = t(1e-6, torch.float64)  # a 0-d fp64 scalar shared by launches (RMSNorm eps)
    r["scalar-0d-memo"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*fp64", "out_ptr0": "*fp64"},
                                 [], [((eps, t([0.0], torch.float64), 1), {}) for _ in range(2)])
    with mock.patch.object(m, "npu_dedup_downcast", False):
        r["dedup-off"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                [((src, t([0, 0]), 2), {}) for _ in range(2)])
    capturing, captured_src = NS(is_current_stream_capturing=lambda: True), t([4, 5])
    with mock.patch.object(torch, "npu", capturing, create=True):  # the accelerator's capture test
        r["graph-capture"] = launch(m, ["in_ptr0", "in_out_ptr0", "xnumel"],
                                    {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                                    [], [((captured_src, t([1, 2]), 2), {}) for _ in range(2)])
    r["wrong-dtype-passes"] = launch(m, ALL, I64, [], [((t([1], torch.int32), t([2], torch.int32),
                                                         t([0], torch.int32), t([3], torch.int32), 1), {})])
    r["non-tensor"] = launch(m, ALL, I64, [], [((None, 5, None, 7, 1), {})])
    r["too-few-args"] = launch(m, ALL, I64, [], [((t([1]), t([2])), {"stream": 2})])
    r["extra-positional"] = launch(m, ["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [],
                                   [((t([1, 2]), 2, t([8, 9]), "extra"), {"stream": 4})])
    r["extra-kwargs"] = launch(m, ["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [],
                               [((t([1, 2]), 2), {"stream": 5, "benchmark": True})])
    r["keyword-wrap"] = launch(m, ["in_ptr0", "in_out_ptr0", "xnumel"], {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                               ["in_ptr0"], [((t([1, 2]), t([3, 4]), 2), {})], keywords=True)
    r["not-in-map"] = launch(m, ALL, {"in_ptr0": "*i32", "out_ptr0": "*fp16"}, [],
                             [((t([1]), t([1]), t([1]), t([1]), 1), {})])
    r["no-downcast-args"] = launch(m, ALL, {}, [], [])
    r["empty"] = launch(m, THREE, {n: "*i64" for n in THREE[:3]}, [], [((t([]), t([]), t([]), 0), {})])
    r["transposed"] = launch(m, THREE, {n: "*i64" for n in THREE[:3]}, [],
                             [((grid().t(), grid().t(), grid().t(), 24), {})], strides=True)
    r["gapped-views"] = launch(m, THREE, {n: "*i64" for n in THREE[:3]}, [],
                               [((grid()[:, ::2], grid()[:, ::2], grid()[:, ::2], 12), {})], strides=True)
    r["broadcast-input"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"},
                                  [], [((t([7]).expand(4), t([0, 0, 0, 0]), 4), {})], strides=True)
    r["broadcast-rows"] = launch(m, ["in_ptr0", "out_ptr0", "xnumel"], {"in_ptr0": "*i64", "out_ptr0": "*i64"}, [],
                                 [((t([[1], [2], [3]]).expand(3, 4), t([0] * 12).view(3, 4), 12), {})],
                                 strides=True)
    aliased = t([7, 8])
    r["aliased-written"] = launch(m, ["in_out_ptr0", "out_ptr0", "xnumel"],
                                  {"in_out_ptr0": "*i64", "out_ptr0": "*i64"},
                                  [], [((aliased, aliased, 2), {})])
    aliased_in = t([7, 8])
    r["aliased-input"] = launch(m, ["in_ptr0", "in_out_ptr0", "xnumel"], {"in_ptr0": "*i64", "in_out_ptr0": "*i64"},
                                [], [((aliased_in, aliased_in, 2), {})])
    r["launcher-raises"] = launch(m, THREE, {n: "*i64" for n in THREE[:3]}, [],
                                  [((t([1]), t([2]), t([9]), 1), {})], raises=True)

    def fn_and_bin(launcher):
        launcher.fn, launcher.bin = triton_poi_fused_0, "compiled-binary"

    r["fn-bin-attrs"] = launch(m, ["in_out_ptr0", "xnumel"], {"in_out_ptr0": "*i64"}, [], [((t([1]), 1), {})],
                               setup=fn_and_bin)
    bare, _ = recording(ALL, attrs=False)
    del bare._npu_def_args
    r["no-def-args"] = m._wrap_launcher_with_downcast(bare, I64, []) is bare
    return r


def battery_runs(location: str, after: bool = False, undo: bool = False) -> dict:
    """Loaded with NPU_FIXES=0 (the target untouched): the probe and the battery, then
    npu_fixes armed and applied (state, identity, probe); with ``after``, the battery
    again; with ``undo``, then undo and whether the original is back."""
    m = host_load(location).modules["npu_triton_heuristics"]
    from npu_fixes.fixes import boundary_downcast as fix

    result = {}
    original = m._wrap_launcher_with_downcast
    result["probe_before"] = fix.probe(m).defective
    result["battery"] = battery(m)
    os.environ.pop("NPU_FIXES", None)
    import npu_fixes

    npu_fixes.apply()
    result["state"] = {r.name: r for r in npu_fixes.status()}["boundary-downcast"].state.value
    result["identical"] = m._wrap_launcher_with_downcast is original
    result["probe_after"] = fix.probe(m).defective
    if after:
        result["battery_after"] = battery(m)
    if undo:
        result["undo"] = npu_fixes.undo()
        result["restored"] = m._wrap_launcher_with_downcast is original
    return result


if __name__ == "__main__":
    main(globals())
