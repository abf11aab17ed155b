"""Failure classes of the sweep (npu_fixes/tools/triage.py)."""

from __future__ import annotations

import pytest

from npu_fixes.tools import triage


def test_a_class_needs_its_outcome_its_error_and_its_kernel(monkeypatch):
    record = {"outcome": "out-of-bounds", "detail": "OutOfBounds: k: a load outside every buffer",
              "kernel_sources": ["_es_slane0 = tl.arange(0, 2*real_block_x0)"]}
    lanes = triage.FailureClass("lanes", "defect", "out-of-bounds", "OutOfBounds", "_es_s?lane", "verdict")
    monkeypatch.setattr(triage, "CLASSES", (lanes,))
    assert triage.classify(record) is lanes
    assert triage.classify(record | {"kernel_sources": ["tmp0 = tl.load(in_ptr0 + x0)"]}) is None
    assert triage.classify(record | {"outcome": "wrong"}) is None


def test_a_class_needs_a_known_kind_a_failing_outcome_and_a_verdict():
    with pytest.raises(ValueError, match="kind must be one of defect, pytorch, harness, guarded"):
        triage.FailureClass("x", "guess", "wrong", "", "", "verdict")
    with pytest.raises(ValueError, match="outcome one of"):
        triage.FailureClass("x", "defect", "pass", "", "", "verdict")
    with pytest.raises(ValueError, match="the verdict said"):
        triage.FailureClass("x", "defect", "wrong", "", "", "")


def test_npu_fixes_own_errors_are_guarded():
    """A sample stopped by an error npu_fixes raises (a guard's, or a repair's refusal) is
    ``guarded``, at compile or at launch; another error is not."""
    from npu_fixes.fixes import int32_address_wrap, int64_past_int32, nd_reduction

    assert {int64_past_int32.Int64PastInt32.__name__, int32_address_wrap.Int32AddressWrap.__name__,
            nd_reduction.NdReductionUnsupported.__name__} <= set(triage.own_errors())
    launch = triage.classify({"outcome": "run-time-error", "detail": "Int64PastInt32: k: int64 argument 'in_ptr0'"})
    compile_ = triage.classify({"outcome": "compile-error", "detail": "Int32AddressWrap: kernel past 2^31"})
    assert (launch.name, launch.kind) == ("npu-fixes-guard-launch", "guarded")
    assert (compile_.name, compile_.kind) == ("npu-fixes-guard-compile", "guarded")
    assert triage.classify({"outcome": "run-time-error", "detail": "RuntimeError: Int64PastInt32: quoted"}) is None
    assert triage.classify({"outcome": "wrong", "detail": "Int64PastInt32: k"}) is None
