"""Parallel cross entropy: public function, validation, autograd, routing.

Semantics follow Transformer Engine's ``parallel_cross_entropy`` (v2.17). With a
``dist_process_group`` of several ranks each rank holds a contiguous slice of the vocabulary
(slices may differ in size); per-row partials (max, sum of exponentials, target logit, sum of
logits) are exchanged with one all-gather and merged, so every rank gets the single-device
loss. The backward needs no communication. The kernels live in
:mod:`npu_fixes.ops.cross_entropy_kernels`.

Host time (CUDA): one kernel launch per direction (the forward's last program finalizes split
rows and takes the mean: ``LAST_PROGRAM_TAIL``); eager calls go through per-signature plans
(launch configuration, one workspace, compiled kernels launched directly: ``FAST_LAUNCH``)
and ``autograd.Function``'s C++ ``apply``; the custom ops are only for ``torch.compile``.

Environment:

* ``NPU_FIXES_CE_FORCE_TRITON=1`` / ``=0`` (or the shim's other on/off words) forces the
  Triton / PyTorch path (default: route by device and size, see :func:`use_triton`; in a
  vocabulary-parallel group every rank routes by the group's largest slice, so all take
  the same path).
* ``NPU_FIXES_CE_CHECK=1`` checks every target on the host and raises ``ValueError`` for
  one outside ``[0, V)`` that is not ``ignore_idx`` (a device sync; skipped while a CUDA
  graph is being captured). Without it such a row gets a NaN loss and a NaN gradient.
"""

from __future__ import annotations

import math
import os
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..shim import switches

