"""minmax-propagate-nan: the rule, and the kernels each genuine state generates (Triton IR)."""

from __future__ import annotations

import pytest

from npu_fixes.fixes.minmax_propagate_nan import drops_nan, propagating
from tests.conftest import run_at_states, run_program
from tests.genuine_states import COMMITS

NAME = "minmax-propagate-nan"
#: Upstream fixed it only in the published wheels: the reference behaviour.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
PROGRAMS = ("relu", "clamp", "hardtanh", "maximum", "minimum", "amax-looped")
#: The min/max ops of each program's Triton IR where NaN propagates, and where it is dropped.
PROPAGATING = {"relu": ["arith.maximumf"], "clamp": ["arith.maximumf", "arith.minimumf"],
               "hardtanh": ["arith.maximumf", "arith.minimumf"], "maximum": ["arith.maximumf"],
               "minimum": ["arith.minimumf"], "amax-looped": ["arith.maximumf"]}
DROPPING = {label: [op.replace("imumf", "numf") for op in ops] for label, ops in PROPAGATING.items()}


def test_rule_rewrites_only_the_two_operand_calls():
    assert propagating("tl.maximum(tmp0, tmp1)", "maximum", "tmp0", "tmp1") == \
        "tl.maximum(tmp0, tmp1, tl.PropagateNan.ALL)"
    assert propagating("tl.minimum(x, 0)", "minimum", "x", 0) == "tl.minimum(x, 0, tl.PropagateNan.ALL)"
    for text in ("tl.maximum(tmp0, tmp1, tl.PropagateNan.ALL)", "triton_helpers.maximum(tmp0, tmp1)",
                 "tl.maximum(tmp1, tmp0)", "tl.where(tmp0 > tmp1, tmp0, tmp1)"):
        assert propagating(text, "maximum", "tmp0", "tmp1") == text  # not the defective text: unchanged


def test_drops_nan_reads_the_call():
    assert drops_nan("tl.maximum(a, b)", "maximum") and drops_nan("tl.minimum((a), b + 1)", "minimum")
    for text in ("tl.maximum(a, b, tl.PropagateNan.ALL)", "tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)",
                 "tl.minimum(a, b)", "triton_helpers.maximum(a, b)", "tl.maximum(a, b", ""):
        assert not drops_nan(text, "maximum"), text


@pytest.fixture(scope="module")
def runs(genuine):
    """Each genuine state and the 2.13.0 wheel, one interpreter each."""
    return run_at_states(genuine, STATES, "minmax_propagate_nan", "emitted")


def test_the_wheel_emits_nan_propagating_kernels(runs):
    """The reference: every program's min/max lowers to the NaN-propagating IR op."""
    before = runs[WHEEL]["before"]
    assert {label: before[label]["ir_ops"] for label in PROGRAMS} == PROPAGATING
    assert "patched" not in runs[WHEEL]  # fixed upstream: nothing installed


@pytest.mark.parametrize("state", COMMITS)
def test_repaired_state_emits_what_the_wheel_emits(runs, state):
    """Before: the two-operand calls, lowered to arith.maxnumf/minnumf (NaN dropped), the
    looped amax's accumulation included. After: the same calls with PropagateNan.ALL and
    the wheel's IR ops, program by program; undo brings the defect back."""
    res, reference = runs[state], runs[WHEEL]["before"]
    before, after = res["before"], res["after"]
    assert {label: before[label]["ir_ops"] for label in PROGRAMS} == DROPPING
    assert all(drops_nan(call, call[3:10]) for label in PROGRAMS for call in before[label]["calls"])
    assert {label: after[label]["ir_ops"] for label in PROGRAMS} == \
        {label: reference[label]["ir_ops"] for label in PROGRAMS}
    for label in PROGRAMS:
        assert after[label]["calls"] == [c[:-1] + ", tl.PropagateNan.ALL)" for c in before[label]["calls"]]
    assert res["patched"] == 2 and res["probe_after"][0] is False
    assert res["undo"] == 2 and res["probe_undone"] is True


@pytest.mark.parametrize("with_fixes", [False, True])
def test_a_models_kernels_drop_nan_as_built_and_keep_it_with_npu_fixes(genuine, with_fixes):
    """At model level: BatchNormTagger's training step through bafc50684's backend (its ReLU
    and a looped max), as ``npu-fixes accuracy --interpret`` runs it. Triton's interpreter
    propagates NaN either way, so the observable is the kernels' code: as built their two
    ``tl.maximum`` calls drop NaN (``arith.maxnumf`` in the IR of the one whose host IR build
    runs), with npu_fixes both keep it (``arith.maximumf``)."""
    res = run_program("minmax_propagate_nan", "model_ir_ops", location=str(genuine("bafc50684")),
                      with_fixes=with_fixes)
    # the loader keeps embedding (and its backward) a fallback; loops fused after reordering, as for the NPU
    assert (res["kernels"], res["built"]) == (9, 7), res
    assert len(res["minmax_calls"]) == 2, res
    assert all(("tl.PropagateNan.ALL" in call) is with_fixes for call in res["minmax_calls"]), res
    assert res["ir_ops"] == ({"arith.maximumf": 1} if with_fixes else {"arith.maxnumf": 1}), res
