"""Programs of tests/fixes/test_safe_softmax_guard.py: attention with a mask that masks every
key of some query rows, compiled through a state's backend with its loader's
decompositions, kernels run in Triton's interpreter, compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "safe-softmax-guard"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager (NaN where eager has NaN), else what differs."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def padded_attention(q, k, v, mask):  # the math form, which uses _safe_softmax (the CPU's own
        with sdpa_kernel(SDPBackend.MATH):  # fused kernel would be chosen here otherwise)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def safe_softmax(x):
        return torch.ops.aten._safe_softmax(x, -1) * 2

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16) for _ in range(3))
    padded = torch.ones(2, 1, 8, 8, dtype=torch.bool)
    padded[:, :, 6:, :] = False  # the last two query rows may attend to nothing
    scores = torch.randn(4, 6)
    scores[1] = float("-inf")
    programs = {
        "padded-attention": (padded_attention, (q, k, v, padded)),
        "safe-softmax": (safe_softmax, (scores,)),
        "unmasked-attention": (padded_attention, (q, k, v, torch.ones(2, 1, 8, 8, dtype=torch.bool))),
    }
    def judge(got, want):
        if torch.allclose(got, want, atol=1e-5, equal_nan=True):
            return True
        return f"NaN at {int(torch.isnan(got).sum())} elements, eager {int(torch.isnan(want).sum())}"

    return against_eager(codegen, programs, judge)


def programs(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
