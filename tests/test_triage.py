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
    with pytest.raises(ValueError, match="kind must be one of defect, pytorch, harness"):
        triage.FailureClass("x", "guess", "wrong", "", "", "verdict")
    with pytest.raises(ValueError, match="outcome one of"):
        triage.FailureClass("x", "defect", "pass", "", "", "verdict")
    with pytest.raises(ValueError, match="the verdict said"):
        triage.FailureClass("x", "defect", "wrong", "", "", "")
