"""Programs of tests/fixes/test_rng_capture_gate.py."""

from __future__ import annotations

import os

from tests.programs import host_load, main


def others():
    """RNG entries other than Bernoulli's, which stay as registered."""
    import torch

    aten = torch.ops.aten
    return (aten.rand.default, aten.native_dropout.default, aten.bernoulli)


def stand_in(op):
    """A lowering for ``op`` that returns its call, or raises when asked to."""
    def lowering(*args, **kwargs):
        if kwargs.get("fail"):
            raise ValueError(f"failed {op}")
        return [str(op), list(args), kwargs]
    return lowering


def registered(low, ops, runs=1):
    """A scratch table of stand-in lowerings for ``ops``, after the real registration of
    ``low`` (the host-loaded lowering module) ran ``runs`` times into it; and a copy of it
    from before."""
    from unittest import mock

    table = {op: stand_in(op) for op in ops}
    originals = dict(table)
    lists = {n: [] for n in ("FALLBACK_LIST", "EXPLICIT_FALLBACK_LIST") if hasattr(low, n)}
    for _ in range(runs):
        with mock.patch.multiple(low, lowerings=table, make_fallback=lambda *a, **k: None, **lists):
            low._register_npu_inductor_fallbacks()
    return table, originals


def lower(table, op, reason, reasons, label, **kwargs):
    """Lower ``op`` in a stand-in graph whose reason starts as ``reason``: the lowering's
    value and the reason as behaviour (the raw reason goes to ``reasons``)."""
    from types import SimpleNamespace

    from torch._inductor.virtualized import V

    graph = SimpleNamespace(disable_cudagraphs_reason=reason)
    with V.set_graph_handler(graph):
        try:
            value = table[op](1, **kwargs)
        except ValueError as exc:
            value = f"raised {exc}"
    got = graph.disable_cudagraphs_reason
    reasons[label] = got
    behaviour = ("unset" if got is None else "kept" if got == reason
                 else "names the op" if str(op) in got else "set")
    return [value, behaviour]


def battery(low, gate):
    """Fallbacks registered into scratch tables (so the real function runs without
    touching Inductor's table), lowered in stand-in graphs: each Bernoulli overload in a
    fresh graph, in a graph with an earlier reason, raising, after registration ran twice,
    and absent from the table; and the other RNG entries. A case records the lowering's
    value and the reason as behaviour (unset / kept / set and naming the op): the wording
    is ours or upstream's, so raw reasons go to "reasons", uncompared."""
    out, reasons = {}, {}
    ops, rest = gate.bernoulli_ops(), others()
    (once, originals), (twice, _) = registered(low, [*ops, *rest]), registered(low, [*ops, *rest], runs=2)
    without, _ = registered(low, rest)
    for op in ops:
        for label, table, reason, kwargs in [("fresh", once, None, {"p": 0.5}),
                                             ("kept", once, "earlier", {}),
                                             ("raises", once, None, {"fail": True}),
                                             ("registered-twice", twice, None, {})]:
            out[f"{op}|{label}"] = lower(table, op, reason, reasons, f"{op}|{label}", **kwargs)
        out[f"{op}|absent"] = [op in without]
    for op in rest:
        out[f"{op}|other"] = [once[op] is originals[op], *lower(once, op, None, reasons, f"{op}|other")]
    return {"cases": out, "reasons": reasons}


def armed(location: str, undone: bool = False) -> dict:
    """Armed at once (no NPU_FIXES=0): the hook fires at import; the battery; then undone,
    so the probe also runs on the restored original. With ``undone``, npu_fixes is undone
    right after its import: the battery sees the lowering without the gate."""
    low = host_load(location).modules["lowering"]
    register = low._register_npu_inductor_fallbacks
    import npu_fixes  # arms: the hook fires at once

    if undone:
        npu_fixes.undo()
    from npu_fixes.fixes import rng_capture_gate as gate

    result = {}
    rec = {r.name: r for r in npu_fixes.status()}["rng-capture-gate"]
    result["state"] = rec.state.value
    result["identical"] = low._register_npu_inductor_fallbacks is register
    result["probe_after"] = gate.probe(low).defective
    result["lowered"] = battery(low, gate)
    result["undo"] = npu_fixes.undo()
    result["restored"] = low._register_npu_inductor_fallbacks is register
    result["probe_before"] = gate.probe(low).defective  # on the restored original
    return result


