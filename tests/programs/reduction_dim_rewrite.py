"""Programs of tests/fixes/test_reduction_dim_rewrite.py: RoPE's interleaved rotation, forward
and backward, compiled through a state's backend, kernels run in Triton's interpreter, against
eager, as built and with npu_fixes."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main, step_equals_eager

NAME = "reduction-dim-rewrite"


def _interleaved(x, cos, sin):
    import torch

    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def _halves(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def _gradient(rotate):
    def grad(x, cos, sin, weight):
        import torch

        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad((rotate(x, cos, sin) * weight).sum(), x)
        return g
    return grad


def causal_lm_step(codegen) -> bool | str:
    """One training step of a tiny causal language model (embedding, one attention layer with
    interleaved RoPE on queries and keys, a tied head, the shifted-label cross entropy): loss
    and every parameter's gradient against eager (True where all are within 1e-4)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(1)
    vocab, dim, heads, seq = 64, 32, 2, 8
    params = {"embed": torch.randn(vocab, dim) * 0.5,
              **{name: torch.randn(dim, dim) * dim**-0.5 for name in ("wq", "wk", "wv", "wo")}}
    tokens = torch.randint(0, vocab, (2, seq))
    angles = torch.arange(seq)[:, None, None] * 0.5 ** torch.arange(dim // heads // 2)
    cos, sin = angles.cos(), angles.sin()

    def loss(embed, wq, wk, wv, wo, tokens):
        h = embed[tokens]
        q, k, v = ((h @ w).view(2, seq, heads, dim // heads) for w in (wq, wk, wv))
        q, k = _interleaved(q, cos, sin), _interleaved(k, cos, sin)
        scores = torch.einsum("bshd,bthd->bhst", q, k) / (dim // heads) ** 0.5
        scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
        h = h + torch.einsum("bhst,bthd->bshd", scores.softmax(-1), v).reshape(2, seq, dim) @ wo
        logits = h @ embed.t()
        return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))

    def step(fn):
        leaves = {name: p.clone().requires_grad_() for name, p in params.items()}
        value = fn(*leaves.values(), tokens)
        return [value.detach(), *torch.autograd.grad(value, list(leaves.values()))]

    return step_equals_eager(codegen, step, loss, atol=1e-4)


def run_all(codegen) -> dict:
    """Each program's largest difference from eager, or the error; the model's step."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(2, 8, 2, 16)
    angles = torch.randn(8, 1, 8)
    cos, sin, weight = angles.cos(), angles.sin(), torch.randn(2, 8, 2, 16)

    def judge(actual, expected):
        return (actual - expected).abs().max().item()

    return against_eager(codegen, {
        "interleaved-forward": (_interleaved, (x, cos, sin)),
        "interleaved-backward": (_gradient(_interleaved), (x, cos, sin, weight)),
        "halves-backward": (_gradient(_halves), (x, cos, sin, weight)),
    }, judge) | {"causal-lm-step": causal_lm_step(codegen)}


def rotations(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
