"""Accuracy sweep of parallel_cross_entropy on a CUDA GPU against an fp64 reference.

dtype x reduce x layout x label smoothing x ignore fraction x shapes (V not a multiple of
the block, V > 65536, split and unsplit rows): 1584 cases, each called twice (the second call
launches the compiled kernels directly and must give the same bits), plus one case whose
logits hold more than 2**31 elements. Prints the largest absolute and relative errors per dtype
(run with ``-s``); ``NPU_FIXES_CE_SWEEP_CSV=path`` also writes every case's errors.
"""

from __future__ import annotations

import csv
import itertools
import os

import pytest
import torch
import torch.nn.functional as F

from npu_fixes.ops import parallel_cross_entropy

pytestmark = pytest.mark.gpu

TOL = {
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float16: (1e-3, 1e-5),
}
SHAPES = [  # (B, SQ, V)
    (1, 1, 2),
    (2, 3, 17),
    (3, 5, 1000),
    (2, 7, 4095),
    (4, 33, 4097),
    (1, 64, 8193),
    (2, 100, 16383),
    (8, 16, 32000),
    (1, 3, 50257),
    (4, 20, 65537),
    (2, 9, 100003),
    (3, 11, 128256),
    (1, 130, 151936),
    (2, 4, 256000),
    (16, 64, 3000),
    (64, 32, 1024),
    (8, 128, 4096),
    (2, 333, 12345),
    (5, 200, 32768),
    (1, 1024, 7777),
    (2, 1, 131071),
    (4, 512, 2048),
]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
CASES = list(
    itertools.product(
        DTYPES,
        (False, True),
        ("bsv", "sbv"),
        (0.0, 0.1),
        (0.0, 0.3, 1.0),
        SHAPES,
    )
)


def _reference(
    x: torch.Tensor, t: torch.Tensor, eps: float, reduce_loss: bool, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x64 = x.detach().double().requires_grad_()
    loss = F.cross_entropy(
        x64.reshape(-1, x.shape[-1]),
        t.reshape(-1),
        label_smoothing=eps,
        reduction="none",
    ).view(t.shape)
    if reduce_loss:
        loss = loss.sum() / (t != -100).sum().clamp(min=1)
    loss.backward(g.double())
    return loss.detach(), x64.grad


def _errors(
    actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> tuple[float, float, bool]:
    a = actual.double()
    diff = (a - expected).abs()
    abs_err = float(diff.max()) if diff.numel() else 0.0
    rel_err = float((diff / expected.abs().clamp(min=1e-30)).max()) if diff.numel() else 0.0
    ok = bool(torch.isfinite(a).all()) and bool((diff <= atol + rtol * expected.abs()).all())
    return abs_err, rel_err, ok


def test_accuracy_sweep() -> None:
    assert len(CASES) >= 1500
    gen = torch.Generator(device="cuda").manual_seed(1234)
    worst: dict[str, dict[str, float]] = {}
    rows = []
    failures = []
    for dtype, reduce_loss, layout, eps, ignore_frac, (b, sq, v) in CASES:
        label = (dtype, reduce_loss, layout, eps, ignore_frac, b, sq, v)
        shape = (b, sq, v) if layout == "bsv" else (sq, b, v)
        x = (torch.randn(shape, device="cuda", generator=gen) * 4).to(dtype).requires_grad_()
        t = torch.randint(0, v, shape[:2], device="cuda", generator=gen)
        t[torch.rand(shape[:2], device="cuda", generator=gen) < ignore_frac] = -100
        loss = parallel_cross_entropy(x, t, eps, reduce_loss)
        g = torch.rand(loss.shape, device="cuda", generator=gen) + 0.5
        (grad,) = torch.autograd.grad(loss, x, g)
        # the same call again: launched directly from the plan the first call made
        again = parallel_cross_entropy(x, t, eps, reduce_loss)
        assert torch.equal(again, loss) and torch.equal(torch.autograd.grad(again, x, g)[0], grad), label
        ref_loss, ref_grad = _reference(x, t, eps, reduce_loss, g)
        rtol, atol = TOL[dtype]
        la, lr, lok = _errors(loss.detach(), ref_loss, *TOL[torch.float32])
        ga, gr, gok = _errors(grad, ref_grad, rtol, atol)
        name = str(dtype).removeprefix("torch.")
        w = worst.setdefault(
            name, {"loss_abs": 0.0, "loss_rel": 0.0, "grad_abs": 0.0, "grad_rel": 0.0, "cases": 0}
        )
        w["cases"] += 1
        for key, val in (("loss_abs", la), ("loss_rel", lr), ("grad_abs", ga), ("grad_rel", gr)):
            w[key] = max(w[key], val)
        case = (name, reduce_loss, layout, eps, ignore_frac, b, sq, v)
        rows.append((*case, la, lr, ga, gr, lok and gok))
        if not (lok and gok):
            failures.append(case)
    print(f"\n{len(CASES)} cases; largest errors against fp64 (loss tolerance is fp32's)")
    for name, w in worst.items():
        print(
            f"  {name:9s} {w['cases']:5d} cases  loss abs {w['loss_abs']:.3e} rel {w['loss_rel']:.3e}"
            f"  grad abs {w['grad_abs']:.3e} rel {w['grad_rel']:.3e}"
        )
    out = os.environ.get("NPU_FIXES_CE_SWEEP_CSV")
    if out:
        with open(out, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "dtype",
                    "reduce",
                    "layout",
                    "eps",
                    "ignore_frac",
                    "d0",
                    "d1",
                    "V",
                    "loss_abs",
                    "loss_rel",
                    "grad_abs",
                    "grad_rel",
                    "ok",
                ]
            )
            writer.writerows(rows)
    assert not failures, f"{len(failures)} of {len(CASES)} cases out of tolerance, e.g. {failures[:5]}"


def test_more_than_2_31_logits() -> None:
    """Row offsets past 2**31 elements: rows at the end must be right too."""
    b, sq, v = 2, 8200, 131072  # 2.15e9 bf16 logits, 4.3 GB
    assert b * sq * v > 2**31
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.empty((b, sq, v), device="cuda", dtype=torch.bfloat16)
    x.normal_(generator=gen)
    x.requires_grad_()
    t = torch.randint(0, v, (b, sq), device="cuda", generator=gen)
    loss = parallel_cross_entropy(x, t, 0.1)
    (grad,) = torch.autograd.grad(loss.sum(), x)
    for rows in (slice(0, 4), slice(sq - 4, sq)):  # first and last rows of the last batch entry
        xs, ts = x.detach()[1:, rows], t[1:, rows]
        ref_loss, ref_grad = _reference(xs, ts, 0.1, False, torch.ones_like(ts, dtype=torch.float64))
        _, _, lok = _errors(loss.detach()[1:, rows], ref_loss, *TOL[torch.float32])
        _, _, gok = _errors(grad[1:, rows], ref_grad, *TOL[torch.bfloat16])
        assert lok and gok
