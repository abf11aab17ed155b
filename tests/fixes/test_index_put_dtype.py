"""index-put-dtype: the rule, real CPU lowerings, and each genuine state end to end."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.fixes import index_put_dtype as fix
from npu_fixes.shim.patcher import Patcher
from tests.conftest import run_at_states
from tests.genuine_states import BEYOND, COMMITS

NAME = "index-put-dtype"
#: Where upstream fixed it first: the behaviour a repaired state must show.
REFERENCE = "f8802037a"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)

# -- the rule and the casting lowering ---------------------------------------------------------


def test_rule_casts_exactly_when_the_dtypes_differ():
    dtypes = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64)
    for a in dtypes:
        for b in dtypes:
            assert fix.needs_cast(a, b) is (a != b)


def test_index_put_ops_are_the_overloads_with_an_in_place_twin():
    names = sorted(str(op) for op in fix.index_put_ops())
    assert names == ["aten.index_put.default", "aten.index_put.hacked_twin",
                     "aten.index_put_.default", "aten.index_put_.hacked_twin"]


def lower_in_graph(lowering, op, values_dtype):
    """Lower ``op`` (float16 self [5], int64 index [3], values [3]) with ``lowering`` in a
    fresh CPU GraphLowering; return its kernels' (name, dtype) inputs, their mutated
    buffer names, the result's name and the kernel's op."""
    from torch._inductor import ir
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses import FakeTensorMode

    specs = {"x": (torch.float16, 5), "i": (torch.int64, 3), "v": (values_dtype, 3)}
    fx = torch.fx.Graph()
    nodes = {}
    for name, (dtype, size) in specs.items():
        nodes[name] = fx.placeholder(name)
        nodes[name].meta["val"] = torch.empty(size, dtype=dtype, device="meta")
    call = fx.call_function(op, (nodes["x"], [nodes["i"]], nodes["v"]))
    fx.output(call)
    graph = GraphLowering(torch.fx.GraphModule({}, fx))
    buffers = {name: ir.TensorBox.create(ir.InputBuffer(
        name=name, layout=ir.FixedLayout(torch.device("cpu"), dtype, [size], [1])))
        for name, (dtype, size) in specs.items()}
    with V.set_graph_handler(graph), V.set_fake_mode(FakeTensorMode()), graph.set_current_node(call):
        out = lowering(buffers["x"], [buffers["i"]], buffers["v"])
        kernels = [o for o in graph.operations if isinstance(o, ir.ExternKernel)]
        return ([[(i.get_name(), str(i.get_dtype())) for i in k.inputs] for k in kernels],
                [list(k.get_mutation_names()) for k in kernels], out.get_name(),
                [str(k.op_overload) for k in kernels])


def test_repaired_lowering_casts_then_runs_the_index_put_fallback():
    """Float32 values reach Inductor's IndexPutFallback as a float16 buffer; float16 values
    pass as the very input; index_put_ mutates self, index_put a copy of it."""
    aten = torch.ops.aten
    inputs, mutated, out, kernels = lower_in_graph(
        fix.index_put_lowering(True), aten.index_put_.default, torch.float32)
    [[(x, x_dtype), (v, v_dtype), (i, _)]] = inputs
    assert (x, x_dtype, i, v_dtype) == ("x", "torch.float16", "i", "torch.float16") and v != "v"
    assert mutated == [["x"]] and out == "x" and kernels == ["aten.index_put_.default"]
    inputs, mutated, out, kernels = lower_in_graph(
        fix.index_put_lowering(False), aten.index_put.hacked_twin, torch.float16)
    [[(x, _), (v, _), (i, _)]] = inputs
    assert x != "x" and v == "v" and mutated == [[x]] and out == x
    assert kernels == ["aten.index_put_.hacked_twin"]


def test_repair_entries_is_idempotent_and_undone_by_the_patcher():
    aten = torch.ops.aten

    def generic(*args):
        return "fallback"

    put, put_ = aten.index_put.default, aten.index_put_.default
    table = {put: generic, put_: generic, "other": generic}
    patcher = Patcher()
    assert fix.repair_entries(table, [put, put_, aten.index_put.hacked_twin], patcher) == [put, put_]
    assert table[put].__name__ == "npu_fixes_index_put" and table[put_].__name__ == "npu_fixes_index_put_"
    assert table["other"] is generic
    once = dict(table)
    assert fix.repair_entries(table, [put, put_], patcher) == [] and table == once
    assert patcher.restore() == 2 and table == {put: generic, put_: generic, "other": generic}


# -- genuine upstream states, end to end -------------------------------------------------------

@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel; one interpreter each (compiled C++ is
    shared through the session's Inductor cache)."""
    return run_at_states(genuine, STATES, "index_put_dtype", "end_to_end")


