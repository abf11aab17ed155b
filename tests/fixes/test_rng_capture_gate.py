"""rng-capture-gate: the rule, the real upstream registration, and stock Inductor on CPU."""

from __future__ import annotations

import fnmatch

import pytest

from tests.conftest import FIXED_UPSTREAM, host_check, last_json, run_python, wheel_path
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE

# CASES registers fallbacks into scratch tables (so the real function runs without
# touching Inductor's table) and lowers in stand-in graphs: each Bernoulli overload in a
# fresh graph, in a graph with an earlier reason, raising, after registration ran twice,
# and absent from the table; and other RNG entries, which stay as registered. A case
# records the lowering's value and the reason as behaviour (unset / kept / set and naming
# the op): the wording is ours or upstream's, so raw reasons go to "reasons", uncompared.
CASES = """
from unittest import mock
from types import SimpleNamespace
import torch
from torch._inductor.virtualized import V
low = mods["lowering"]
register = low._register_npu_inductor_fallbacks
aten = torch.ops.aten
OTHERS = (aten.rand.default, aten.native_dropout.default, aten.bernoulli)

def stand_in(op):
    def lowering(*args, **kwargs):
        if kwargs.get("fail"):
            raise ValueError(f"failed {op}")
        return [str(op), list(args), kwargs]
    return lowering

def registered(ops, runs=1):
    table = {op: stand_in(op) for op in ops}
    originals = dict(table)
    lists = {n: [] for n in ("FALLBACK_LIST", "EXPLICIT_FALLBACK_LIST") if hasattr(low, n)}
    for _ in range(runs):
        with mock.patch.multiple(low, lowerings=table, make_fallback=lambda *a, **k: None, **lists):
            low._register_npu_inductor_fallbacks()
    return table, originals

def lower(table, op, reason, reasons, label, **kwargs):
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

def battery():
    out, reasons = {}, {}
    ops = gate.bernoulli_ops()
    (once, originals), (twice, _) = registered([*ops, *OTHERS]), registered([*ops, *OTHERS], runs=2)
    without, _ = registered(OTHERS)
    for op in ops:
        for label, table, reason, kwargs in [("fresh", once, None, {"p": 0.5}),
                                             ("kept", once, "earlier", {}),
                                             ("raises", once, None, {"fail": True}),
                                             ("registered-twice", twice, None, {})]:
            out[f"{op}|{label}"] = lower(table, op, reason, reasons, f"{op}|{label}", **kwargs)
        out[f"{op}|absent"] = [op in without]
    for op in OTHERS:
        out[f"{op}|other"] = [once[op] is originals[op], *lower(once, op, None, reasons, f"{op}|other")]
    return {"cases": out, "reasons": reasons}
"""

# Armed at once (no NPU_FIXES=0): the hook fires at import; then undone, so the probe
# also runs on the restored original.
BATTERY = CASES + """
import npu_fixes  # arms: the hook fires at once
from npu_fixes.fixes import rng_capture_gate as gate
rec = {r.name: r for r in npu_fixes.status()}["rng-capture-gate"]
result["state"] = rec.state.value
result["identical"] = low._register_npu_inductor_fallbacks is register
result["probe_after"] = gate.probe(low).defective
result["lowered"] = battery()
result["undo"] = npu_fixes.undo()
result["restored"] = low._register_npu_inductor_fallbacks is register
result["probe_before"] = gate.probe(low).defective  # on the restored original
"""


