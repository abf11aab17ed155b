"""The mass gate's own parts (``benchmarks/ce_mass.py``) on the CPU, through the PyTorch path:
the case generator, the precision rule and the paired timing, so that the benchmark cannot rot."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

_SPEC = importlib.util.spec_from_file_location(
    "ce_mass", Path(__file__).resolve().parents[2] / "benchmarks" / "ce_mass.py"
)
ce_mass = sys.modules["ce_mass"] = importlib.util.module_from_spec(_SPEC)  # dataclasses look it up
_SPEC.loader.exec_module(ce_mass)


@pytest.fixture(scope="module")
def group():
    import torch.distributed as dist

    made = not dist.is_initialized()
    yield ce_mass.one_rank_group()
    if made:
        dist.destroy_process_group()


def test_cases_are_seeded_and_cover_the_space() -> None:
    cases = ce_mass.cases()
    assert cases == ce_mass.cases() and cases != ce_mass.cases(seed=1)
    assert len(cases) == 1500
    assert {c.dtype for c in cases} == set(ce_mass.DTYPES)
    assert {c.layout for c in cases} == set(ce_mass.LAYOUTS)
    assert {c.eps for c in cases} == {0.0, 0.1}
    assert {c.reduce for c in cases} == {c.group for c in cases} == {False, True}
    assert all(ce_mass.MIN_VOCAB <= c.vocab <= ce_mass.MAX_VOCAB for c in cases)
    real = sum(c.vocab in ce_mass.TOKENIZER_VOCABS for c in cases)
    assert 500 < real < 1000
    tokens = [c.b * c.sq for c in cases]
    assert min(tokens) == 1 and 16384 < max(tokens) <= ce_mass.MAX_TOKENS
    assert all(c.logits <= 2**27 for c in cases)
    assert all(0.0 <= c.ignore_frac <= 0.5 for c in cases)
    assert max(c.ignore_frac for c in cases) > 0.45


def test_make_builds_each_layout() -> None:
    case = ce_mass.cases(1)[0]
    for layout in ce_mass.LAYOUTS:
        c = ce_mass.Case(0, "bf16", layout, 3, 40, 600, 0.1, False, 0.5, False, 2.0, 7)
        x, t, go = ce_mass.make(c, "cpu")
        outer = (40, 3) if layout == "sbv" else (3, 40)
        assert x.shape == (*outer, 600) and t.shape == go.shape == outer and x.dtype == torch.bfloat16
        assert x.is_contiguous() == (layout != "bsv_view") and x.requires_grad
        assert 0.3 < (t == ce_mass.IGNORE).float().mean() < 0.7
        x2, t2, _ = ce_mass.make(c, "cpu")
        assert torch.equal(x, x2) and torch.equal(t, t2)
    x, _, go = ce_mass.make(case, "cpu")
    assert go.shape == (() if case.reduce else x.shape[:2])


def test_precision_rule_passes_the_pytorch_path(group) -> None:
    cases = ce_mass.cases(12, seed=3, max_logits=2**16)
    assert {c.dtype for c in cases} == set(ce_mass.DTYPES) and any(c.group for c in cases)
    for case in cases:
        rec = ce_mass.check_precision(case, "cpu", group)
        assert rec["precision_pass"], (case, rec)
        assert (rec["grad_err"] > 0) == (rec["grad_bound"] > 0)  # both 0: every label ignored


def test_precision_rule_rejects_worse_results() -> None:
    x = torch.randn(64, 1000, dtype=torch.float64)
    ref = torch.log_softmax(x, -1)
    fp32 = torch.log_softmax(x.float(), -1)
    assert ce_mass.judge(fp32, fp32, ref)["pass"]
    assert not ce_mass.judge(torch.log_softmax(x.bfloat16().float(), -1), fp32, ref)["pass"]  # bf16 math
    assert not ce_mass.judge(fp32 * (1 + 1e-5), fp32, ref)["pass"]
    assert not ce_mass.judge(torch.full_like(fp32, math.nan), fp32, ref)["pass"]
    exact = ref.float()
    assert ce_mass.judge(exact, exact, exact.double())["pass"]  # no error at all on both sides


def test_paired_alternates_and_times_both() -> None:
    order: list[str] = []
    ta, tb = ce_mass.paired(lambda: order.append("a"), lambda: order.append("b"), 4, lambda: None, 1e-4)
    assert len(ta) == len(tb) == 4 and min(ta + tb) > 0
    runs = [order[0]]
    for name in order[1:]:
        if name != runs[-1]:
            runs.append(name)
    # calibration a, b; then rounds a b | b a | a b | b a: consecutive blocks of one side merge
    assert runs == ["a", "b", "a", "b", "a", "b", "a"]
