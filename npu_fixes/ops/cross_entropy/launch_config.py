"""Launch configuration: block size, warps, the split of rows over programs, per device."""

from __future__ import annotations

import math
from functools import cache
from typing import Any, NamedTuple

import torch

from . import tuning


class Launch(NamedTuple):
    block: int
    fwd_warps: int
    bwd_warps: int
    splits: int
    chunk: int
    row_programs: int


@cache
def num_cores(device: torch.device) -> int:
    """Programs that run at once on ``device``; looked up once per device (cached)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    if device.type == "npu":
        return _npu_vector_cores(device)
    return 1


def _npu_vector_cores(device: torch.device) -> int:
    """The NPU's vector core count as torch_npu reports it (Triton kernels without matrix
    work run on the vector cores), else the ``tuning.NPU_ASSUMED_VECTOR_CORES`` assumption.

    Asks ``torch.npu.get_device_properties(i).vector_core_num``, then
    ``torch.npu.get_device_limit(i)["vector_core_num"]``; any failure (an older torch_npu
    without the query) or a non-positive answer moves on.
    """
    npu = getattr(torch, "npu", None)
    if npu is None:
        return tuning.NPU_ASSUMED_VECTOR_CORES
    try:
        index = npu.current_device() if device.index is None else device.index
    except Exception:  # noqa: BLE001
        return tuning.NPU_ASSUMED_VECTOR_CORES
    queries = (
        lambda i: npu.get_device_properties(i).vector_core_num,
        lambda i: npu.get_device_limit(i)["vector_core_num"],
    )
    for query in queries:
        try:
            count = int(query(index))
        except Exception:  # noqa: BLE001
            continue
        if count > 0:
            return count
    return tuning.NPU_ASSUMED_VECTOR_CORES


def launch_config(
    n_rows: int, vocab: int, device_type: str, cores: int, split_vocab: int | None = None
) -> Launch:
    """Block size, warps and the split of each row's ``vocab`` columns over programs.

    Block size and split count follow ``split_vocab`` (default ``vocab``): ranks holding
    slices of different sizes pass the largest, so all get the same number of chunks (a
    short slice's last chunks are then empty).
    """
    split_vocab = vocab if split_vocab is None else split_vocab
    max_block = tuning.MAX_FUSED_BLOCK.get(device_type, tuning.DEFAULT_MAX_BLOCK)
    block = min(max_block, max(16, 1 << (split_vocab - 1).bit_length()))
    warps = tuning.CUDA_WARPS
    fwd_warps, bwd_warps = (warps["fwd"], warps["bwd"]) if device_type == "cuda" else (4, 4)
    n_blocks = math.ceil(split_vocab / block)
    splits = max(1, min(n_blocks, math.ceil(tuning.WAVES * cores / max(n_rows, 1))))
    splits = math.ceil(n_blocks / math.ceil(n_blocks / splits))  # no chunk left empty
    chunk = math.ceil(math.ceil(vocab / block) / splits) * block
    row_programs = min(n_rows, tuning.MAX_ROW_PROGRAMS.get(device_type, tuning.DEFAULT_MAX_ROW_PROGRAMS))
    return Launch(block, fwd_warps, bwd_warps, splits, chunk, row_programs)


# Launch configurations by everything they depend on (the tunables included, so changing one
# takes effect): computed once per shape, not per call.
_CONFIGS: dict[tuple[Any, ...], Launch] = {}


def cached_config(n_rows: int, vocab: int, device: torch.device, split_vocab: int | None) -> Launch:
    """:func:`launch_config` for ``device``, computed once per shape and tunables."""
    dt = device.type
    key = (n_rows, vocab, dt, device.index, split_vocab, tuning.WAVES, tuning.MAX_FUSED_BLOCK.get(dt),
           tuning.CUDA_WARPS["fwd"], tuning.CUDA_WARPS["bwd"])  # fmt: skip
    cfg = _CONFIGS.get(key)
    if cfg is None:
        if len(_CONFIGS) >= 4096:  # many shapes (e.g. varying sequence lengths): start over
            _CONFIGS.clear()
        cfg = _CONFIGS[key] = launch_config(n_rows, vocab, dt, num_cores(device), split_vocab)
    return cfg
