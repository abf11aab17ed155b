"""Megatron-core as a client of te-parallel-ce: its own loss call on gloo ranks, on the CPU.

Megatron-core (the version the test extras install) imports the Transformer Engine stand-in
(``tests/te_stand_in``: a version, no ``parallel_cross_entropy``) after npu_fixes, binds ours as
``te_parallel_cross_entropy`` and calls it from ``GPTModel.compute_language_model_loss`` with
``cross_entropy_fusion_impl='te'``: labels transposed to ``[s, b]`` and made strided by
``torch.as_strided``, logits ``[s, b, V/TP]``, the tensor-parallel group Megatron builds. Four
ranks run tensor parallel 2 (two groups: ranks 0-1 and 2-3) and 4; the reference is Megatron's
unfused ``vocab_parallel_cross_entropy`` on the same slices. A stand-in older than 2.7.0 makes
Megatron call with five arguments instead of seven. Megatron's model itself does not run on a
CPU (its attention allocates on CUDA): ``examples/megatron_gpt_ce.py`` trains it on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_program

STAND_IN = Path(__file__).resolve().parents[1] / "te_stand_in"
FP32 = 1e-5
BF16 = 2.0**-8  # half an ulp of bf16, relative to the gradient's largest element


def _compare(version: str, world: int, tps: list[int]) -> dict:
    return run_program("te_parallel_ce_megatron", "compare", env={"TE_STAND_IN_VERSION": version},
                       path=[STAND_IN], world=world, tps=tps)


@pytest.fixture(scope="module")
def seven() -> dict:
    """Transformer Engine 2.9.0 (seven arguments), 4 ranks, TP 2 and 4."""
    return _compare("2.9.0", 4, [2, 4])


@pytest.fixture(scope="module")
def five() -> dict:
    """Transformer Engine 2.6.0 (five arguments), 2 ranks, TP 2."""
    return _compare("2.6.0", 2, [2])


def _cases(result: dict, case: str) -> list[dict]:
    return [rank[case] for rank in result["ranks"]]


def test_megatron_binds_ours(seven: dict, five: dict) -> None:
    for res, version, seven_args in ((seven, "2.9.0", True), (five, "2.6.0", False)):
        assert res["state"] == "applied"
        assert res["bound_is_ours"] is True
        assert (res["te_version"], res["seven_arguments"]) == (version, seven_args)


@pytest.mark.parametrize("tp", [2, 4])
def test_te_loss_matches_unfused_reference(seven: dict, tp: int) -> None:
    cases = _cases(seven, f"tp{tp}-te-fp32")
    assert len(cases) == 4
    for case in cases:
        assert case["shape"] == [3, 6]  # Megatron's [b, s], transposed back from [s, b]
        assert case["loss_err"] <= FP32 and case["grad_err"] <= FP32, case


def test_tensor_parallel_groups_are_megatrons(seven: dict) -> None:
    """TP 2 on 4 ranks: each rank's group is Megatron's subgroup, not the world."""
    assert [c["group_ranks"] for c in _cases(seven, "tp2-te-fp32")] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [c["group_ranks"] for c in _cases(seven, "tp4-te-fp32")] == [[0, 1, 2, 3]] * 4


@pytest.mark.parametrize("tp", [2, 4])
def test_bf16_logits(seven: dict, tp: int) -> None:
    for case in _cases(seven, f"tp{tp}-te-bf16"):
        assert case["dtype"] == "torch.bfloat16"
        assert case["loss_err"] <= FP32, case
        assert case["grad_err"] <= BF16 * case["grad_max"], case


@pytest.mark.parametrize("tp", [2, 4])
def test_ignored_labels_give_zero_loss_and_gradient(seven: dict, tp: int) -> None:
    """Megatron's 'te' call passes ignore_idx=-100; its 'native' one has no ignore index."""
    for case in _cases(seven, f"tp{tp}-te-ignored"):
        assert case["ignored"] > 0
        assert case["ignored_loss_max"] == 0.0 and case["ignored_grad_max"] == 0.0
        assert case["loss_err"] <= FP32 and case["grad_err"] <= FP32, case


@pytest.mark.parametrize("tp", [2, 4])
def test_cg_capturable_call(seven: dict, tp: int) -> None:
    """Megatron's wrapper with is_cg_capturable=True (full-iteration CUDA graphs) and the
    as_strided labels gives the same result."""
    for graphed, plain in zip(_cases(seven, f"tp{tp}-te-cg-capturable"), _cases(seven, f"tp{tp}-te-fp32"), strict=True):
        assert graphed == plain


@pytest.mark.parametrize("tp", [2, 4])
def test_native_baseline_agrees(seven: dict, tp: int) -> None:
    """'native' (Megatron's fused cross entropy) on the same slices: the same loss; its
    gradient is rounded to bf16 by Megatron whatever the logits' dtype."""
    for case in _cases(seven, f"tp{tp}-native-fp32"):
        assert case["loss_err"] <= FP32
        assert 0 < case["grad_err"] <= BF16 * case["grad_max"], case


def test_five_argument_call(five: dict) -> None:
    cases = _cases(five, "tp2-te-fp32") + _cases(five, "tp2-te-ignored")
    assert len(cases) == 4
    for case in cases:
        assert case["loss_err"] <= FP32 and case["grad_err"] <= FP32, case