#: Raised by the compiled graph when it runs (not while compiling), as CANN's error is.
MISMATCH = ["RuntimeError", "Index put requires the source and destination dtypes match, "
            "got Half for the destination and Float for the source."]
#: What the compiled graphs must give: eager index_put with the values cast by hand
#: (eager itself refuses the uncast values); "input" is x after the call.
EXPECTED = {
    "functional": {"values": [["torch.float16", [1.0, 1.0, 1.0, 3.0, 4.0]],
                              ["torch.float16", [2.0, 1.0, 6.0, 3.0, 4.0]],
                              ["torch.float16", [1.0, 1.0, 1.0, 3.0, 4.0]]],
                   "input": [0.0, 1.0, 2.0, 3.0, 4.0]},
    "in_place": {"values": [["torch.float16", [2.0, 2.0, 2.0, 4.0, 5.0]]],
                 "input": [1.0, 1.0, 1.0, 3.0, 4.0]},
}
EXPECTED["in_place_same"] = EXPECTED["in_place"]
#: The generic fallback of index_put_ returns an alias of x that Inductor takes for a
#: fresh buffer: the add reuses it in place and x ends up holding x + 1.
ALIASED = {"values": [["torch.float16", [2.0, 2.0, 2.0, 4.0, 5.0]]], "input": [2.0, 2.0, 2.0, 4.0, 5.0]}


def test_expected_values_are_eager_with_cast_values():
    x, idx = torch.arange(5, dtype=torch.float16), torch.tensor([0, 2, 2])
    half = torch.float16
    functional = [torch.index_put(x, (idx,), torch.ones(3).to(half)),
                  torch.index_put(x, (idx,), torch.full((3,), 2.0).to(half), accumulate=True),
                  torch.index_put(x, (idx,), torch.ones(3, dtype=half))]
    assert [t.tolist() for t in functional] == [v for _, v in EXPECTED["functional"]["values"]]
    x.index_put_((idx,), torch.ones(3).to(half))
    assert [(x + 1).tolist()] == [v for _, v in EXPECTED["in_place"]["values"]]
    assert x.tolist() == EXPECTED["in_place"]["input"]


@pytest.mark.parametrize("state", STATES)
def test_registration_into_the_real_table_and_compile(runs, state):
    """Before any repair: where the defect is, the index_put overloads became generic
    fallbacks; the compiled graphs with float32 values stop at the mismatch (CPU's
    counterpart of CANN's EZ1001) and the in-place one with float16 values overwrites its
    input. Elsewhere they give the cast result."""
    res = runs[state]
    if state in BEYOND[NAME]:
        assert res["made_fallback"] == sorted(str(op) for op in fix.index_put_ops())
        assert res["e2e"] == {"functional": {"error": MISMATCH}, "in_place": {"error": MISMATCH},
                              "in_place_same": ALIASED}
    else:
        assert res["made_fallback"] == []
        assert res["e2e"] == EXPECTED
        assert "patched" not in res  # nothing installed, nothing patched


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_behaves_like_the_reference(runs, state):
    res, reference = runs[state], runs[REFERENCE]
    # installed on an already-registered backend: the wrapper and the four entries
    assert res["patched"] == 1 + 4 and res["repaired"] == [True] * 4
    assert res["probe_after"][0] is False
    assert res["e2e_after"] == reference["e2e"] == EXPECTED
    assert res["repaired_after_reregister"] == [True] * 4
    assert res["undo"] == 1 + 4 and res["undone"] == [True, [False] * 4]
    before, after, ref = res["battery"], res["battery_after"], reference["battery"]
    assert before.keys() == after.keys() == ref.keys() and len(ref) == 4 * 6 * 2
    assert {k for k in ref if after[k] != ref[k]} == set()  # no legitimate difference
    assert all(case["kernel"][0][0] == "IndexPutFallback" for case in ref.values())
    # before the repair: every case runs the generic fallback; exactly the mismatched
    # pairs differ in what reaches it
    assert all(case["kernel"][0][0] == "FallbackKernel" for case in before.values())
    mismatched = {k for k in ref if len(set(k.split("|")[1].split("<-"))) == 2}
    assert len(mismatched) == 4 * 5 * 2
    assert {k for k in ref if before[k]["inputs"] != ref[k]["inputs"]} == mismatched
    assert all(before[k]["out"] == ref[k]["out"] for k in ref)