def check_lowered(lowered: dict) -> None:
    """The gate's behaviour: every Bernoulli lowering sets a reason naming its op (even if
    it then raises), keeps an earlier one, returns the lowering's value unchanged; other
    RNG entries stay as registered."""
    cases, reasons = lowered["cases"], lowered["reasons"]
    assert len(cases) == 5 * 5 + 3
    for key, case in cases.items():
        op, label = key.split("|")
        if label == "absent":
            assert case == [False]
        elif label == "other":
            assert case[0] is True and case[2] == "unset"
        else:
            value, behaviour = case
            if label == "raises":
                assert value == f"raised failed {op}"
            else:
                assert value[0] == op  # the lowering's own result
            assert behaviour == ("kept" if label == "kept" else "names the op"), key
            assert reasons[key] == "earlier" if label == "kept" else op in reasons[key]


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
    behaviours = {key.split("|")[1]: case[-1] for key, case in res["lowered"]["cases"].items()}
    assert behaviours == {"fresh": "unset", "kept": "kept", "raises": "unset",
                          "registered-twice": "unset", "absent": False, "other": "unset"}


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


# -- genuine upstream states ----------------------------------------------------------------

#: Genuine states with this fix's defect, each compared with the reference state.
DEFECTIVE = tuple(s for s in PRE_FIX if "rng-capture-gate" in DEFECTS[s])
#: state -> {case pattern: reason} of cases where the repaired state legitimately differs
#: from REFERENCE. None: upstream's lowering.py between these states differs in other
#: lowerings (cat, slice_scatter, index_put, ...), not in how registration treats these.
LEGITIMATE: dict[str, dict[str, str]] = {}

# NPU_FIXES=0: the battery runs on the untouched state first, then npu_fixes applies and
# the same battery runs again, in one interpreter.
GENUINE = CASES + """
import os
import npu_fixes  # NPU_FIXES=0: nothing armed yet
from npu_fixes.fixes import rng_capture_gate as gate
result["probe_before"] = gate.probe(low).defective
result["battery"] = battery()
os.environ.pop("NPU_FIXES", None)
npu_fixes.apply()
result["state"] = {r.name: r for r in npu_fixes.status()}["rng-capture-gate"].state.value
result["identical"] = low._register_npu_inductor_fallbacks is register
result["probe_after"] = gate.probe(low).defective
result["battery_after"] = battery()
"""


@pytest.fixture(scope="module")
def genuine_runs(genuine):
    """Each defective genuine state and the reference, before and after npu_fixes applies."""
    return {s: host_check(genuine(s), GENUINE, env={"NPU_FIXES": "0"}) for s in (*DEFECTIVE, REFERENCE)}


def test_genuine_states_cover_the_defect():
    assert DEFECTIVE == ("8bfbb9ed1", "95c9094da", "f8802037a") and not DEFECTS[REFERENCE]


def test_reference_state_is_left_identical(genuine_runs):
    res = genuine_runs[REFERENCE]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    assert res["battery_after"] == res["battery"]  # raw reasons included
    check_lowered(res["battery"])


@pytest.mark.parametrize("state", DEFECTIVE)
def test_genuine_state_is_repaired_like_reference(genuine_runs, state):
    res, reference = genuine_runs[state], genuine_runs[REFERENCE]["battery"]["cases"]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"]["cases"], res["battery_after"]["cases"]
    assert before.keys() == after.keys() == reference.keys() and len(reference) == 28
    differing = {k for k in reference if after[k] != reference[k]}
    assert differing == listed(LEGITIMATE.get(state, {}), reference)
    check_lowered(res["battery_after"])
    # the battery sees the defect here: before the repair, exactly the Bernoulli lowerings
    # in a graph without a reason differ from the reference (they leave it unset)
    assert {k for k in reference if before[k] != reference[k]} == {
        k for k in reference if k.split("|")[1] in ("fresh", "raises", "registered-twice")}
    assert all(before[k][-1] == "unset" for k in reference if before[k] != reference[k])


def listed(patterns: dict[str, str], cases) -> set[str]:
    """The cases matched by the patterns; each pattern must match at least one case."""
    found = {p: {k for k in cases if fnmatch.fnmatchcase(k, p)} for p in patterns}
    assert all(found.values()), [p for p, ks in found.items() if not ks]
    return set().union(*found.values())
