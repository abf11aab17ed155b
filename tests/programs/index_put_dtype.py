"""Programs of tests/fixes/test_index_put_dtype.py."""

from __future__ import annotations

from tests.programs import host_load, main
from tests.programs.control_deps_lowering import registered_then_repaired, scoped_registration

PAIRS = [("float16", "float32"), ("bfloat16", "float32"), ("float32", "float16"),
         ("float32", "float64"), ("float16", "float16"), ("int32", "int64")]


def overloads() -> list:
    import torch

    aten = torch.ops.aten
    return [aten.index_put.default, aten.index_put_.default, aten.index_put.hacked_twin,
            aten.index_put_.hacked_twin]


def registered_scratch(low) -> dict:
    """The live registration (scoped) on a scratch table holding the current lowering of
    each index_put overload; its make_fallback stand-in puts Inductor's real generic
    fallback there, as the real one does in Inductor's table."""
    from torch._inductor import lowering as L

    table = {op: L.lowerings[op] for op in overloads()}

    def make_fallback(op, *a, **k):
        if op in table:
            L.register_lowering(op, type_promotion_kind=None, lowering_dict=table)(L.fallback_handler(op))

    scoped_registration(low, {"lowerings": table, "make_fallback": make_fallback, "FALLBACK_LIST": []})()
    return table


def lower(lowering, op, self_dtype, values_dtype, accumulate) -> dict:
    """``op`` lowered with ``lowering`` (the fix's own harness, a fresh CPU GraphLowering):
    the dtypes of the extern kernel's tensor inputs, the result's dtype, and which kernel
    it was."""
    from torch._inductor import ir

    from npu_fixes.fixes.index_put_dtype import lowered

    out, kernels = lowered(lowering, op, self_dtype, values_dtype, accumulate)
    return {"inputs": [sorted(str(i.get_dtype()) for i in k.inputs if isinstance(i, ir.IRNode)) for k in kernels],
            "out": str(out.get_dtype()),
            "kernel": [[type(k).__name__, str(k.op_overload)] for k in kernels]}


def battery(low) -> dict:
    """Each entry of ``registered_scratch`` lowered over dtype pairs x accumulate."""
    import torch

    table = registered_scratch(low)
    return {f"{op}|{a}<-{b}|acc={acc}": lower(table[op], op, getattr(torch, a), getattr(torch, b), acc)
            for op in overloads() for a, b in PAIRS for acc in (False, True)}


def compile_all() -> dict:
    """Stock CPU Inductor compiles index_put with values made in the graph: functional, in
    place, and in place with values of x's dtype; the values returned and x afterwards, or
    the error raised."""
    import torch

    def functional(x, idx):
        return (torch.index_put(x, (idx,), torch.ones(3)),
                torch.index_put(x, (idx,), torch.full((3,), 2.0, dtype=torch.float64), accumulate=True),
                torch.index_put(x, (idx,), torch.ones(3, dtype=x.dtype)))

    def in_place(x, idx):
        x.index_put_((idx,), torch.ones(3))
        return x + 1

    def in_place_same(x, idx):  # values of x's dtype: the add may reuse index_put_'s output
        x.index_put_((idx,), torch.ones(3, dtype=x.dtype))
        return x + 1

    torch._dynamo.reset()
    out = {}
    for fn in (functional, in_place, in_place_same):
        x, idx = torch.arange(5, dtype=torch.float16), torch.tensor([0, 2, 2])
        try:
            got = torch.compile(fn)(x, idx)
        except Exception as exc:
            out[fn.__name__] = {"error": [type(exc).__name__, str(exc).splitlines()[0]]}
            continue
        got = got if isinstance(got, tuple) else (got,)
        out[fn.__name__] = {"values": [[str(t.dtype), t.tolist()] for t in got], "input": x.tolist()}
    return out


def end_to_end(location: str) -> dict:
    """With NPU_FIXES=0 nothing is armed: ``registered_then_repaired`` with the lowering
    ``battery`` and ``compile_all``; the registration records which index_put overloads
    became fallbacks."""
    low = host_load(location).modules["lowering"]
    from torch._inductor import lowering as L

    from npu_fixes.fixes import index_put_dtype as fix

    def repaired_standing():
        return [getattr(L.lowerings.get(op), "_npu_fixes_index_put_cast", False) for op in fix.index_put_ops()]

    return registered_then_repaired(
        low, fix, lambda: battery(low), compile_all,
        lambda: {"made_fallback": sorted(str(op) for op in fix.index_put_ops() if op in low.FALLBACK_LIST)},
        repaired_standing, ("repaired", "repaired_after_reregister"))


if __name__ == "__main__":
    main(globals())
