"""Programs of tests/fixes/test_rsplit_outer.py (and test_rsplit_nonsum.py, which shares
the stand-in kernels)."""

from __future__ import annotations

import itertools

from tests.programs import host_load, main

OUTPUTS = ("one", "two", "none", "one+removed", "one+removed-name", "inplace", "one+inplace",
           "one+inplace-removed")
TREES = {  # reduction range-tree nodes (name, length) and the aliased names
    "flat": ([("r0_1", 2048)], {}),
    "nested": ([("r0_1", 2048), ("r0_2", 512), ("r0_3", 4)], {}),
    "nested-aliased": ([("r0_1", 2048), ("r0_2", 512), ("r0_3", 4)], {"r0_2": 0, "r0_3": 0}),
    "split": ([("r0_2", 512), ("r0_3", 4)], {}),
}
SIZES = {"bert": (768, 2048), "small-r": (768, 1024), "big-x": (20000, 1 << 20),
         "x>r": (4096, 2048), "scalar": (1, 4096)}
CASES = list(itertools.product(["OUTER", "INNER", "DEFAULT"],
                               ["sum", "max", "min", "prod", "argmax", "welford_reduce"],
                               OUTPUTS, TREES, SIZES))


def buffers(outputs: str) -> tuple[dict, dict]:
    """The kernel's output and in-place buffers for an ``OUTPUTS`` case."""
    from torch._inductor.codegen.common import REMOVED, InplacedBuffer

    inplace = InplacedBuffer("in_out_ptr0", ["buf2", "buf3"])
    return {
        "one": ({"buf1": "out_ptr0"}, {}),
        "two": ({"buf0": "out_ptr0", "buf1": "out_ptr1"}, {}),
        "none": ({}, {}),
        "one+removed": ({"buf0": REMOVED, "buf1": "out_ptr1"}, {}),
        "one+removed-name": ({"buf0": "REMOVED_out", "buf1": "out_ptr1"}, {}),
        "inplace": ({}, {"buf2": inplace, "buf3": inplace}),
        "one+inplace": ({"buf1": "out_ptr0"}, {"buf2": inplace, "buf3": inplace}),
        "one+inplace-removed": ({"buf1": "out_ptr0"}, {"buf2": REMOVED, "buf3": REMOVED}),
    }[outputs]


def kernel(mod, hint, rtype, outputs, tree, size):
    """A stand-in kernel with what the rsplit predicate reads."""
    from types import SimpleNamespace as NS

    import sympy

    red = NS(node=NS(data=NS(reduction_type=rtype)))
    xlen, rlen = SIZES[size]
    nodes, mapping = TREES[tree]
    out, inp = buffers(outputs)
    feats = NS(get_reduction_hint=lambda: getattr(mod.ReductionHint, hint), scheduler_nodes=lambda: [red],
               reduction_nodes=lambda: [red], reduction_numel=sympy.Integer(rlen))
    x = NS(is_reduction=False, is_loop=False, tree_node_mapping={},
           nodes={"x0": NS(name="x0", length=sympy.Integer(xlen))})
    r = NS(is_reduction=True, is_loop=False, tree_node_mapping=mapping,
           nodes={n: NS(name=n, length=sympy.Integer(length)) for n, length in nodes})
    return NS(inside_reduction=True, features=feats, range_trees=[x, r],
              args=NS(output_buffers=out, inplace_buffers=inp))


def split_decisions(mod) -> dict[str, bool]:
    """The live predicate's decision on every case (gate on, 40 cores)."""
    from types import SimpleNamespace as NS
    from unittest import mock

    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    cores = NS(get_npu_vector_core_count=lambda: 40)
    graph = NS(sizevars=SizeVarAllocator())
    with mock.patch.multiple(mod, npu_rsplit_outer=True, device_props=cores), V.set_graph_handler(graph):
        return {"|".join(c): bool(mod._npu_rsplit_outer_applicable(kernel(mod, *c))) for c in CASES}


def decisions(location: str) -> dict:
    """The decisions before and after ``npu_fixes.apply()``, with the probe and state, and
    whether ``undo()`` puts the original predicate back."""
    import os

    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import rsplit_outer as fix

    result = {}
    original = mod._npu_rsplit_outer_applicable
    result["probe_before"] = fix.probe(mod).defective
    result["before"] = split_decisions(mod)
    import npu_fixes

    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}["rsplit-outer"]
    result["identical"] = mod._npu_rsplit_outer_applicable is original
    result["probe_after"] = fix.probe(mod).defective
    result["after"] = split_decisions(mod)
    result["undo"] = npu_fixes.undo()
    result["restored"] = mod._npu_rsplit_outer_applicable is original
    return result


def with_nonsum(location: str) -> dict:
    """rsplit-outer and rsplit-nonsum installed the way the registry decides (only where
    each probe says needed), each with a fresh Patcher, in both orders and rsplit-nonsum
    alone, each combination undone before the next; then both through one Patcher."""
    import contextlib
    import inspect

    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import rsplit_nonsum as nonsum
    from npu_fixes.fixes import rsplit_outer as outer
    from npu_fixes.shim.patcher import Patcher

    result = {}
    fixes = {"outer": outer, "nonsum": nonsum}
    original = inspect.getattr_static(mod, "_npu_rsplit_outer_applicable")
    first = nonsum.probe(mod)
    result["probe_before"] = [first.defective, first.detail]
    result["before"] = split_decisions(mod)
    runs = {}
    for label in ("outer+nonsum", "nonsum+outer", "nonsum"):
        run, patchers = {"patched": {}}, []
        for name in label.split("+"):
            patcher = Patcher()
            if fixes[name].probe(mod).defective:
                fixes[name].FIX.install(mod, patcher)
            run["patched"][name] = len(patcher)
            patchers.append(patcher)
        after = nonsum.probe(mod)
        run["probe_after"] = [after.defective, after.detail]
        run["battery"] = split_decisions(mod)
        for patcher in reversed(patchers):
            patcher.restore()
        run["restored"] = inspect.getattr_static(mod, "_npu_rsplit_outer_applicable") is original
        runs[label] = run
    result["runs"] = runs
    if first.defective:  # both fixes through one Patcher, as one registry holds them
        shared = Patcher()
        scoped = hasattr(shared, "scope")  # one scope per fix, where the Patcher has them
        for name in ("outer", "nonsum"):
            with shared.scope(fixes[name].FIX.name) if scoped else contextlib.nullcontext():
                fixes[name].FIX.install(mod, shared)
        result["shared"] = {"scoped": scoped, "patches": len(shared),
                            "probes_after": [outer.probe(mod).defective, nonsum.probe(mod).defective]}
        shared.restore()
    result["probe_end"] = nonsum.probe(mod).defective
    return result


if __name__ == "__main__":
    main(globals())
