"""The PyTorch path: forward and backward in plain PyTorch operations (CPU, small NPU
vocabularies, ``NPU_FIXES_CE_FORCE_TRITON=0``)."""

from __future__ import annotations

import torch
from torch import Tensor

from .sharding import Shard, gather_partials


def _partials(inp: Tensor, target: Tensor, eps: float, ignore_idx: int, offset: int) -> Tensor:
    """Partials ``(1, 4, N)`` of this slice: (lse, 1, target logit, logit sum), which combine
    like (max, sum-exp, ...) partials."""
    vocab = inp.shape[-1]
    x = inp.reshape(-1, vocab).float()
    t64 = target.reshape(-1).long()  # widen before comparing with ignore_idx
    t = t64 - offset
    own = (t64 != ignore_idx) & (t >= 0) & (t < vocab)
    xt = torch.where(own, x.gather(1, torch.where(own, t, 0).unsqueeze(1)).squeeze(1), 0.0)
    sx = x.sum(dim=-1) if eps > 0.0 else torch.zeros_like(xt)
    lse = torch.logsumexp(x, dim=-1)
    return torch.stack((lse, torch.ones_like(lse), xt, sx)).unsqueeze(0)


def _finalize(part: Tensor, target: Tensor, vocab: int, eps: float, ignore_idx: int) -> tuple[Tensor, Tensor]:
    """Loss and lse per row from partials ``(P, 4, N)`` of a ``vocab``-sized vocabulary."""
    m, d, xt, sx = part.unbind(1)
    m_max = m.amax(dim=0)
    shift = torch.where(m_max == float("-inf"), 0.0, m_max)
    lse = shift + torch.log((d * torch.exp(m - shift)).sum(dim=0))
    loss = lse - (1.0 - eps) * xt.sum(dim=0)
    if eps > 0.0:
        loss = loss - eps * (sx.sum(dim=0) / vocab)
    t = target.reshape(-1).long()
    valid = t != ignore_idx
    bad = valid & ((t < 0) | (t >= vocab))
    nan = torch.full_like(lse, float("nan"))
    loss = torch.where(bad, nan, torch.where(valid, loss, 0.0))
    lse = torch.where(bad, nan, torch.where(valid, lse, 0.0))
    return loss, lse


def forward(
    inp: Tensor, target: Tensor, eps: float, ignore_idx: int, shard: Shard | None
) -> tuple[Tensor, Tensor]:
    """Loss and lse per row (flat), those of the whole vocabulary with a ``shard``."""
    offset, total = (0, inp.shape[-1]) if shard is None else (shard.offset, shard.total)
    part = _partials(inp, target, eps, ignore_idx, offset)
    if shard is not None:
        part = gather_partials(part, shard)
    return _finalize(part, target, total, eps, ignore_idx)


def backward(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    scale: Tensor | None,
    eps: float,
    ignore_idx: int,
    offset: int,
    total: int,
) -> Tensor:
    """Gradient w.r.t. ``inp``, the slice at ``offset`` of a ``total``-entry vocabulary."""
    vocab = inp.shape[-1]
    x = inp.reshape(-1, vocab).float()
    t64 = target.reshape(-1).long()  # widen before comparing with ignore_idx
    valid = t64 != ignore_idx
    t = t64 - offset
    hit = valid & (t >= 0) & (t < vocab)
    g = torch.exp(x - lse.unsqueeze(1)) - eps / total
    g.scatter_add_(1, torch.where(hit, t, 0).unsqueeze(1), -(1.0 - eps) * hit.float().unsqueeze(1))
    row_scale = grad_loss.float().expand(inp.shape[:2]).reshape(-1)
    if scale is not None:
        row_scale = row_scale * scale
    g = torch.where(valid.unsqueeze(1), g * row_scale.unsqueeze(1), 0.0)
    return g.to(inp.dtype).view(inp.shape)
