"""rng-capture-gate: the rule, the real upstream registration, and stock Inductor on CPU."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, host_check, last_json, run_python, wheel_path

# Registers fallbacks into a scratch table (so the real function runs without touching
# Inductor's table), lowers every Bernoulli overload in a stand-in graph, and reports
# the reason each one left, plus whether an existing reason is kept.
BATTERY = """
from unittest import mock
from types import SimpleNamespace
from torch._inductor.virtualized import V
low = mods["lowering"]
register = low._register_npu_inductor_fallbacks
import npu_fixes  # arms: the hook fires at once
from npu_fixes.fixes import rng_capture_gate as gate
def lower_all():
    ops = gate.bernoulli_ops()
    table = {op: (lambda *a, _op=op, **k: f"lowered {_op}") for op in ops}
    with mock.patch.multiple(low, lowerings=table, make_fallback=lambda *a, **k: None,
                             FALLBACK_LIST=[], EXPLICIT_FALLBACK_LIST=[]):
        low._register_npu_inductor_fallbacks()
    out = {}
    for op in ops:
        fresh, kept = SimpleNamespace(disable_cudagraphs_reason=None), SimpleNamespace(disable_cudagraphs_reason="earlier")
        with V.set_graph_handler(fresh):
            value = table[op]()
        with V.set_graph_handler(kept):
            table[op]()
        out[str(op)] = [value, fresh.disable_cudagraphs_reason, kept.disable_cudagraphs_reason]
    return out
rec = {r.name: r for r in npu_fixes.status()}["rng-capture-gate"]
result["state"] = rec.state.value
result["identical"] = low._register_npu_inductor_fallbacks is register
result["probe_after"] = gate.probe(low).defective
result["lowered"] = lower_all()
result["undo"] = npu_fixes.undo()
result["restored"] = low._register_npu_inductor_fallbacks is register
result["probe_before"] = gate.probe(low).defective  # on the restored original
"""


def check_lowered(lowered: dict) -> None:
    assert len(lowered) == 5
    for op, (value, fresh, kept) in lowered.items():
        assert value == f"lowered {op}"  # the lowering's result is unchanged
        assert fresh is not None and op in fresh  # the reason names the op
        assert kept == "earlier"  # an existing reason is never overwritten


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(version):
    res = host_check(wheel_path(version), BATTERY)
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["undo"] == 0
    check_lowered(res["lowered"])


def test_prefix_copy_is_detected_and_repaired(prefix_copy):
    res = host_check(prefix_copy("rng-capture-gate"), BATTERY)
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    check_lowered(res["lowered"])
    assert res["restored"] and res["undo"] >= 1


def test_prefix_lowering_without_gate_leaves_reason_unset(prefix_copy):
    body = BATTERY.replace("import npu_fixes  #", "import npu_fixes; npu_fixes.undo()  #")
    res = host_check(prefix_copy("rng-capture-gate"), body)
    assert all(fresh is None for _, fresh, _ in res["lowered"].values())


def test_gate_survives_backend_reload_and_import_after_activation(prefix_copy):
    # Activation happened before npu_fixes was imported (FALLBACK_LIST filled, Bernoulli
    # lowerings registered in the real table); then a reload re-registers into a new table.
    body = """
from unittest import mock
import torch
from torch._inductor import lowering as L
low = mods["lowering"]
op = torch.ops.aten.bernoulli_.float
stock = L.lowerings[op]
low.FALLBACK_LIST.append(op)  # as registration leaves it
import npu_fixes
result["gated_now"] = getattr(L.lowerings[op], "_npu_fixes_rng_gate", False)
reloaded = {op: stock}
with mock.patch.multiple(low, lowerings=reloaded, make_fallback=lambda *a, **k: None,
                         FALLBACK_LIST=[], EXPLICIT_FALLBACK_LIST=[]):
    low._register_npu_inductor_fallbacks()
result["gated_after_reload"] = getattr(reloaded[op], "_npu_fixes_rng_gate", False)
npu_fixes.undo()
result["stock_restored"] = L.lowerings[op] is stock
"""
    res = host_check(prefix_copy("rng-capture-gate"), body)
    assert res == {"gated_now": True, "gated_after_reload": True, "stock_restored": True}


def test_gate_rule_is_idempotent():
    from npu_fixes.fixes import rng_capture_gate as gate

    table = {op: (lambda: "x") for op in gate.bernoulli_ops()}
    assert len(gate.gate_table(table)) == 5
    once = dict(table)
    assert gate.gate_table(table) == []
    assert table == once


def test_stock_inductor_cpu_compile_records_reason(tmp_path):
    """DeBERTa-style XDropout (a ``bernoulli_`` mask) compiled by stock Inductor on CPU with
    the gate applied to the stock lowering table: the compiled graph records the reason."""
    code = """
import json, torch
from torch._inductor import config, lowering as L
from torch._inductor.graph import GraphLowering
from npu_fixes.fixes import rng_capture_gate as gate
config.fallback_random = True
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
torch.manual_seed(0); eager = model(x)
torch.manual_seed(0); compiled = torch.compile(model)(x)
print(json.dumps({"gated": gated, "reasons": reasons, "same": bool(torch.equal(eager, compiled))}))
"""
    # A fresh compile every time: a cache hit would skip the lowering being observed.
    res = last_json(run_python(code, env={"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
                                          "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}))
    assert "aten.bernoulli_.float" in res["gated"]
    assert any(r and "bernoulli" in r for r in res["reasons"]), res
    assert res["same"], "fallback_random keeps the eager RNG sequence"
