"""Vocabulary-parallel parallel_cross_entropy against the fp64 single-device reference.

Each rank holds a contiguous slice of the logits' vocabulary (even and uneven slices) and the
global targets. CPU: ranks of a gloo group, the Triton kernels in Triton's interpreter (one and
several chunks per row) and the PyTorch path. GPU (marked ``gpu``): 2 ranks over NCCL with the
default block sizes. One spawned group runs many cases; a failing case raises in its worker
with its label, and ``torch.multiprocessing`` re-raises it here.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from npu_fixes.ops import parallel_cross_entropy
from npu_fixes.ops.cross_entropy import launch_config, routing, torch_path, triton_path, tuning, use_triton
from npu_fixes.tools.interpret import interpreter_fast_paths
from tests.ops.test_cross_entropy import TOL, reference

# slice sizes per world size: even, uneven (a short slice gets empty trailing chunks)
SLICES = {2: [(150, 150), (100, 200)], 4: [(75, 75, 75, 75), (50, 130, 20, 100)]}
GPU_SLICES = [(16000, 16000), (12000, 20000)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Ranks are forked from a server that imported this module (torch, Triton, the kernels) once
#: per test process, rather than each being a fresh interpreter that imports them again.
mp.get_context("forkserver").set_forkserver_preload([__name__])


def _spawn(worker, world: int, *args) -> None:  # noqa: ANN001
    mp.start_processes(worker, args=(world, _free_port(), *args), nprocs=world, join=True,
                       start_method="forkserver")


def _init(backend: str, rank: int, world: int, port: int) -> None:
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def _targets(shape: tuple[int, int], slices: tuple[int, ...], high: int, device: str) -> torch.Tensor:
    """Random global targets below ``high``, a quarter ignored, and each slice's first and
    last index present."""
    t = torch.randint(0, high, shape, device=device)
    t[torch.rand(shape, device=device) < 0.25] = -100
    edges = list(itertools.chain.from_iterable((lo, lo + n - 1) for lo, n in zip(_offsets(slices), slices, strict=True)))
    edges = [e for e in edges if e < high]
    t.view(-1)[: len(edges)] = torch.tensor(edges, device=device)
    return t


def _offsets(slices: tuple[int, ...]) -> list[int]:
    return [sum(slices[:i]) for i in range(len(slices))]


def _run_case(
    label: str,
    group: dist.ProcessGroup,
    slices: tuple[int, ...],
    dtype: torch.dtype,
    eps: float,
    reduce_loss: bool,
    shape: tuple[int, int],
    device: str,
    seed: int,
    layout: str = "bsv",
    pad: int = 0,
    bad_targets: bool = False,
    ignore_idx: int = -100,
) -> None:
    """One case on this rank: loss equal on all ranks and to the reference, grad of the slice."""
    rank = dist.get_rank(group)
    total = sum(slices)
    lo, hi = _offsets(slices)[rank], _offsets(slices)[rank] + slices[rank]
    gen = torch.Generator(device=device).manual_seed(seed)
    full = torch.randn((*shape, total), generator=gen, device=device) * 3
    if pad:
        full[..., total - pad :] = float("-inf")  # padded vocabulary entries
    torch.manual_seed(seed)
    t = _targets(shape, slices, total - pad, device)
    if bad_targets:
        t[0, 1], t[1, 0] = total + 3, -5  # outside the global range: NaN rows
    if ignore_idx != -100:
        t[t == -100] = ignore_idx
    grad_out = torch.rand(() if reduce_loss else shape, generator=gen, device=device) + 0.5
    full = full.to(dtype)
    local = full[..., lo:hi] if layout == "bsv" else full.transpose(0, 1).contiguous()[..., lo:hi].transpose(0, 1)
    x = local.detach().clone().requires_grad_() if layout == "bsv" else local.detach().requires_grad_()
    loss = parallel_cross_entropy(x, t, eps, reduce_loss, group, ignore_idx)
    loss.backward(grad_out)

    gathered = [torch.empty_like(loss) for _ in slices]
    dist.all_gather(gathered, loss.detach().contiguous(), group=group)
    for other in gathered:
        assert torch.equal(other, loss.detach()) or (bad_targets and other.isnan().equal(loss.isnan())), label
    ignored = t == ignore_idx
    keep = torch.ones(shape, dtype=torch.bool, device=device)
    if bad_targets:
        keep[0, 1] = keep[1, 0] = False
        assert loss[~keep].isnan().all() and x.grad[~keep].isnan().all(), label
        t = torch.where(keep, t, ignore_idx)  # the reference has no NaN rows
    ref_loss, ref_grad = reference(full, t, eps, reduce_loss, ignore_idx, grad_out)
    try:
        got = loss.detach() if reduce_loss else loss.detach()[keep]
        want = ref_loss if reduce_loss else ref_loss[keep.cpu()]
        torch.testing.assert_close(got.cpu().double(), want, **TOL[torch.float32])
        torch.testing.assert_close(
            x.grad[keep].cpu().double(), ref_grad[..., lo:hi][keep.cpu()], **TOL[dtype]
        )
    except AssertionError as exc:
        raise AssertionError(f"rank {rank}, case {label}: {exc}") from None
    assert x.grad.dtype == dtype and (x.grad[ignored] == 0).all(), label


def _cases(world: int) -> Iterator[tuple[str, tuple[int, ...], dict]]:
    seed = 0
    for slices in SLICES[world]:
        for path, eps, reduce_loss in itertools.product(("triton", "triton-split", "torch"), (0.0, 0.1), (False, True)):
            seed += 1
            yield path, slices, dict(dtype=torch.float32, eps=eps, reduce_loss=reduce_loss, shape=(3, 4),
                                     seed=seed, pad=0 if eps else slices[-1] if reduce_loss else 7)
        for path in ("triton-split", "torch"):
            seed += 1
            yield path, slices, dict(dtype=torch.bfloat16, eps=0.1, reduce_loss=True, shape=(4, 3), seed=seed,
                                     layout="sbv")
            seed += 1
            yield path, slices, dict(dtype=torch.float32, eps=0.1, reduce_loss=False, shape=(2, 5), seed=seed,
                                     bad_targets=True, ignore_idx=7)


def _cpu_worker(rank: int, world: int, port: int) -> None:
    _init("gloo", rank, world, port)
    tuning.MAX_FUSED_BLOCK["cpu"] = 64  # several blocks per row, a partial last block
    with interpreter_fast_paths():  # as the test modules' own (tests/ops/conftest.py)
        for slices in SLICES[world]:
            group = dist.new_group(list(range(world)))  # a group's slice sizes are fixed
            for path, case_slices, kw in _cases(world):
                if case_slices != slices:
                    continue
                os.environ["NPU_FIXES_CE_FORCE_TRITON"] = "0" if path == "torch" else "1"
                tuning.WAVES = 1 << 20 if path == "triton-split" else 0  # one program per block / per row
                label = f"{path} slices={slices} {kw}"
                _run_case(label, group, slices, device="cpu", **kw)
            with pytest.raises(ValueError, match="slice sizes are fixed"):
                x = torch.zeros(1, 1, slices[rank] + 1)
                parallel_cross_entropy(x, torch.zeros(1, 1, dtype=torch.long), dist_process_group=group)
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_matches_single_device_on_gloo(world: int) -> None:
    _spawn(_cpu_worker, world)


def test_split_count_is_shared_by_uneven_slices() -> None:
    """Every rank launches the same number of chunks, so their partials stack."""
    for largest, vocabs in ((4000, (1000, 2500, 4000)), (131072, (1, 70000, 131072))):
        configs = [launch_config.launch_config(64, v, "cuda", 132, largest) for v in vocabs]
        assert len({c.splits for c in configs}) == 1
        assert all(c.chunk * c.splits >= v for c, v in zip(configs, vocabs, strict=True))
    config = launch_config.launch_config
    assert config(64, 131072, "cuda", 132, 131072) == config(64, 131072, "cuda", 132)


# Slices on either side of the NPU threshold: alone, rank 0 would take Triton, rank 1 PyTorch.
ROUTE_SLICES = [(tuning.NPU_MIN_TRITON_VOCAB, tuning.NPU_MIN_TRITON_VOCAB - 384),
                (tuning.NPU_MIN_TRITON_VOCAB - 1, tuning.NPU_MIN_TRITON_VOCAB - 4000)]


def _npu_routing_worker(rank: int, world: int, port: int) -> None:
    """CPU tensors routed by the NPU rule (nothing forced); every rank must take one path."""
    _init("gloo", rank, world, port)
    os.environ.pop("NPU_FIXES_CE_FORCE_TRITON", None)
    npu_rule = routing.default_route
    routing.default_route = lambda device_type, width, rows: npu_rule("npu", width, rows)
    taken: list[str] = []
    for module, path in ((triton_path, "triton"), (torch_path, "torch")):
        for fn in ("forward", "backward"):
            real = getattr(module, fn)
            setattr(module, fn, lambda *a, _real=real, _name=f"_{path}_{fn}": taken.append(_name) or _real(*a))
    for slices in ROUTE_SLICES:
        alone = [use_triton(torch.empty(2, 3, n)) for n in slices]
        assert alone == [slices[0] >= tuning.NPU_MIN_TRITON_VOCAB, False], alone
        path = "triton" if max(slices) >= tuning.NPU_MIN_TRITON_VOCAB else "torch"
        group = dist.new_group(list(range(world)))
        for seed, (eps, reduce_loss) in enumerate(((0.0, True), (0.1, False))):
            taken.clear()
            kw = dict(dtype=torch.float32, eps=eps, reduce_loss=reduce_loss, shape=(2, 3), seed=seed)
            label = f"npu routing slices={slices} {kw}"
            _run_case(label, group, slices, device="cpu", **kw)
            every: list[list[str]] = [[] for _ in range(world)]
            dist.all_gather_object(every, taken, group=group)
            assert every == [[f"_{path}_forward", f"_{path}_backward"]] * world, (label, every)
    dist.destroy_process_group()


def test_uneven_slices_across_npu_threshold_take_one_path() -> None:
    """Routing in a group follows its largest slice (known to every rank since the group's
    first call), not each rank's own width, so the ranks' partials have one shape."""
    _spawn(_npu_routing_worker, 2)


def _gpu_worker(rank: int, world: int, port: int) -> None:
    torch.cuda.set_device(rank)
    _init("nccl", rank, world, port)
    for slices in GPU_SLICES:
        group = dist.new_group(list(range(world)))
        cases = itertools.product(("triton", "torch"), (torch.float32, torch.bfloat16), (0.0, 0.1),
                                  ((2, 128), (1, 8)))
        for seed, (path, dtype, eps, shape) in enumerate(cases):
            os.environ["NPU_FIXES_CE_FORCE_TRITON"] = "0" if path == "torch" else "1"
            kw = dict(dtype=dtype, eps=eps, reduce_loss=seed % 2 == 0, shape=shape, seed=seed)
            _run_case(f"{path} slices={slices} {kw}", group, slices, device="cuda", **kw)
    dist.destroy_process_group()


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_matches_single_device_on_two_gpus_nccl() -> None:
    _spawn(_gpu_worker, 2)
