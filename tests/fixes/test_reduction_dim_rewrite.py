"""reduction-dim-rewrite: RoPE's interleaved rotation, forward and backward, at every genuine
commit and the 2.13.0 and 2.14.0 wheels, kernels run in Triton's interpreter, against eager
(tests/programs/reduction_dim_rewrite.py)."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import reduction_dim_rewrite as fix
from tests.conftest import run_at_states, run_program
from tests.genuine_states import COMMITS

STATES = (*COMMITS, "2.13.0", "2.14.0")
REDUCTIONS = fix.reductions()


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "reduction_dim_rewrite", "rotations")


def test_only_calls_that_are_no_reduction_are_kept_and_the_text_comes_back():
    line = ("    tmp8 = tl.load(in_ptr1 + (tl.maximum(tl.broadcast_to(8*x2 + (triton_helpers.div_floor_integer("
            "(-1) + x0,  2)), [XBLOCK, 1]), 0)), xmask, other=0.0)")
    protected = fix.kept(line, REDUCTIONS)
    assert ", 0)" not in protected and ",  2)" in protected and fix.restored(protected) == line
    # what the method's replace does to each: the clamp is changed as written, not once kept
    assert "tl.maximum(" in line.replace(", 0)", ", 4)") and ", 4)" not in protected.replace(", 0)", ", 4)")
    reduced = "    tmp5 = triton_helpers.max2(tl.maximum(tmp3, 0), 0)"
    assert fix.kept(reduced, REDUCTIONS) == "    tmp5 = triton_helpers.max2(tl.maximum(tmp3, 0 ), 0)"
    assert fix.kept("    tmp2 = tl.sum(tmp1, 0)", REDUCTIONS) == "    tmp2 = tl.sum(tmp1, 0)"
    plain = "    tmp1 = tl.maximum(tmp0, 0)"  # no token the method picks lines by: left alone
    assert fix.kept(plain, REDUCTIONS) == plain


def test_reductions_are_those_of_tl_and_the_helpers_with_a_dimension():
    assert {"tl.sum", "triton_helpers.max2", "triton_helpers.prod", "triton_helpers.welford"} <= REDUCTIONS
    assert not {"triton_helpers.maximum", "triton_helpers.div_floor_integer", "tl.maximum"} & REDUCTIONS


@pytest.mark.parametrize("state", STATES)
def test_the_rotations_equal_eager_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and res["state"] == "applied", res
    assert res["probe_after"] is False and res["undone"] is True
    rotations = {k: v for k, v in res["after"].items() if k != "causal-lm-step"}
    assert rotations == dict.fromkeys(rotations, 0.0) and res["after"]["causal-lm-step"] is True, res["after"]


def test_as_built_and_without_this_fix_the_interleaved_rotation_is_wrong(runs, genuine):
    """At bafc50684 as built the interleaved rotation's kernel loads outside its buffers (a
    defect other fixes repair), in the rotation alone and in the causal LM's step; with every
    fix but this one the rotation's backward is silently wrong (the model's step, whose
    kernels fuse the rotation with its projections, is right then: the clamp it reaches is
    not hit)."""
    res = runs["bafc50684"]
    for program in ("interleaved-backward", "causal-lm-step"):
        assert res["before"][program].startswith("OutOfBounds: "), res["before"]
    assert res["before"]["halves-backward"] == 0.0
    others = run_program("reduction_dim_rewrite", "rotations", env={"NPU_FIXES": "0",
                         "NPU_FIXES_DISABLE": fix.FIX.name}, location=genuine("bafc50684"))
    assert others["state"] == "disabled" and others["after"]["interleaved-backward"] > 1.0, others["after"]
    assert others["after"]["interleaved-forward"] == others["after"]["halves-backward"] == 0.0
    assert others["after"]["causal-lm-step"] is True
