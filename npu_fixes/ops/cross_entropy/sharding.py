"""Vocabulary parallelism: this rank's slice of the vocabulary and the all-gather of partials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class Shard:
    """This rank's slice of a vocabulary split over a process group."""

    group: Any
    world: int
    offset: int  # global index of the slice's first entry
    total: int  # size of the whole vocabulary
    largest: int  # largest slice in the group: every rank derives its path and split count from it


# Slice sizes of every rank of a group, exchanged at the group's first call; () for a one-rank group.
_SLICE_SIZES: dict[Any, tuple[int, ...]] = {}


def _all_gather(out: Tensor, inp: Tensor, group: Any) -> None:
    """Gather equal-sized ``inp`` of every rank into ``out`` along the first axis."""
    import torch.distributed as dist

    dist.all_gather_into_tensor(out, inp, group=group)


def shard(group: Any, local_vocab: int, device: torch.device) -> Shard | None:
    """The vocabulary slice this rank holds in ``group``; ``None`` for no group or one rank.

    The slice sizes are all-gathered (one host sync) at the group's first call and kept: a
    later call with another local size raises ``ValueError`` (every rank must know of a
    change, which would cost an exchange per call).
    """
    if group is None:
        return None
    sizes = _SLICE_SIZES.get(group)
    if sizes == ():  # a one-rank group (a group's size never changes)
        return None
    import torch.distributed as dist

    world = dist.get_world_size(group)
    if world == 1:
        _SLICE_SIZES[group] = ()
        return None
    if sizes is None:
        every = torch.empty(world, dtype=torch.int64, device=device)
        _all_gather(every, torch.tensor([local_vocab], dtype=torch.int64, device=device), group)
        sizes = _SLICE_SIZES.setdefault(group, tuple(every.tolist()))
    rank = dist.get_rank(group)
    if sizes[rank] != local_vocab:
        raise ValueError(
            f"parallel_cross_entropy: this rank's vocabulary slice has {local_vocab} entries, but "
            f"{sizes[rank]} at this group's first call (slices {list(sizes)}); a group's slice "
            "sizes are fixed: use another process group for another split"
        )
    return Shard(group, world, sum(sizes[:rank]), sum(sizes), max(sizes))


def gather_partials(part: Tensor, shard: Shard) -> Tensor:
    """All ranks' partials ``(S, 4, N)``, stacked into ``(world * S, 4, N)``."""
    out = part.new_empty((shard.world * part.shape[0], *part.shape[1:]))
    _all_gather(out, part.contiguous(), shard.group)
    return out