__all__ = ["parallel_cross_entropy", "use_triton"]

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Target dtypes taken as class indices; each value means its integer value (compared with
# ignore_idx and the vocabulary only after widening to int64). The unsigned types wider than
# uint8 are left out: PyTorch supports few operations on them.
_TARGET_DTYPES = frozenset((torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8))
_PROCESS_GROUP = getattr(torch.distributed, "ProcessGroup", None)  # None without distributed

# Largest vocabulary block one program holds at once, per device type. NPU: an assumption
# taken from the original user report (Ascend's unified buffer overflows above 4096 on a
# 910B3), not measured by us. CUDA: on an H200, blocks of 4096 to 32768 were tried and 4096
# was fastest (benchmarks/ce_benchmark.py --tune).
MAX_FUSED_BLOCK: dict[str, int] = {"npu": 4096, "cuda": 4096}
_DEFAULT_MAX_BLOCK = 4096
# Warps per program on CUDA for the forward and backward kernels (measured on an H200).
_CUDA_WARPS: dict[str, int] = {"fwd": 4, "bwd": 16}
# Most programs along grid axis 0; more rows are looped over inside a program.
_MAX_ROW_PROGRAMS: dict[str, int] = {"cuda": 2**31 - 1}
_DEFAULT_MAX_ROW_PROGRAMS = 65535
# Split a row's vocabulary over several programs until rows * splits >= WAVES * cores.
_WAVES = 4
# Device types whose forward is one launch: the last program to finish (one atomic per
# program) finalizes split rows and computes the mean (see ce_forward_kernel). Elsewhere
# (NPU: no atomics assumed) separate finalize and mean kernels run after the forward kernel.
LAST_PROGRAM_TAIL: dict[str, bool] = {"cuda": True}
_TAIL_BLOCK = 1024  # rows per step of the last program
# NPU: Triton wins from this vocabulary width up. An assumption taken from the original user
# report (its Ascend measurement), not measured by us.
NPU_MIN_TRITON_VOCAB = 16384
# Vector cores of an Ascend 910B2 (a 910B3 has 40): an assumption taken from the original user
# report, used only where torch_npu cannot tell the device's own count (see _num_cores).
NPU_ASSUMED_VECTOR_CORES = 48


# os.environ.get encodes the key and decodes the value on every call (1-2 us on the hosts
# measured, twice per eager call); the mapping behind it is read directly where it has
# CPython's usual shape (os.environ's own __setitem__/__delitem__ keep it current).
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_ENCODE = getattr(os.environ, "encodekey", None)
_ENV_DECODE = getattr(os.environ, "decodevalue", None)
_ENV_KEYS: dict[str, Any] = {}


def _env(name: str) -> str | None:
    if _ENV_DATA is not None and _ENV_ENCODE is not None and _ENV_DECODE is not None:
        key = _ENV_KEYS.get(name)
        if key is None:
            key = _ENV_KEYS[name] = _ENV_ENCODE(name)
        raw = _ENV_DATA.get(key)
        value = None if raw is None else _ENV_DECODE(raw)
    else:
        value = os.environ.get(name)
    return None if value is None or value == "" else value


CE_CHECK = "NPU_FIXES_CE_CHECK"  # default off


def _switch(name: str) -> bool | None:
    """A boolean ``NPU_FIXES*`` switch (the shim's words; unset: None); parsed only when set."""
    value = _env(name)
    return None if value is None else switches.flag(name, None, {name: value})


def _interpreting() -> bool:
    return _env("TRITON_INTERPRET") == "1"


def use_triton(inp: Tensor, width: int | None = None) -> bool:
    """Whether ``inp`` (already validated) takes the Triton path.

    ``NPU_FIXES_CE_FORCE_TRITON`` decides when set. Otherwise :func:`_default_route`: NPU
    from ``NPU_MIN_TRITON_VOCAB`` vocabulary entries, CPU never (the Triton interpreter is
    only for tests), CUDA and other devices always (on an H200 Triton beat PyTorch at every
    size measured).
    ``width`` replaces ``inp.shape[-1]`` as the vocabulary width routed by: the ranks of a
    vocabulary-parallel group pass their largest slice, so that all take the same path.
    """
    force = _switch(switches.CE_FORCE_TRITON)
    device = inp.device.type
    if force is not None:
        if force and device == "cpu" and not _interpreting():
            raise RuntimeError(
                "NPU_FIXES_CE_FORCE_TRITON=1 with CPU tensors needs the Triton interpreter "
                "(TRITON_INTERPRET=1 before triton is imported)"
            )
        return force
    return _default_route(device, inp.shape[-1] if width is None else width, inp.shape[0] * inp.shape[1])


def _default_route(device_type: str, width: int, rows: int) -> bool:
    """The default routing rule: Triton for ``rows`` rows of ``width`` logits on ``device_type``?"""
    if device_type == "cpu":
        return False
    if device_type == "npu":
        return width >= NPU_MIN_TRITON_VOCAB
    return True


@dataclass(frozen=True)
class _Shard:
    """This rank's slice of a vocabulary split over a process group."""

    group: Any
    world: int
    offset: int  # global index of the slice's first entry
    total: int  # size of the whole vocabulary
    largest: int  # largest slice in the group: every rank derives its path and split count from it


# Slice sizes of every rank of a group, exchanged at the group's first call.
_SLICE_SIZES: dict[Any, tuple[int, ...]] = {}


def _all_gather(out: Tensor, inp: Tensor, group: Any) -> None:
    """Gather equal-sized ``inp`` of every rank into ``out`` along the first axis."""
    import torch.distributed as dist

    dist.all_gather_into_tensor(out, inp, group=group)


def _shard(group: Any, local_vocab: int, device: torch.device) -> _Shard | None:
    """The vocabulary slice this rank holds in ``group``; ``None`` for no group or one rank.

    The slice sizes are all-gathered (one host sync) at the group's first call and kept: a
    later call with another local size raises ``ValueError`` (every rank must know of a
    change, which would cost an exchange per call).
    """
    if group is None:
        return None
    import torch.distributed as dist

    world = dist.get_world_size(group)
    if world == 1:
        return None
    sizes = _SLICE_SIZES.get(group)
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
    return _Shard(group, world, sum(sizes[:rank]), sum(sizes), max(sizes))


def _gather_partials(part: Tensor, shard: _Shard) -> Tensor:
    """All ranks' partials ``(S, 4, N)``, stacked into ``(world * S, 4, N)``."""
    out = part.new_empty((shard.world * part.shape[0], *part.shape[1:]))
    _all_gather(out, part.contiguous(), shard.group)
    return out


class _Launch(NamedTuple):
    block: int
    fwd_warps: int
    bwd_warps: int
    splits: int
    chunk: int
    row_programs: int


@cache
def _num_cores(device: torch.device) -> int:
    """Programs that run at once on ``device``; looked up once per device (cached)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    if device.type == "npu":
        return _npu_vector_cores(device)
    return 1


def _npu_vector_cores(device: torch.device) -> int:
    """The NPU's vector core count as torch_npu reports it (Triton kernels without matrix
    work run on the vector cores), else the ``NPU_ASSUMED_VECTOR_CORES`` assumption.

    Asks ``torch.npu.get_device_properties(i).vector_core_num``, then
    ``torch.npu.get_device_limit(i)["vector_core_num"]``; any failure (an older torch_npu
    without the query) or a non-positive answer moves on.
    """
    npu = getattr(torch, "npu", None)
    if npu is None:
        return NPU_ASSUMED_VECTOR_CORES
    try:
        index = npu.current_device() if device.index is None else device.index
    except Exception:  # noqa: BLE001
        return NPU_ASSUMED_VECTOR_CORES
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
    return NPU_ASSUMED_VECTOR_CORES


def _launch_config(
    n_rows: int, vocab: int, device_type: str, cores: int, split_vocab: int | None = None
) -> _Launch:
    """Block size, warps and the split of each row's ``vocab`` columns over programs.

    Block size and split count follow ``split_vocab`` (default ``vocab``): ranks holding
    slices of different sizes pass the largest, so all get the same number of chunks (a
    short slice's last chunks are then empty).
    """
    split_vocab = vocab if split_vocab is None else split_vocab
    max_block = MAX_FUSED_BLOCK.get(device_type, _DEFAULT_MAX_BLOCK)
    block = min(max_block, max(16, 1 << (split_vocab - 1).bit_length()))
    fwd_warps, bwd_warps = (_CUDA_WARPS["fwd"], _CUDA_WARPS["bwd"]) if device_type == "cuda" else (4, 4)
    n_blocks = math.ceil(split_vocab / block)
    splits = max(1, min(n_blocks, math.ceil(_WAVES * cores / max(n_rows, 1))))
    splits = math.ceil(n_blocks / math.ceil(n_blocks / splits))  # no chunk left empty
    chunk = math.ceil(math.ceil(vocab / block) / splits) * block
    row_programs = min(n_rows, _MAX_ROW_PROGRAMS.get(device_type, _DEFAULT_MAX_ROW_PROGRAMS))
    return _Launch(block, fwd_warps, bwd_warps, splits, chunk, row_programs)


# Launch configurations by everything they depend on (the module-level tunables included,
# so changing one takes effect): computed once per shape, not per call.
_CONFIGS: dict[tuple[Any, ...], _Launch] = {}


def _cached_config(n_rows: int, vocab: int, device: torch.device, split_vocab: int | None) -> _Launch:
    dt = device.type
    key = (n_rows, vocab, dt, device.index, split_vocab, _WAVES, MAX_FUSED_BLOCK.get(dt),
           _CUDA_WARPS["fwd"], _CUDA_WARPS["bwd"])
    cfg = _CONFIGS.get(key)
    if cfg is None:
        if len(_CONFIGS) >= 4096:  # many shapes (e.g. varying sequence lengths): start over
            _CONFIGS.clear()
        cfg = _CONFIGS[key] = _launch_config(n_rows, vocab, dt, _num_cores(device), split_vocab)
    return cfg


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# One int64 counter per (device, stream) for the forward kernel's last-program tail: zero
# between launches (the last program resets it), and launches on one stream never overlap.
_SYNC: dict[tuple[Any, ...], Tensor] = {}


def _sync_counter(device: torch.device) -> Tensor:
    """A zeroed int64 counter for one forward launch on the current stream of ``device``."""
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            # Its own counter, zeroed by a memset node at every replay: graphs captured on one
            # stream may be replayed on several at once.
            return torch.zeros((), dtype=torch.int64, device=device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        if _raw_stream is not None:
            stream = _raw_stream(index)
        else:
            stream = torch.cuda.current_stream(index).cuda_stream
        key: tuple[Any, ...] = (index, stream)
    else:
        key = (device.type, device.index)
    counter = _SYNC.get(key)
    if counter is None:
        counter = _SYNC[key] = torch.zeros((), dtype=torch.int64, device=device)
    return counter


# Direct launches. Through Triton's JIT a launch binds and specializes every argument, builds
# a cache key and asks the driver about every pointer: 20-30 us of host time per launch on an
# H200 host, for kernels that take a few microseconds on the device. Once a kernel has been
# compiled for a call, later calls with the same key launch the compiled kernel through its
# launcher at once, with raw pointers. Keys hold the exact value of every integer argument
# and the dtype and low address bits of every tensor whose buffer was not allocated here (those
# are fresh and 512-byte aligned), so a key is never coarser than Triton's own specialization
# (dtype, 16-byte alignment, divisibility by 16, equality to 1, integer width). Per device
# type; used only where JITFunction.run launches the way this code does (checked once).
FAST_LAUNCH: dict[str, bool] = {"cuda": True}
_LAUNCHED: dict[tuple[Any, ...], Any] = {}
_FAST_PROTOCOL: list[bool] = []  # [whether Triton's launch protocol is the expected one], once known
_RUN_CALL = (
    "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
    "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())"
)


def _fast_protocol() -> bool:
    """Whether this Triton's JIT launches a compiled kernel exactly as ``_launch`` does."""
    if not _FAST_PROTOCOL:
        try:
            import inspect

            from triton.runtime.jit import JITFunction

            source = " ".join(inspect.getsource(JITFunction.run).split())
            _FAST_PROTOCOL.append(_RUN_CALL in source and _kernels().RUNTIME_KNOBS is not None)
        except Exception:  # noqa: BLE001 - any surprise: the JIT path
            _FAST_PROTOCOL.append(False)
    return _FAST_PROTOCOL[0]


# A compiled kernel's ``run`` is Triton's launcher object; on CUDA its ``__call__`` allocates
# scratch buffers (none for our kernels) and passes the call on to its C ``launch`` with the
# launch flags. The eager plans call that C function themselves where the launcher is this one
# (checked once), saving about 2 us per launch on an H200 host.
_LAUNCHER_CALL = (
    "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
    "global_scratch, profile_scratch, *args)"
)
_C_LAUNCH: dict[type, bool] = {}  # launcher class -> whether its __call__ is the one above


def _launcher(compiled: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(launch, head)`` for a compiled kernel: ``launch(grid_0, grid_1, grid_2, stream, *head,
    *args)`` launches it as its ``run`` would, with hooks and launch metadata off."""
    run = compiled.run
    cls = type(run)
    direct = _C_LAUNCH.get(cls)
    if direct is None:
        try:
            import inspect

            direct = _LAUNCHER_CALL in " ".join(inspect.getsource(cls.__call__).split())
        except Exception:  # noqa: BLE001 - any surprise: through run
            direct = False
        _C_LAUNCH[cls] = direct
    if direct and not run.global_scratch_size and not run.profile_scratch_size:
        head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None)
        return run.launch, head + (compiled.packed_metadata, None, None, None)
    return run, (compiled.function, compiled.packed_metadata, None, None, None)


def _fast_key(device: torch.device) -> bool:
    return FAST_LAUNCH.get(device.type, False) and _fast_protocol()


def _no_launch_hooks(runtime: Any) -> bool:
    """No profiler hooks on launches (else the JIT path runs them)."""
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


def _launch(
    kernel: Any, grid: tuple[int, int], args: tuple[Any, ...], num_warps: int, key: tuple[Any, ...] | None
) -> None:
    """``kernel[grid](*args, num_warps=num_warps)``; ``args``: every parameter in order,
    constexprs included. With a ``key`` (see ``FAST_LAUNCH``) a kernel compiled for that key
    is launched directly."""
    if key is not None:
        launcher = _LAUNCHED.get(key)
        if launcher is not None and _no_launch_hooks(_kernels().RUNTIME_KNOBS):
            raw = [a.data_ptr() if isinstance(a, Tensor) else a for a in args]
            launcher[0](grid[0], grid[1], 1, _raw_stream(key[1]), *launcher[1], *raw)
            return
    compiled = kernel[grid](*args, num_warps=num_warps)
    if key is not None and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
        if len(_LAUNCHED) >= 4096:
            _LAUNCHED.clear()
        _LAUNCHED[key] = _launcher(compiled)


def _device_guard(device: torch.device) -> Any:
    if device.type == "cuda" and device.index != torch.cuda.current_device():
        return torch.cuda.device(device)
    return nullcontext()


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _check_targets(target: Tensor, vocab: int, ignore_idx: int) -> None:
    target = target.long()  # compare integer values, not ignore_idx cast to a narrow dtype
    bad = (target != ignore_idx) & ((target < 0) | (target >= vocab))
    if bool(bad.any()):
        first = target[bad][0].item()
        raise ValueError(
            f"target holds {int(bad.sum())} value(s) outside [0, {vocab}) that are not "
            f"ignore_idx={ignore_idx}, e.g. {first}"
        )


# ---------------------------------------------------------------------------- PyTorch path


def _torch_partials(inp: Tensor, target: Tensor, eps: float, ignore_idx: int, offset: int) -> Tensor:
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


def _torch_finalize(
    part: Tensor, target: Tensor, vocab: int, eps: float, ignore_idx: int
) -> tuple[Tensor, Tensor]:
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


def _torch_forward(
    inp: Tensor, target: Tensor, eps: float, ignore_idx: int, shard: _Shard | None
) -> tuple[Tensor, Tensor]:
    offset, total = (0, inp.shape[-1]) if shard is None else (shard.offset, shard.total)
    part = _torch_partials(inp, target, eps, ignore_idx, offset)
    if shard is not None:
        part = _gather_partials(part, shard)
    return _torch_finalize(part, target, total, eps, ignore_idx)


def _torch_backward(
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


# ----------------------------------------------------------------------------- Triton path


def _triton_forward(
    inp: Tensor,
    target: Tensor,
    eps: float,
    ignore_idx: int,
    shard: _Shard | None,
    reduce_loss: bool = False,
    cfg: _Launch | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Loss (per row ``(D0, D1)``, or the 0-d mean with ``reduce_loss``), lse per row, and
    ``1/max(count, 1)`` (0-d; ``None`` without ``reduce_loss``).

    One launch on devices with ``LAST_PROGRAM_TAIL`` (no group); otherwise the forward
    kernel, then the finalize kernel for split rows (after the partials are gathered across
    the group) and the mean kernel.
    """
    d0, d1, vocab = inp.shape
    n_rows = d0 * d1
    device = inp.device
    if cfg is None:
        cfg = _cached_config(n_rows, vocab, device, None if shard is None else shard.largest)
    f32 = torch.float32
    loss = torch.empty((d0, d1), dtype=f32, device=device)
    lse = torch.empty(n_rows, dtype=f32, device=device)
    fused = cfg.splits == 1 and shard is None
    tail = shard is None and (reduce_loss or not fused) and LAST_PROGRAM_TAIL.get(device.type, False)
    part = loss if fused else torch.empty((cfg.splits, 4, n_rows), dtype=f32, device=device)
    if tail and reduce_loss:
        mean = torch.empty((), dtype=f32, device=device)
        inv_count = torch.empty((), dtype=f32, device=device)
    else:
        mean = inv_count = lse  # not written
    offset, total = (0, vocab) if shard is None else (shard.offset, shard.total)
    smooth = eps > 0.0
    x_strides, t_strides = inp.stride(), target.stride()
    args = (
        inp, *x_strides, target, *t_strides, loss, lse, part, mean, inv_count,
        _sync_counter(device) if tail else lse,
        n_rows, d1, vocab, offset, total, cfg.chunk, cfg.splits, cfg.row_programs, eps, ignore_idx,
        cfg.block, x_strides[2] == 1, fused, smooth, tail, tail and reduce_loss, _TAIL_BLOCK,
    )  # fmt: skip
    key = None
    if _fast_key(device):  # the buffers allocated above are aligned; the caller's may not be
        key = ("fwd", device.index, cfg, fused, tail, reduce_loss, smooth, inp.dtype, x_strides,
               inp.data_ptr() & 15, target.dtype, t_strides, target.data_ptr() & 15, n_rows, d1, vocab,
               offset, total, ignore_idx)  # fmt: skip
    with _device_guard(device):
        _launch(_kernels().ce_forward_kernel, (cfg.row_programs, cfg.splits), args, cfg.fwd_warps, key)
        if not fused and not tail:
            if shard is not None:
                part = _gather_partials(part, shard)
            block_r = 128
            _kernels().ce_finalize_kernel[(math.ceil(n_rows / block_r),)](
                part,
                target,
                *target.stride(),
                loss,
                lse,
                n_rows,
                d1,
                part.shape[0],
                total,
                eps,
                ignore_idx,
                BLOCK_R=block_r,
            )
    if not reduce_loss:
        return loss, lse, None
    if not tail:
        mean, inv_count = _triton_mean(loss, target, ignore_idx)
    return mean, lse, inv_count


def _triton_backward(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    scale: Tensor | None,
    eps: float,
    ignore_idx: int,
    offset: int,
    total: int,
    out: Tensor,
    cfg: _Launch | None = None,
) -> Tensor:
    d0, d1, vocab = inp.shape
    n_rows = d0 * d1
    if cfg is None:
        cfg = _cached_config(n_rows, vocab, inp.device, None)
    go_strides = grad_loss.stride() if grad_loss.dim() == 2 else (0, 0)
    x_strides, g_strides, t_strides = inp.stride(), out.stride(), target.stride()
    has_scale = scale is not None
    args = (
        inp, *x_strides, out, *g_strides, target, *t_strides, lse, grad_loss, *go_strides,
        scale if has_scale else lse, n_rows, d1, vocab, offset, total, cfg.chunk, cfg.row_programs, eps,
        ignore_idx, cfg.block, has_scale, x_strides[2] == 1, g_strides[2] == 1,
    )  # fmt: skip
    device = inp.device
    key = None
    if _fast_key(device):  # every tensor may come from the caller (the custom op's backward)
        key = ("bwd", device.index, cfg, inp.dtype, x_strides, inp.data_ptr() & 15, out.dtype, g_strides,
               out.data_ptr() & 15, target.dtype, t_strides, target.data_ptr() & 15, lse.data_ptr() & 15,
               grad_loss.dtype, go_strides, grad_loss.data_ptr() & 15, has_scale,
               scale.dtype if has_scale else None, scale.data_ptr() & 15 if has_scale else None,
               n_rows, d1, vocab, offset, total, ignore_idx)  # fmt: skip
    with _device_guard(device):
        _launch(_kernels().ce_backward_kernel, (cfg.row_programs, cfg.splits), args, cfg.bwd_warps, key)
    return out


@cache
def _kernels() -> Any:
    """The kernel module, imported at the first Triton call (``import triton`` is slow)."""
    from . import cross_entropy_kernels

    return cross_entropy_kernels


# ------------------------------------------------------------------------ shared pieces


def _triton_mean(loss: Tensor, target: Tensor, ignore_idx: int) -> tuple[Tensor, Tensor]:
    mean = loss.new_empty(())
    inv_count = loss.new_empty(())
    with _device_guard(loss.device):
        _kernels().ce_mean_kernel[(1,)](
            loss,
            target,
            *target.stride(),
            mean,
            inv_count,
            loss.numel(),
            target.shape[1],
            ignore_idx,
            BLOCK_R=1024,
        )
    return mean, inv_count


def _forward(
    inp: Tensor,
    target: Tensor,
    eps: float,
    reduce_loss: bool,
    ignore_idx: int,
    shard: _Shard | None = None,
    triton_path: bool | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Loss (per token ``(D0, D1)`` or the 0-d mean), per-row lse, and 1/n_valid (0-d;
    ``None`` when not reducing).

    With a ``shard`` the loss and lse are those of the whole vocabulary, on every rank.
    ``triton_path``: the path (default: :func:`_route`).
    """
    if _switch(CE_CHECK) and not _capturing(inp.device):
        _check_targets(target, inp.shape[-1] if shard is None else shard.total, ignore_idx)
    if triton_path is None:
        triton_path = _route(inp, shard)
    if triton_path:
        return _triton_forward(inp, target, eps, ignore_idx, shard, reduce_loss)
    d0, d1, _ = inp.shape
    if target.dtype != torch.int64:
        target = target.long()  # once for the PyTorch path's comparisons (the kernels widen)
    if inp.numel() > 0:
        loss, lse = _torch_forward(inp, target, eps, ignore_idx, shard)
    else:
        loss = torch.zeros((d0 * d1,), dtype=torch.float32, device=inp.device)
        lse = torch.zeros((d0 * d1,), dtype=torch.float32, device=inp.device)
    if not reduce_loss:
        return loss.view(d0, d1), lse, None
    inv_count = 1.0 / (target != ignore_idx).sum().clamp(min=1).to(torch.float32)  # widened above
    return loss.sum() * inv_count, lse, inv_count


def _route(inp: Tensor, shard: _Shard | None) -> bool:
    """Triton path? Sharded: decided by the group's largest slice, the same on every rank
    (the slice sizes were exchanged once, at the group's first call), so all ranks gather
    partials of one shape."""
    return inp.numel() > 0 and use_triton(inp, None if shard is None else shard.largest)


def _backward(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor | None,
    eps: float,
    ignore_idx: int,
    out: Tensor | None,
    offset: int = 0,
    total: int | None = None,
    triton_path: bool | None = None,
) -> Tensor:
    """Gradient of the loss w.r.t. ``inp``; written into ``out`` when given.

    ``inp`` may be the slice starting at ``offset`` of a ``total``-entry vocabulary (default:
    the whole one); ``lse`` is the whole vocabulary's, so nothing is exchanged.
    ``triton_path``: the path (default: :func:`use_triton`; the forward's choice from autograd).
    """
    total = inp.shape[-1] if total is None else total
    scale = inv_count if inv_count is not None and inv_count.dim() == 0 else None
    if inp.numel() == 0:
        return torch.zeros_like(inp) if out is None else out
    if use_triton(inp) if triton_path is None else triton_path:
        return _triton_backward(
            grad_loss,
            inp,
            target,
            lse,
            scale,
            eps,
            ignore_idx,
            offset,
            total,
            torch.empty_like(inp) if out is None else out,
        )
    grad = _torch_backward(grad_loss, inp, target, lse, scale, eps, ignore_idx, offset, total)
    return grad if out is None else out.copy_(grad)


# ------------------------------------------------------------------------- custom ops


@torch.library.custom_op("npu_fixes::cross_entropy_fwd", mutates_args=())
def _ce_fwd(
    inp: Tensor, target: Tensor, label_smoothing: float, reduce_loss: bool, ignore_idx: int
) -> tuple[Tensor, Tensor, Tensor]:
    loss, lse, inv_count = _forward(inp, target, label_smoothing, reduce_loss, ignore_idx)
    return loss, lse, loss.new_empty((0,)) if inv_count is None else inv_count


@_ce_fwd.register_fake
def _ce_fwd_fake(
    inp: Tensor, target: Tensor, label_smoothing: float, reduce_loss: bool, ignore_idx: int
) -> tuple[Tensor, Tensor, Tensor]:
    d0, d1, _ = inp.shape
    f32 = {"dtype": torch.float32, "device": inp.device}
    lse = torch.empty((d0 * d1,), **f32)
    if reduce_loss:
        return torch.empty((), **f32), lse, torch.empty((), **f32)
    return torch.empty((d0, d1), **f32), lse, torch.empty((0,), **f32)


@torch.library.custom_op("npu_fixes::cross_entropy_bwd", mutates_args=())
def _ce_bwd(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor,
    label_smoothing: float,
    ignore_idx: int,
) -> Tensor:
    return _backward(grad_loss, inp, target, lse, inv_count, label_smoothing, ignore_idx, None)


@_ce_bwd.register_fake
def _ce_bwd_fake(
    grad_loss: Tensor,
    inp: Tensor,
    target: Tensor,
    lse: Tensor,
    inv_count: Tensor,
    label_smoothing: float,
    ignore_idx: int,
) -> Tensor:
    return torch.empty_like(inp)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor, Tensor]) -> None:
    inp, target, label_smoothing, _, ignore_idx = inputs
    _, lse, inv_count = output
    ctx.save_for_backward(inp, target, lse, inv_count)
    ctx.label_smoothing = label_smoothing
    ctx.ignore_idx = ignore_idx
    ctx.mark_non_differentiable(lse, inv_count)


def _ce_fwd_backward(
    ctx: Any, grad_loss: Tensor, _grad_lse: Any, _grad_inv: Any
) -> tuple[Tensor, None, None, None, None]:
    inp, target, lse, inv_count = ctx.saved_tensors
    grad = _ce_bwd(grad_loss, inp, target, lse, inv_count, ctx.label_smoothing, ctx.ignore_idx)
    return grad, None, None, None, None


_ce_fwd.register_autograd(_ce_fwd_backward, setup_context=_setup_context)

_DOUBLE_BACKWARD = (
    "parallel_cross_entropy: double backward is not supported (its backward is not itself "
    "differentiable); use torch.nn.functional.cross_entropy for second derivatives"
)


def _no_setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    pass


def _ce_bwd_backward(ctx: Any, grad: Tensor) -> None:
    raise RuntimeError(_DOUBLE_BACKWARD)


_ce_bwd.register_autograd(_ce_bwd_backward, setup_context=_no_setup)


class _NoDoubleBackward(torch.autograd.Function):
    """Identity on a gradient built with ``create_graph=True``, tied to the tensors it came
    from (``sources``): differentiating it raises instead of giving a wrong second derivative
    or autograd's "does not require grad"."""

    @staticmethod
    def forward(ctx: Any, grad: Tensor, *sources: Tensor) -> Tensor:
        return grad

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[None, ...]:
        raise RuntimeError(_DOUBLE_BACKWARD)


# ------------------------------------------------------- eager fast path (CUDA, one device)
#
# An eager call on a CUDA tensor is host-bound below some 10-30M logits, so each microsecond of
# host time per call counts there. Per input signature (shapes, strides, dtypes, address bits
# of the caller's tensors, arguments and tunables) a plan holds the launch configuration, the
# workspace layout and the compiled kernels; a call then does one allocation (lse, loss rows,
# split partials, mean and 1/count share one fp32 workspace) and one direct launch per
# direction. The first call of a signature launches through Triton's JIT with the very same
# arguments (tensor views where the direct launch passes addresses) and keeps the compiled
# kernel. Anything else (CPU/NPU, CUDA graph capture, NPU_FIXES_CE_CHECK=1, routing to
# PyTorch, another current device, launch hooks, no FAST_LAUNCH) takes the general path.

_cuda_get_device = getattr(torch._C, "_cuda_getDevice", None)
_capturing_now = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)
_COUNTER_PTRS: dict[tuple[int, int], int] = {}  # (device, stream) -> address of _SYNC's counter


class _Plan:
    """What an eager forward+backward of one input signature needs, computed once."""

    __slots__ = ("bwd", "cfg", "fused", "fwd", "grid", "inv", "lse", "loss", "numel", "out_like", "part",
                 "rest", "reduce", "bwd_rest", "tail", "n_rows", "shape", "ws_like", "x_strides", "t_strides",
                 "vocab")


def _plan(inp: Tensor, n_rows: int, vocab: int, x_strides: tuple[int, ...], t_strides: tuple[int, ...],
          eps: float, reduce_loss: bool, ignore_idx: int, force: bool | None) -> _Plan | None:
    """A new plan, or ``None`` where the general path must run (PyTorch route, no last-program
    tail: several launches)."""
    kind = inp.device.type
    if n_rows * vocab == 0 or (force is None and not _default_route(kind, vocab, n_rows)):
        return None
    cfg = _cached_config(n_rows, vocab, inp.device, None)
    fused = cfg.splits == 1
    tail = reduce_loss or not fused
    if tail and not LAST_PROGRAM_TAIL.get(kind, False):
        return None
    p = _Plan()
    p.cfg, p.fused, p.tail, p.reduce, p.n_rows, p.vocab = cfg, fused, tail, reduce_loss, n_rows, vocab
    p.shape, p.x_strides, p.t_strides = tuple(inp.shape), x_strides, t_strides
    p.grid = (cfg.row_programs, cfg.splits)
    rows = (n_rows + 3) // 4 * 4  # every piece starts 16-byte aligned, as the JIT saw it
    off = 0
    p.loss = None  # the per-token loss has its own tensor (it is returned)
    if reduce_loss:
        p.loss, off = 0, rows
    p.lse, off = off, off + rows
    p.part = p.loss if fused else off
    if not fused:
        off += 4 * cfg.splits * rows  # (S, 4, N) with N padded: the kernel's stride is N, within it
    p.inv = off if reduce_loss else p.lse
    p.numel = off + 4 if reduce_loss else off
    # What to allocate the workspace and the loss like: one fp32 element expanded to the plan's
    # sizes (reshaped where that is one element: an expanded one keeps its 0 strides), so that
    # ``torch.empty_like``, cheaper to call than ``new_empty`` with a dtype, gives contiguous
    # tensors on the input's device.
    one = torch.empty((), dtype=torch.float32, device=inp.device)
    p.ws_like, p.out_like = (
        one.reshape(shape) if math.prod(shape) == 1 else one.expand(shape)
        for shape in ((p.numel,), () if reduce_loss else p.shape[:2])
    )
    p.rest = (n_rows, p.shape[1], vocab, 0, vocab, cfg.chunk, cfg.splits, cfg.row_programs, eps, ignore_idx,
              cfg.block, x_strides[2] == 1, fused, eps > 0.0, tail, reduce_loss, _TAIL_BLOCK)  # fmt: skip
    p.bwd_rest = (n_rows, p.shape[1], vocab, 0, vocab, cfg.chunk, cfg.row_programs, eps, ignore_idx,
                  cfg.block, reduce_loss, x_strides[2] == 1)  # fmt: skip
    p.fwd = None
    p.bwd = {}
    return p


_PLANS: dict[tuple[Any, ...], _Plan | None] = {}


def _counter_ptr(device: torch.device, index: int, stream: int) -> int:
    ptr = _COUNTER_PTRS.get((index, stream))
    if ptr is None:
        ptr = _COUNTER_PTRS[(index, stream)] = _sync_counter(device).data_ptr()
    return ptr


def _fast_forward(ctx: Any, inp: Tensor, target: Tensor, eps: float, reduce_loss: bool,
                  ignore_idx: int) -> Tensor | None:
    """The eager forward through a plan; ``None``: take the general path."""
    device = inp.device
    kind = "cuda" if inp.is_cuda else device.type
    if not FAST_LAUNCH.get(kind, False):
        return None
    force = _switch(switches.CE_FORCE_TRITON)
    if force is False or _switch(CE_CHECK):
        return None
    index = device.index
    stream = None
    if kind == "cuda":
        if _cuda_get_device() != index or _capturing_now() or not _fast_protocol():
            return None
        stream = _raw_stream(index)
    x_strides, t_strides = inp.stride(), target.stride()
    key = (inp.shape, x_strides, inp.dtype, inp.data_ptr() & 15, t_strides, target.dtype,
           target.data_ptr() & 15, eps, reduce_loss, ignore_idx, kind, index, force, _WAVES,
           MAX_FUSED_BLOCK.get(kind), _CUDA_WARPS["fwd"], _CUDA_WARPS["bwd"],
           LAST_PROGRAM_TAIL.get(kind))  # fmt: skip
    try:
        plan = _PLANS[key]
    except KeyError:
        d0, d1, vocab = inp.shape
        plan = _plan(inp, d0 * d1, vocab, x_strides, t_strides, eps, reduce_loss, ignore_idx, force)
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    if plan is None:
        return None
    # The loss is returned: its own tensor (not a view of the saved workspace, which an in-place
    # change of the loss would then invalidate for the backward).
    ws = torch.empty_like(plan.ws_like)
    out = torch.empty_like(plan.out_like)
    launcher = plan.fwd
    if launcher is not None and _no_launch_hooks(_kernels().RUNTIME_KNOBS):
        w, o = ws.data_ptr(), out.data_ptr()
        loss_ptr, lse_ptr = (w, w + 4 * plan.lse) if reduce_loss else (o, w)
        launcher[0](
            plan.grid[0], plan.grid[1], 1, stream, *launcher[1], inp.data_ptr(), *x_strides,
            target.data_ptr(), *t_strides, loss_ptr, lse_ptr, loss_ptr if plan.fused else w + 4 * plan.part,
            o if reduce_loss else lse_ptr, w + 4 * plan.inv,
            _counter_ptr(device, index, stream) if plan.tail else lse_ptr, *plan.rest,
        )  # fmt: skip
    else:  # first call of this signature (or launch hooks): through the JIT, views for addresses
        loss_t = ws[plan.loss:] if reduce_loss else out
        lse_t = ws[plan.lse:]
        compiled = _kernels().ce_forward_kernel[plan.grid](
            inp, *x_strides, target, *t_strides, loss_t, lse_t, loss_t if plan.fused else ws[plan.part:],
            out if reduce_loss else lse_t, ws[plan.inv:], _sync_counter(device) if plan.tail else lse_t,
            *plan.rest, num_warps=plan.cfg.fwd_warps,
        )  # fmt: skip
        if plan.fwd is None and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
            plan.fwd = _launcher(compiled)
    ctx.save_for_backward(inp, target, ws)
    ctx.plan = plan
    return out


def _fast_backward(ctx: Any, plan: _Plan, grad_loss: Tensor) -> Tensor:
    """The eager backward of a forward that took ``_fast_forward`` (no create_graph)."""
    inp, target, ws = ctx.saved_tensors
    inplace_grad = ctx.opts[3]
    grad = inp.detach() if inplace_grad else torch.empty_like(inp)
    go_strides = grad_loss.stride() if grad_loss.dim() == 2 else (0, 0)
    g_strides = grad.stride()
    index = inp.device.index
    key = (grad_loss.dtype, go_strides, grad_loss.data_ptr() & 15, g_strides, grad.data_ptr() & 15, index)
    launcher = plan.bwd.get(key)
    x_strides, t_strides = plan.x_strides, plan.t_strides
    if launcher is not None and _cuda_get_device() == index and _no_launch_hooks(_kernels().RUNTIME_KNOBS):
        # (a compiled kernel: CUDA)
        w = ws.data_ptr()
        launcher[0](
            plan.grid[0], plan.grid[1], 1, _raw_stream(index), *launcher[1], inp.data_ptr(), *x_strides,
            grad.data_ptr(), *g_strides, target.data_ptr(), *t_strides, w + 4 * plan.lse,
            grad_loss.data_ptr(), *go_strides, w + 4 * plan.inv, *plan.bwd_rest, g_strides[2] == 1,
        )  # fmt: skip
    else:
        with _device_guard(inp.device):
            compiled = _kernels().ce_backward_kernel[plan.grid](
                inp, *x_strides, grad, *g_strides, target, *t_strides, ws[plan.lse:], grad_loss, *go_strides,
                ws[plan.inv:], *plan.bwd_rest, g_strides[2] == 1, num_warps=plan.cfg.bwd_warps,
            )  # fmt: skip
        if key not in plan.bwd and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
            plan.bwd[key] = _launcher(compiled)
    if inplace_grad:
        torch.autograd.graph.increment_version(grad)
    return grad


def _saved_for_general_backward(ctx: Any) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """``(inp, target, lse, inv_count)`` of a forward that took ``_fast_forward``."""
    inp, target, ws = ctx.saved_tensors
    plan = ctx.plan
    lse = ws[plan.lse : plan.lse + plan.n_rows]
    return inp, target, lse, ws[plan.inv] if plan.reduce else None


class _CrossEntropyFunction(torch.autograd.Function):
    """Eager autograd (cheaper to dispatch than the custom op); same forward and backward.
    ``opts``: ``(label_smoothing, reduce_loss, ignore_idx, inplace_grad, shard)``, one argument
    rather than five (each argument costs ``apply`` host time)."""

    @staticmethod
    def forward(ctx: Any, inp: Tensor, target: Tensor, opts: tuple[Any, ...]) -> Tensor:
        ctx.opts = opts
        label_smoothing, reduce_loss, ignore_idx, inplace_grad, shard = opts
        if shard is None:
            loss = _fast_forward(ctx, inp, target, label_smoothing, reduce_loss, ignore_idx)
            if loss is not None:
                return loss
        ctx.plan = None
        ctx.triton_path = triton_path = _route(inp, shard)  # the backward takes the forward's path
        loss, lse, inv_count = _forward(
            inp, target, label_smoothing, reduce_loss, ignore_idx, shard, triton_path
        )
        # With inplace_grad, saving inp lets autograd's version check reject a second
        # backward (inp then holds the gradient) instead of reading overwritten logits.
        ctx.save_for_backward(inp, target, lse, inv_count)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor | None, None, None]:
        plan = ctx.plan
        create_graph = torch.is_grad_enabled()  # only under backward(create_graph=True)
        if plan is not None:
            if not create_graph:
                return _fast_backward(ctx, plan, grad_loss), None, None
            inp, target, lse, inv_count = _saved_for_general_backward(ctx)
            triton_path = True
        else:
            inp, target, lse, inv_count = ctx.saved_tensors
            triton_path = ctx.triton_path
        eps, _, ignore_idx, inplace_grad, shard = ctx.opts
        offset, total = (0, None) if shard is None else (shard.offset, shard.total)
        out = inp.detach() if inplace_grad else None
        with torch.no_grad() if create_graph else nullcontext():
            grad = _backward(
                grad_loss, inp, target, lse, inv_count, eps, ignore_idx, out, offset, total, triton_path
            )
        if out is not None:
            torch.autograd.graph.increment_version(out)
        if create_graph:
            grad = _NoDoubleBackward.apply(grad, inp, grad_loss)
        return grad, None, None


def _apply(inp: Tensor, target: Tensor, opts: tuple[Any, ...]) -> Tensor:
    """``_CrossEntropyFunction.apply``, without the Python wrapper's own work where functorch
    transforms are off (it binds defaults for ``setup_context`` style functions, which this is
    not, and unwraps dead functorch wrappers, which a tensor only is inside a transform)."""
    if torch._C._are_functorch_transforms_active():
        return _CrossEntropyFunction.apply(inp, target, opts)
    return _c_apply(inp, target, opts)


def _eager_cross_entropy(
    inp: Tensor,
    target: Tensor,
    label_smoothing: float,
    reduce_loss: bool,
    ignore_idx: int,
    inplace_grad: bool,
    group: Any,
) -> Tensor:
    shard = _shard(group, inp.shape[-1], inp.device)
    return _apply(inp, target, (label_smoothing, reduce_loss, ignore_idx, inplace_grad, shard))


_c_apply = super(torch.autograd.Function, _CrossEntropyFunction).apply  # the C++ apply


# Under torch.compile: a graph break for what the custom ops cannot express (collectives on a
# process group object, writing the gradient into the input).
_graph_break_cross_entropy = torch.compiler.disable(_eager_cross_entropy)


# ------------------------------------------------------------------------- public API


def _validate(inp: Any, target: Any, label_smoothing: float) -> None:
    if not isinstance(inp, Tensor) or not isinstance(target, Tensor):
        if inp is None or target is None:
            missing = "inp" if inp is None else "target"
            raise TypeError(f"parallel_cross_entropy() missing required argument: {missing!r}")
        raise TypeError(
            f"inp and target must be tensors, got {type(inp).__name__} and {type(target).__name__}"
        )
    if inp.dim() != 3:
        raise ValueError(f"inp must be 3-D (B, SQ, V) or (SQ, B, V), got shape {tuple(inp.shape)}")
    if inp.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"inp dtype must be float32, bfloat16 or float16, got {inp.dtype}")
    if target.dtype not in _TARGET_DTYPES:
        raise TypeError(
            f"target must hold integer class indices (int64, int32, int16, int8 or uint8), "
            f"got dtype {target.dtype}"
        )
    if target.shape != inp.shape[:2]:
        raise ValueError(
            f"target shape {tuple(target.shape)} must equal inp.shape[:2] = {tuple(inp.shape[:2])} "
            f"(inp shape {tuple(inp.shape)})"
        )
    if target.device != inp.device:
        raise ValueError(f"inp is on {inp.device} but target is on {target.device}")
    if inp.shape[2] == 0 and inp.shape[0] * inp.shape[1] > 0:
        raise ValueError(f"inp has an empty vocabulary dimension: shape {tuple(inp.shape)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}")


def _check_group(group: Any) -> None:
    if _PROCESS_GROUP is None or not isinstance(group, _PROCESS_GROUP):
        raise TypeError(
            "dist_process_group must be None or a torch.distributed.ProcessGroup, got "
            f"{type(group).__name__} {group!r}"
        )


def _may_overlap(t: Tensor) -> bool:
    """Whether elements of ``t`` may share memory: a stride 0 on a dimension of size > 1,
    or strides that do not nest (each larger than the span of the smaller ones). False
    positives only for interleaved layouts that logits do not have."""
    reach = 0  # offset span of the dimensions with smaller strides
    for stride, size in sorted(zip(t.stride(), t.shape, strict=True)):
        if size > 1:
            if stride <= reach:  # stride 0 included
                return True
            reach += stride * (size - 1)
    return False


def _take_deprecated_input(inp: Tensor | None, _input: Tensor) -> Tensor:
    if inp is not None:
        raise TypeError("parallel_cross_entropy() got both 'inp' and its deprecated name '_input'")
    warnings.warn(
        "parallel_cross_entropy: the '_input' keyword is deprecated, pass 'inp' instead",
        FutureWarning,
        stacklevel=3,
    )
    return _input


def parallel_cross_entropy(
    inp: Tensor | None = None,
    target: Tensor | None = None,
    label_smoothing: float = 0.0,
    reduce_loss: bool = False,
    dist_process_group: Any = None,
    ignore_idx: int = -100,
    is_cg_capturable: bool = False,
    *,
    inplace_grad: bool = False,
    _input: Tensor | None = None,
) -> Tensor:
    """Cross entropy of logits ``inp`` against class indices ``target``, in fp32.

    Args:
        inp: logits ``(B, SQ, V)`` or ``(SQ, B, V)``, float32/bfloat16/float16, any strides.
        target: class indices of shape ``inp.shape[:2]``, any strides; ``ignore_idx``
            marks tokens that give loss 0 and a zero gradient. Dtype int64, int32, int16,
            int8 or uint8: every value means its integer value (it is widened to int64
            before any comparison, so a uint8 label 156 is class 156, never ``-100``
            wrapped around; an ``ignore_idx`` the dtype cannot hold ignores nothing).
            Other dtypes (floating point, bool, complex, uint16/32/64) raise ``TypeError``.
        label_smoothing: ``eps`` as in ``torch.nn.functional.cross_entropy``.
        reduce_loss: return the mean over non-ignored tokens (0-d; 0 when all are ignored)
            instead of the per-token loss of shape ``inp.shape[:2]``. The count stays on
            the device: no host sync in forward or backward.
        dist_process_group: vocabulary-parallel group: each rank passes its contiguous slice
            of the vocabulary as ``inp`` (slices may differ in size; rank order = slice
            order) and the same global ``target``. Every rank gets the loss of the whole
            vocabulary and the gradient of its slice. Per call: one all-gather of 16 bytes
            per token (and chunk, when rows are few); a group's first call also all-gathers
            the slice sizes (one host sync), which then stay fixed for that group. All ranks
            take the same path (Triton or PyTorch), the one their group's largest slice gets,
            so no further exchange is needed to agree on it. ``None`` or a one-rank group:
            single device; anything but ``None`` or a ``torch.distributed.ProcessGroup``
            raises ``TypeError``.
        ignore_idx: target value to skip.
        is_cg_capturable: accepted for Transformer Engine compatibility. Every call is CUDA
            graph capturable: nothing syncs with the host (the optional
            ``NPU_FIXES_CE_CHECK=1`` check is skipped during capture), except a group's
            first call, which a capture's warm-up makes.
        inplace_grad: write the gradient into ``inp``'s storage during backward, so no
            logits-sized buffer is allocated. Trade-off: the logits are destroyed by the
            backward, a second backward through the graph (``retain_graph``) raises, and the
            call is a graph break under ``torch.compile``. Default ``False`` keeps ``inp``
            intact and returns a fresh gradient tensor (extra memory: 8 bytes per token).
            An ``inp`` whose elements share memory (an ``expand()``-ed tensor, any stride 0)
            raises ``ValueError``: there is no room for a gradient in it.
        _input: deprecated name of ``inp`` (as in Transformer Engine); ``FutureWarning``.

    Softmax, loss and gradient are computed in fp32; the gradient
    ``(softmax - (1-eps)*onehot - eps/V) * grad_output`` is rounded once to ``inp.dtype``.
    A target outside ``[0, V)`` that is not ``ignore_idx`` gives NaN for its loss and
    gradient (never an out-of-bounds read); ``NPU_FIXES_CE_CHECK=1`` raises instead.
    Eager calls go through a plain ``autograd.Function`` (on CUDA: one kernel launch per
    direction, launched directly from a plan cached per input signature); under
    ``torch.compile`` the same kernels run as custom ops ``npu_fixes::cross_entropy_fwd/bwd``
    (no graph break, except with ``inplace_grad=True`` or a ``dist_process_group``). First derivatives
    only: differentiating the gradient (double backward) raises ``RuntimeError``.
    """
    del is_cg_capturable  # no host syncs after a group's first call: every call may be captured
    if _input is not None:
        inp = _take_deprecated_input(inp, _input)
    _validate(inp, target, label_smoothing)
    if dist_process_group is not None:
        _check_group(dist_process_group)
    if inplace_grad and _may_overlap(inp):
        raise ValueError(
            "inplace_grad=True needs an inp whose elements do not share memory, got strides "
            f"{inp.stride()} for shape {tuple(inp.shape)} (an expand()-ed or stride-0 tensor?); "
            "pass inplace_grad=False or inp.contiguous()"
        )
    eps, reduce_loss, ignore_idx = float(label_smoothing), bool(reduce_loss), int(ignore_idx)
    if not torch.compiler.is_compiling():
        if dist_process_group is None:  # the common case, without a further call
            return _apply(inp, target, (eps, reduce_loss, ignore_idx, inplace_grad, None))
        group = dist_process_group
        return _eager_cross_entropy(inp, target, eps, reduce_loss, ignore_idx, inplace_grad, group)
    args = (inp, target, eps, reduce_loss, ignore_idx, inplace_grad, dist_process_group)
    if inplace_grad or dist_process_group is not None:
        return _graph_break_cross_entropy(*args)
    return _ce_fwd(inp, target, eps, reduce_loss, ignore_idx)[0]