def reloaded(location: str) -> dict:
    """Activation happened before npu_fixes was imported (FALLBACK_LIST filled, Bernoulli
    lowerings registered in the real table); then a reload re-registers into a new table:
    gated at import, gated after the reload, the stock lowering back after undo."""
    low = host_load(location).modules["lowering"]
    from unittest import mock

    import torch
    from torch._inductor import lowering as L

    op = torch.ops.aten.bernoulli_.float
    stock = L.lowerings[op]
    low.FALLBACK_LIST.append(op)  # as registration leaves it
    import npu_fixes

    result = {"gated_now": getattr(L.lowerings[op], "_npu_fixes_rng_gate", False)}
    table = {op: stock}
    with mock.patch.multiple(low, lowerings=table, make_fallback=lambda *a, **k: None,
                             FALLBACK_LIST=[], EXPLICIT_FALLBACK_LIST=[]):
        low._register_npu_inductor_fallbacks()
    result["gated_after_reload"] = getattr(table[op], "_npu_fixes_rng_gate", False)
    npu_fixes.undo()
    result["stock_restored"] = L.lowerings[op] is stock
    return result


def stock_compile() -> dict:
    """DeBERTa-style XDropout (a ``bernoulli_`` mask) compiled by stock Inductor on CPU
    (fallback_random) with the gate applied to the stock lowering table: the ops gated, the
    reasons the compiled graphs record, and whether the result equals eager's."""
    import torch
    from torch._inductor import config
    from torch._inductor import lowering as L
    from torch._inductor.graph import GraphLowering

    from npu_fixes.fixes import rng_capture_gate as gate

    config.fallback_random = True
    config.force_disable_caches = True  # a cache hit would skip the lowering observed
    reasons = []
    original = GraphLowering.compile_to_module

    def spy(self, *a, **k):
        reasons.append(self.disable_cudagraphs_reason)
        return original(self, *a, **k)

    GraphLowering.compile_to_module = spy
    gated = [str(op) for op in gate.gate_table(L.lowerings)]

    class XDropout(torch.nn.Module):
        def forward(self, x):
            mask = torch.empty_like(x).bernoulli_(0.9)
            return x * mask / 0.9

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), XDropout())
    x = torch.randn(4, 16)
    torch.manual_seed(0)
    eager = model(x)
    torch.manual_seed(0)
    compiled = torch.compile(model)(x)
    return {"gated": gated, "reasons": reasons, "same": bool(torch.equal(eager, compiled))}


def genuine(location: str) -> dict:
    """NPU_FIXES=0: the battery on the untouched state first, then npu_fixes applies and
    the same battery runs again, in one interpreter."""
    low = host_load(location).modules["lowering"]
    register = low._register_npu_inductor_fallbacks
    import npu_fixes  # NPU_FIXES=0: nothing armed yet
    from npu_fixes.fixes import rng_capture_gate as gate

    result = {"probe_before": gate.probe(low).defective, "battery": battery(low, gate)}
    os.environ.pop("NPU_FIXES", None)
    npu_fixes.apply()
    result["state"] = {r.name: r for r in npu_fixes.status()}["rng-capture-gate"].state.value
    result["identical"] = low._register_npu_inductor_fallbacks is register
    result["probe_after"] = gate.probe(low).defective
    result["battery_after"] = battery(low, gate)
    return result


if __name__ == "__main__":
    main(globals())
