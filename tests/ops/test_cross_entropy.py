"""parallel_cross_entropy against an fp64 PyTorch reference.

Without a CUDA GPU the Triton kernels run in Triton's interpreter (see conftest.py), on small
shapes with small blocks so every row spans several blocks and a partial last block.
Tests marked ``gpu`` need CUDA.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from npu_fixes.ops import parallel_cross_entropy
from npu_fixes.ops.cross_entropy import (
    api,
    custom_ops,
    direct_launch,
    eager_plans,
    launch_config,
    routing,
    sharding,
    torch_path,
    triton_path,
    tuning,
    use_triton,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {
    torch.float32: {"rtol": 1.3e-6, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-5},
    torch.float16: {"rtol": 1e-3, "atol": 1e-5},
}
V = 300  # not a multiple of the 64-wide test block


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """64-wide blocks, one program per row, Triton forced (tests of routing override it)."""
    monkeypatch.setitem(tuning.MAX_FUSED_BLOCK, torch.device(DEVICE).type, 64)
    monkeypatch.setattr(tuning, "WAVES", 0)
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "1")
    monkeypatch.delenv("NPU_FIXES_CE_CHECK", raising=False)


def reference(
    x: torch.Tensor,
    target: torch.Tensor,
    eps: float,
    reduce_loss: bool,
    ignore_idx: int,
    grad_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fp64 loss and gradient with torch.nn.functional.cross_entropy."""
    x64 = x.detach().cpu().double().requires_grad_()
    t = target.cpu().long()
    loss = F.cross_entropy(
        x64.reshape(-1, x.shape[-1]),
        t.reshape(-1),
        label_smoothing=eps,
        ignore_index=ignore_idx,
        reduction="none",
    ).view(t.shape)
    if reduce_loss:
        loss = loss.sum() / max(int((t != ignore_idx).sum()), 1)
    g = torch.ones_like(loss) if grad_out is None else grad_out.detach().cpu().double()
    loss.backward(g)
    return loss.detach(), x64.grad


def make_inputs(
    dtype: torch.dtype,
    layout: str = "bsv",
    b: int = 3,
    sq: int = 4,
    vocab: int = V,
    ignore_frac: float = 0.25,
    ignore_idx: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits in layout ``bsv`` (contiguous) or ``sbv`` (a transposed (B, SQ, V) buffer)."""
    if layout == "bsv":
        x = torch.randn(b, sq, vocab, device=DEVICE) * 3
    else:
        x = (torch.randn(b, sq, vocab, device=DEVICE) * 3).transpose(0, 1)
    t = torch.randint(0, vocab, x.shape[:2], device=DEVICE)
    t[torch.rand(t.shape, device=DEVICE) < ignore_frac] = ignore_idx
    return x.to(dtype).requires_grad_(), t


def check(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert not torch.isnan(actual).any()
    torch.testing.assert_close(actual.cpu().double(), expected, **TOL[dtype])


@pytest.mark.parametrize("path", ["triton", "triton-split", "torch"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduce_loss", [False, True])
@pytest.mark.parametrize("layout", ["bsv", "sbv"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_fp64_reference(
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    eps: float,
    reduce_loss: bool,
    layout: str,
    dtype: torch.dtype,
) -> None:
    if path == "torch":
        monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    if path == "triton-split":
        monkeypatch.setattr(tuning, "WAVES", 1 << 20)  # one program per 64-wide block
    torch.manual_seed(0)
    x, t = make_inputs(dtype, layout)
    loss = parallel_cross_entropy(x, t, eps, reduce_loss)
    assert loss.dtype == torch.float32
    assert loss.shape == (() if reduce_loss else t.shape)
    grad_out = torch.rand_like(loss) + 0.5
    loss.backward(grad_out)
    ref_loss, ref_grad = reference(x, t, eps, reduce_loss, -100, grad_out)
    check(loss.detach(), ref_loss, torch.float32)
    assert x.grad.dtype == dtype and x.grad.shape == x.shape
    check(x.grad, ref_grad, dtype)
    ignored = t == -100
    if not reduce_loss:  # the mean has no per-token entries
        assert (loss.detach()[ignored] == 0).all()
    assert (x.grad[ignored] == 0).all()


class _NotLaunched:
    """Stands in for a kernel that must not be launched."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, grid: object) -> object:
        raise AssertionError(f"{self.name} launched: the forward should be one launch")


@pytest.fixture(params=["general", "fast"])
def one_launch_forward(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """The last-program tail on this device (CUDA's default) and no other forward kernel;
    through the general path or the eager fast path (plans, one workspace: on CPU its launches
    go through the JIT with the same arguments)."""
    kind = torch.device(DEVICE).type
    monkeypatch.setitem(tuning.LAST_PROGRAM_TAIL, kind, True)
    monkeypatch.setitem(tuning.FAST_LAUNCH, kind, request.param == "fast")
    kernels = direct_launch.load_kernels()
    for name in ("ce_finalize_kernel", "ce_mean_kernel"):
        monkeypatch.setattr(kernels, name, _NotLaunched(name))


@pytest.mark.usefixtures("one_launch_forward")
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduce_loss", [False, True])
@pytest.mark.parametrize(("layout", "dtype"), [("bsv", torch.float32), ("sbv", torch.bfloat16)])
def test_one_launch_forward_matches_fp64_reference(
    monkeypatch: pytest.MonkeyPatch, split: bool, eps: float, reduce_loss: bool, layout: str, dtype: torch.dtype
) -> None:
    """The forward's last program finalizes split rows and takes the mean; the counter it
    synchronizes on is zero again afterwards."""
    if split:
        monkeypatch.setattr(tuning, "WAVES", 1 << 20)  # one program per 64-wide block
    torch.manual_seed(30)
    x, t = make_inputs(dtype, layout, b=3, sq=5)
    loss = parallel_cross_entropy(x, t, eps, reduce_loss)
    grad_out = torch.rand_like(loss) + 0.5
    loss.backward(grad_out)
    ref_loss, ref_grad = reference(x, t, eps, reduce_loss, -100, grad_out)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad, ref_grad, dtype)
    if split or reduce_loss:
        assert all(int(c) == 0 for c in triton_path.SYNC_COUNTERS.values()) and triton_path.SYNC_COUNTERS
    again = parallel_cross_entropy(x.detach(), t, eps, reduce_loss)
    assert torch.equal(again, loss.detach())  # deterministic


@pytest.mark.usefixtures("one_launch_forward")
@pytest.mark.parametrize("split", [False, True])
def test_one_launch_forward_edge_rows(monkeypatch: pytest.MonkeyPatch, split: bool) -> None:
    """All rows ignored: mean 0 and zero gradient; an out-of-range target: NaN mean; uint8
    targets: the mean over the rows that are not ignored."""
    if split:
        monkeypatch.setattr(tuning, "WAVES", 1 << 20)
    x = torch.randn(2, 3, V, device=DEVICE, requires_grad=True)
    t = torch.full((2, 3), -1, device=DEVICE)
    loss = parallel_cross_entropy(x, t, 0.1, reduce_loss=True, ignore_idx=-1)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))
    t = torch.randint(0, V, (2, 3), device=DEVICE)
    t[1, 1] = V
    assert torch.isnan(parallel_cross_entropy(x.detach(), t, reduce_loss=True))
    t8 = torch.randint(0, 250, (2, 3), device=DEVICE, dtype=torch.uint8)
    t8[0, :2] = 255
    x.grad = None
    loss = parallel_cross_entropy(x, t8, reduce_loss=True, ignore_idx=255)
    loss.backward()
    ref_loss, ref_grad = reference(x, t8, 0.0, True, 255)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad, ref_grad, torch.float32)


@pytest.mark.usefixtures("one_launch_forward")
def test_autograd_behaviour_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """retain_graph, inplace_grad (and its second-backward error), create_graph (first
    derivative right, second raises), grad_output layouts, an in-place change of the loss."""
    torch.manual_seed(31)
    x, t = make_inputs(torch.float32)
    loss = parallel_cross_entropy(x, t, 0.1, reduce_loss=True)
    (g1,) = torch.autograd.grad(loss, x, retain_graph=True)
    (g2,) = torch.autograd.grad(loss, x)
    assert torch.equal(g1, g2)
    check(g1, reference(x, t, 0.1, True, -100)[1], torch.float32)
    loss = parallel_cross_entropy(x, t, 0.1)
    (g,) = torch.autograd.grad(loss.sum(), x, create_graph=True)
    check(g.detach(), reference(x, t, 0.1, False, -100)[1], torch.float32)
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        torch.autograd.grad(g.square().sum(), x)
    go = torch.rand(t.shape[1], t.shape[0], device=DEVICE).t()
    (g,) = torch.autograd.grad(parallel_cross_entropy(x, t), x, go)
    check(g, reference(x, t, 0.0, False, -100, go)[1], torch.float32)
    loss = parallel_cross_entropy(x, t, reduce_loss=True)
    loss.mul_(2.0)  # in place on the output: its own tensor, the backward is still right
    (g,) = torch.autograd.grad(loss, x)
    check(g, 2.0 * reference(x, t, 0.0, True, -100)[1], torch.float32)
    leaf = torch.randn(3, 4, V, device=DEVICE, requires_grad=True)
    logits = leaf * 1.0
    loss = parallel_cross_entropy(logits, t, reduce_loss=True, inplace_grad=True)
    grads: list[torch.Tensor] = []
    logits.register_hook(grads.append)
    loss.backward(retain_graph=True)
    check(grads[0], reference(leaf, t, 0.0, True, -100)[1], torch.float32)
    assert grads[0].data_ptr() == logits.data_ptr()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_split_config_covers_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuning, "WAVES", 4)
    monkeypatch.setitem(tuning.MAX_FUSED_BLOCK, "cpu", 64)
    cfg = launch_config.launch_config(12, V, "cpu", 64)
    assert cfg.splits > 1 and cfg.chunk % cfg.block == 0
    assert (cfg.splits - 1) * cfg.chunk < V <= cfg.splits * cfg.chunk


def test_strided_inputs_and_sliced_targets() -> None:
    """V not innermost, a sliced batch, and labels[:, 1:] style targets."""
    torch.manual_seed(1)
    base = torch.randn(V, 4, 7, device=DEVICE)  # (V, B, SQ+1) storage
    x = base.permute(1, 2, 0)[:, 1:, :].detach().requires_grad_()  # (4, 6, V), V stride 28
    labels = torch.randint(0, V, (4, 7), device=DEVICE)
    t = labels[:, 1:]
    assert not x.is_contiguous() and not t.is_contiguous() and x.stride(2) != 1
    loss = parallel_cross_entropy(x, t, 0.05)
    loss.sum().backward()
    ref_loss, ref_grad = reference(x, t, 0.05, False, -100)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad, ref_grad, torch.float32)


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_megatrons_call(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Megatron-core's 'te' call: logits ``[s, b, V]``, its ``[b, s]`` labels transposed,
    made contiguous and passed through ``torch.as_strided``, seven positional arguments with
    ``is_cg_capturable=True``, the loss transposed back to ``[b, s]``."""
    if path == "torch":
        monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    torch.manual_seed(3)
    x = (torch.randn(6, 3, V, device=DEVICE) * 3).requires_grad_()  # [s, b, V]
    labels = torch.randint(0, V, (3, 6), device=DEVICE)  # [b, s]
    labels[0, :2] = -100
    sb = labels.transpose(0, 1).contiguous()
    t = torch.as_strided(sb, sb.size(), (sb.size(1), 1))
    loss = parallel_cross_entropy(x, t, 0.0, False, None, -100, True).transpose(0, 1).contiguous()
    assert loss.shape == (3, 6)
    grad_out = torch.randn(3, 6, device=DEVICE)
    loss.backward(grad_out)
    ref_loss, ref_grad = reference(x, sb, 0.0, False, -100, grad_out.t())
    check(loss.detach().t(), ref_loss, torch.float32)
    check(x.grad, ref_grad, torch.float32)


@pytest.mark.parametrize("kind", ["expanded", "strided", "scalar_expanded"])
def test_grad_output_layouts(kind: str) -> None:
    torch.manual_seed(2)
    x, t = make_inputs(torch.float32)
    loss = parallel_cross_entropy(x, t)
    if kind == "expanded":
        g = torch.rand(1, t.shape[1], device=DEVICE).expand(t.shape)
    elif kind == "strided":
        g = torch.rand(t.shape[1], t.shape[0], device=DEVICE).t()
    else:
        g = torch.tensor(0.7, device=DEVICE).expand(t.shape)
    loss.backward(g)
    _, ref_grad = reference(x, t, 0.0, False, -100, g)
    check(x.grad, ref_grad, torch.float32)


def test_retain_graph_gives_same_gradient_twice() -> None:
    torch.manual_seed(3)
    x, t = make_inputs(torch.bfloat16)
    loss = parallel_cross_entropy(x, t, 0.1, reduce_loss=True)
    (g1,) = torch.autograd.grad(loss, x, retain_graph=True)
    (g2,) = torch.autograd.grad(loss, x)
    assert torch.equal(g1, g2) and g1.abs().sum() > 0


def test_logits_untouched_by_default() -> None:
    torch.manual_seed(4)
    x, t = make_inputs(torch.float32)
    before = x.detach().clone()
    parallel_cross_entropy(x, t, 0.1).sum().backward()
    assert torch.equal(x.detach(), before)
    assert x.grad.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_inplace_grad_writes_into_logits(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "torch":
        monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    torch.manual_seed(5)
    leaf = torch.randn(3, 4, V, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    t = torch.randint(0, V, (3, 4), device=DEVICE)
    t[0, 0] = -100
    logits = leaf * 1.0  # non-leaf, as logits coming out of a projection
    ptr = logits.data_ptr()
    loss = parallel_cross_entropy(logits, t, 0.1, reduce_loss=True, inplace_grad=True)
    grads: list[torch.Tensor] = []
    logits.register_hook(grads.append)
    loss.backward(retain_graph=True)
    _, ref_grad = reference(leaf, t, 0.1, True, -100)
    check(grads[0], ref_grad, torch.bfloat16)
    assert grads[0].data_ptr() == ptr
    assert torch.equal(logits.detach(), grads[0])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_all_ignored_gives_zero_not_nan(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "torch":
        monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    x = torch.randn(2, 3, V, device=DEVICE, requires_grad=True)
    t = torch.full((2, 3), -1, device=DEVICE)
    loss = parallel_cross_entropy(x, t, 0.1, reduce_loss=True, ignore_idx=-1)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.equal(x.grad, torch.zeros_like(x))
    per_token = parallel_cross_entropy(x.detach(), t, ignore_idx=-1)
    assert torch.equal(per_token, torch.zeros(2, 3, device=DEVICE))


def test_custom_ignore_index_and_neg_inf_padding() -> None:
    """Vocabulary padding masked with -inf (whole blocks of it) stays finite."""
    torch.manual_seed(6)
    x = torch.randn(2, 3, V, device=DEVICE)
    x[..., 100:] = float("-inf")
    x[0, 0, :] = float("-inf")  # ignored row made only of -inf
    x.requires_grad_()
    t = torch.randint(0, 100, (2, 3), device=DEVICE)
    t[0, 0] = 5
    loss = parallel_cross_entropy(x, t, reduce_loss=True, ignore_idx=5)
    loss.backward()
    ref_loss, ref_grad = reference(x, t, 0.0, True, 5)
    check(loss.detach(), ref_loss, torch.float32)
    assert torch.equal(x.grad[0, 0], torch.zeros_like(x.grad[0, 0]))  # PyTorch gives NaN here
    check(x.grad.flatten(0, 1)[1:], ref_grad.flatten(0, 1)[1:], torch.float32)


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_out_of_range_target_gives_nan_not_garbage(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "torch":
        monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    x = torch.randn(2, 3, V, device=DEVICE, requires_grad=True)
    t = torch.randint(0, V, (2, 3), device=DEVICE)
    t[1, 2] = V
    t[0, 1] = -5
    loss = parallel_cross_entropy(x, t)
    loss.sum().backward()
    bad = torch.zeros(2, 3, dtype=torch.bool, device=DEVICE)
    bad[1, 2] = bad[0, 1] = True
    assert torch.isnan(loss.detach()[bad]).all() and torch.isfinite(loss.detach()[~bad]).all()
    assert torch.isnan(x.grad[bad]).all() and torch.isfinite(x.grad[~bad]).all()
    assert torch.isnan(parallel_cross_entropy(x.detach(), t, reduce_loss=True))


@pytest.mark.parametrize("word", ["1", "true"])
def test_check_mode_raises(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    x = torch.randn(2, 3, V, device=DEVICE)
    t = torch.zeros(2, 3, dtype=torch.long, device=DEVICE)
    t[1, 1] = V + 4
    monkeypatch.setenv("NPU_FIXES_CE_CHECK", word)
    with pytest.raises(ValueError, match=rf"outside \[0, {V}\).*{V + 4}"):
        parallel_cross_entropy(x, t)
    t[1, 1] = -100
    assert parallel_cross_entropy(x, t)[1, 1] == 0


@pytest.mark.parametrize(
    ("x_shape", "t_shape", "t_dtype", "x_dtype", "match"),
    [
        ((4, V), (4,), torch.long, torch.float32, r"3-D .* got shape \(4, 300\)"),
        ((2, 3, V), (3, 2), torch.long, torch.float32, r"target shape \(3, 2\) must equal .*\(2, 3\)"),
        ((2, 3, V), (2, 3, 1), torch.long, torch.float32, r"target shape \(2, 3, 1\)"),
        ((2, 3, V), (2, 3), torch.long, torch.float64, r"inp dtype .* got torch.float64"),
        ((2, 3, 0), (2, 3), torch.long, torch.float32, r"empty vocabulary"),
    ],
)
def test_bad_input_raises_value_error(x_shape, t_shape, t_dtype, x_dtype, match) -> None:  # noqa: ANN001
    x = torch.randn(x_shape, dtype=x_dtype)
    t = torch.zeros(t_shape, dtype=t_dtype)
    with pytest.raises(ValueError, match=match):
        parallel_cross_entropy(x, t)


def test_bad_label_smoothing_raises() -> None:
    with pytest.raises(ValueError, match="label_smoothing"):
        parallel_cross_entropy(torch.randn(1, 2, 5), torch.zeros(1, 2, dtype=torch.long), 1.5)


@pytest.mark.parametrize("reduce_loss", [False, True])
def test_empty_input(reduce_loss: bool) -> None:
    x = torch.randn(0, 4, V, device=DEVICE, requires_grad=True)
    t = torch.zeros(0, 4, dtype=torch.long, device=DEVICE)
    loss = parallel_cross_entropy(x, t, reduce_loss=reduce_loss)
    assert loss.shape == (() if reduce_loss else (0, 4))
    loss.sum().backward()
    assert x.grad.shape == x.shape
    if reduce_loss:
        assert loss.item() == 0.0


def test_one_rank_group_is_single_device() -> None:
    """Multi-rank groups: tests/ops/test_cross_entropy_parallel.py."""
    group = torch.distributed.ProcessGroup(0, 1)  # rank 0 of 1, no backend: never communicates
    x, t = make_inputs(torch.float32)
    torch.testing.assert_close(parallel_cross_entropy(x, t, dist_process_group=group),
                               parallel_cross_entropy(x, t), rtol=0, atol=0)
    assert sharding._SLICE_SIZES[group] == ()  # known to have one rank: no further size query
    x2, t2 = torch.randn(2, 3, V + 5, device=DEVICE), torch.randint(0, V + 5, (2, 3), device=DEVICE)
    torch.testing.assert_close(parallel_cross_entropy(x2, t2, dist_process_group=group),
                               parallel_cross_entropy(x2, t2), rtol=0, atol=0)  # any vocabulary size


def test_switches_unset_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eager fast path's cheap look for the two switches sees every change at once."""
    for name in ("NPU_FIXES_CE_FORCE_TRITON", "NPU_FIXES_CE_CHECK"):
        monkeypatch.delenv("NPU_FIXES_CE_FORCE_TRITON", raising=False)
        monkeypatch.delenv("NPU_FIXES_CE_CHECK", raising=False)
        assert routing.switches_unset()
        monkeypatch.setenv(name, "")  # set but empty: switch() decides (unset)
        assert not routing.switches_unset() and routing.switch(name) is None
        monkeypatch.setenv(name, "1")
        assert not routing.switches_unset()
        monkeypatch.delenv(name)
        assert routing.switches_unset()
    monkeypatch.setattr("os.environ", {"NPU_FIXES_CE_CHECK": "1"})  # not os._Environ: switch() decides
    assert not routing.switches_unset()


def test_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(2, 3, 8, device=DEVICE)
    calls = record_paths(monkeypatch)
    t = torch.zeros(2, 3, dtype=torch.long, device=DEVICE)
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "0")
    parallel_cross_entropy(x, t)
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "1")
    parallel_cross_entropy(x, t)
    assert calls == ["torch", "triton"]
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "no")  # the shim's switch words
    parallel_cross_entropy(x, t)
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "maybe")  # warns; the router decides (CPU: PyTorch)
    parallel_cross_entropy(x, t)
    assert calls == ["torch", "triton", "torch", "torch"]
    monkeypatch.delenv("NPU_FIXES_CE_FORCE_TRITON")
    assert not use_triton(torch.empty(2, 3, 8))  # CPU default: PyTorch
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "1")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        use_triton(torch.empty(2, 3, 8))


def test_launch_config_respects_npu_block_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuning, "WAVES", 4)
    for vocab in (1000, 4096, 32000, 128256, 256000):
        npu = launch_config.launch_config(8192, vocab, "npu", 48)
        assert npu.block <= 4096 and npu.row_programs <= 65535
        assert npu.block * math.ceil(vocab / npu.block) >= vocab
    assert launch_config.launch_config(256, 128256, "cuda", 132).splits > 1  # few rows: split V


def test_custom_ops_pass_opcheck() -> None:
    """Schema, fake (meta) kernels and autograd registration of the custom ops."""
    torch.manual_seed(7)
    x, t = make_inputs(torch.float32)
    for reduce_loss in (False, True):
        torch.library.opcheck(custom_ops.cross_entropy_fwd, (x, t, 0.1, reduce_loss, -100))
        loss, lse, inv = custom_ops.cross_entropy_fwd(x, t, 0.1, reduce_loss, -100)
        g = torch.rand_like(loss)
        torch.library.opcheck(custom_ops.cross_entropy_bwd, (g, x.detach(), t, lse, inv, 0.1, -100))


def test_torch_compile_matches_eager() -> None:
    torch.manual_seed(8)
    x, t = make_inputs(torch.float32)

    def step(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return parallel_cross_entropy(logits * 2.0, target, 0.1, reduce_loss=True)

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    loss_c = compiled(x, t)
    (g_c,) = torch.autograd.grad(loss_c, x)
    loss_e = step(x, t)
    (g_e,) = torch.autograd.grad(loss_e, x)
    torch.testing.assert_close(loss_c, loss_e)
    torch.testing.assert_close(g_c, g_e)


# ------------------------------------- target dtypes, double backward, argument checks: both paths


def record_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list each forward call appends its path to (the eager fast path is Triton's)."""
    calls: list[str] = []
    real_triton, real_torch, real_fast = triton_path.forward, torch_path.forward, eager_plans.fast_forward

    def fast(*a: object) -> object:
        out = real_fast(*a)
        if out is not None:
            calls.append("triton")
        return out

    monkeypatch.setattr(triton_path, "forward", lambda *a: calls.append("triton") or real_triton(*a))
    monkeypatch.setattr(torch_path, "forward", lambda *a: calls.append("torch") or real_torch(*a))
    monkeypatch.setattr(eager_plans, "fast_forward", fast)
    return calls


def use_path(monkeypatch: pytest.MonkeyPatch, path: str) -> list[str]:
    """Forces ``path`` and returns the list each forward call appends its path to."""
    monkeypatch.setenv("NPU_FIXES_CE_FORCE_TRITON", "1" if path == "triton" else "0")
    return record_paths(monkeypatch)


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_uint8_targets_mean_over_valid_rows(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The mean divides by the rows that are not ignored, not by the padded block."""
    calls = use_path(monkeypatch, path)
    torch.manual_seed(20)
    x = torch.randn(3, 5, V, device=DEVICE, requires_grad=True)
    t = torch.randint(0, 250, (3, 5), device=DEVICE, dtype=torch.uint8)
    t[0, :2] = 255
    for ignore_idx in (-100, 255):  # -100: nothing ignored (a uint8 cannot hold it)
        x.grad = None
        loss = parallel_cross_entropy(x, t, 0.1, reduce_loss=True, ignore_idx=ignore_idx)
        loss.backward()
        ref_loss, ref_grad = reference(x, t, 0.1, True, ignore_idx)
        check(loss.detach(), ref_loss, torch.float32)
        check(x.grad, ref_grad, torch.float32)
    assert calls == [path, path]


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_uint8_label_156_is_a_class_not_ignored(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """156 is -100 wrapped to uint8; it must still be class 156."""
    calls = use_path(monkeypatch, path)
    torch.manual_seed(21)
    x = torch.randn(2, 3, V, device=DEVICE, requires_grad=True)
    t = torch.full((2, 3), 156, device=DEVICE, dtype=torch.uint8)
    t[1, 2] = 7
    loss = parallel_cross_entropy(x, t)
    loss.sum().backward()
    ref_loss, ref_grad = reference(x, t, 0.0, False, -100)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad, ref_grad, torch.float32)
    assert (loss.detach() > 0).all() and (x.grad.abs().sum(-1) > 0).all()
    mean = parallel_cross_entropy(x.detach(), t, reduce_loss=True)
    check(mean, ref_loss.mean(), torch.float32)
    assert calls == [path, path]


@pytest.mark.parametrize("path", ["triton", "torch"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
@pytest.mark.parametrize("reduce_loss", [False, True])
def test_narrow_integer_targets_match_int64(
    monkeypatch: pytest.MonkeyPatch, path: str, dtype: torch.dtype, reduce_loss: bool
) -> None:
    """Every accepted dtype means its integer value, ignore_idx included."""
    use_path(monkeypatch, path)
    torch.manual_seed(22)
    x = torch.randn(3, 4, V, device=DEVICE, requires_grad=True)
    t64 = torch.randint(0, 128, (3, 4), device=DEVICE)
    t64[0, 0] = t64[2, 3] = 100  # ignore_idx below
    loss = parallel_cross_entropy(x, t64.to(dtype), 0.1, reduce_loss, ignore_idx=100)
    loss.sum().backward()
    ref_loss, ref_grad = reference(x, t64, 0.1, reduce_loss, 100)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad, ref_grad, torch.float32)
    assert torch.equal(loss, parallel_cross_entropy(x, t64, 0.1, reduce_loss, ignore_idx=100))


@pytest.mark.parametrize("path", ["triton", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.uint16, torch.complex64], ids=str)
def test_float_or_bool_target_raises_type_error(
    monkeypatch: pytest.MonkeyPatch, path: str, dtype: torch.dtype
) -> None:
    use_path(monkeypatch, path)
    x = torch.randn(2, 3, V, device=DEVICE)
    t = torch.zeros(2, 3, device=DEVICE).to(dtype)
    with pytest.raises(TypeError, match=rf"target .*got dtype {dtype}"):
        parallel_cross_entropy(x, t)


@pytest.mark.parametrize("path", ["triton", "torch"])
@pytest.mark.parametrize("reduce_loss", [False, True])
def test_double_backward_raises(monkeypatch: pytest.MonkeyPatch, path: str, reduce_loss: bool) -> None:
    """The gradient of the gradient raises; create_graph alone still gives the right
    first derivative."""
    calls = use_path(monkeypatch, path)
    torch.manual_seed(23)
    x, t = make_inputs(torch.float32)
    loss = parallel_cross_entropy(x, t, 0.1, reduce_loss)
    (g,) = torch.autograd.grad(loss.sum(), x, create_graph=True)
    _, ref_grad = reference(x, t, 0.1, reduce_loss, -100)
    check(g.detach(), ref_grad, torch.float32)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        torch.autograd.grad(g.square().sum(), x)
    assert calls == [path]


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_double_backward_through_grad_output_raises(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Also when the second derivative is asked for grad_output's weights."""
    use_path(monkeypatch, path)
    x, t = make_inputs(torch.float32)
    loss = parallel_cross_entropy(x, t)
    w = torch.rand_like(loss, requires_grad=True)
    (g,) = torch.autograd.grad(loss, x, w, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        torch.autograd.grad(g.sum(), w)


@pytest.mark.parametrize("path", ["triton", "torch"])
@pytest.mark.parametrize("kind", ["expanded_rows", "stride0_vocab", "as_strided_overlap"])
def test_inplace_grad_rejects_overlapping_logits(
    monkeypatch: pytest.MonkeyPatch, path: str, kind: str
) -> None:
    """No in-place gradient into memory that several elements share."""
    calls = use_path(monkeypatch, path)
    torch.manual_seed(25)
    base = torch.randn(3 * 4 * V, device=DEVICE, requires_grad=True)
    base64 = base.detach().cpu().double().requires_grad_()
    views = {
        "expanded_rows": lambda b: b[:V].view(1, 1, V).expand(3, 4, V),
        "stride0_vocab": lambda b: b[:12].view(3, 4, 1).expand(3, 4, V),
        "as_strided_overlap": lambda b: b.as_strided((3, 4, V), (V, V // 2, 1)),  # half rows shared
    }
    x = views[kind](base)
    t = torch.randint(0, V, (3, 4), device=DEVICE)
    with pytest.raises(ValueError, match=r"inplace_grad=True needs an inp whose elements do not share"):
        parallel_cross_entropy(x, t, inplace_grad=True)
    assert calls == []
    parallel_cross_entropy(x, t, 0.1).sum().backward()  # without inplace_grad: right
    x64 = views[kind](base64)
    F.cross_entropy(x64.reshape(-1, V), t.cpu().reshape(-1), label_smoothing=0.1, reduction="sum").backward()
    check(base.grad, base64.grad, torch.float32)
    assert calls == [path]


def test_overlap_check_accepts_usual_layouts() -> None:
    full = torch.randn(4, 5, 2 * V)
    layouts = (full, full.transpose(0, 1), full[..., 10:V], full[:1, :1].expand(1, 1, 2 * V),
               full.permute(2, 0, 1).contiguous().permute(1, 2, 0), full[:, :1], torch.empty(0, 3, V))
    for x in layouts:
        assert not api.may_overlap(x), x.stride()
    assert api.may_overlap(full[:, :1].expand(4, 2, 2 * V))


@pytest.mark.parametrize("path", ["triton", "torch"])
@pytest.mark.parametrize("group", ["x", 1, object()], ids=["str", "int", "object"])
def test_bad_dist_process_group_raises_type_error(
    monkeypatch: pytest.MonkeyPatch, path: str, group: object
) -> None:
    """Anything but None or a ProcessGroup is refused before torch.distributed sees it."""
    use_path(monkeypatch, path)
    x, t = make_inputs(torch.float32)
    with pytest.raises(TypeError, match="dist_process_group must be None or a torch.distributed.ProcessGroup"):
        parallel_cross_entropy(x, t, dist_process_group=group)


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_deprecated_input_keyword(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Transformer Engine's old name of ``inp``, with a FutureWarning."""
    calls = use_path(monkeypatch, path)
    torch.manual_seed(24)
    x, t = make_inputs(torch.float32)
    with pytest.warns(FutureWarning, match="'_input' keyword is deprecated"):
        old = parallel_cross_entropy(_input=x, target=t, label_smoothing=0.1, reduce_loss=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = parallel_cross_entropy(x, t, 0.1, True)
    assert torch.equal(old, new) and calls == [path, path]
    with pytest.raises(TypeError, match="both 'inp' and .*'_input'"):
        parallel_cross_entropy(x, t, _input=x)
    with pytest.raises(TypeError, match="missing required argument: 'inp'"):
        parallel_cross_entropy(target=t)
    with pytest.raises(TypeError, match="missing required argument: 'target'"):
        parallel_cross_entropy(x)


class FakeDevice(NamedTuple):
    type: str
    index: int | None


@pytest.mark.parametrize(
    ("npu", "expected"),
    [
        ("properties", 40),  # torch.npu.get_device_properties(i).vector_core_num
        ("limit", 36),  # torch.npu.get_device_limit(i)["vector_core_num"]
        ("neither", tuning.NPU_ASSUMED_VECTOR_CORES),  # an older torch_npu: the report's 48
        (None, tuning.NPU_ASSUMED_VECTOR_CORES),  # torch_npu not imported
    ],
)
def test_npu_core_count_from_torch_npu_cached(
    monkeypatch: pytest.MonkeyPatch, npu: str | None, expected: int
) -> None:
    """Torch_npu's own count when it has one, looked up once per device."""
    asked: list[int] = []

    class FakeNpu:
        @staticmethod
        def current_device() -> int:
            return 1

        @staticmethod
        def get_device_properties(index: int) -> object:
            asked.append(index)
            if npu != "properties":
                raise AttributeError("vector_core_num")
            return type("Props", (), {"vector_core_num": 40})()

        @staticmethod
        def get_device_limit(index: int) -> dict[str, int]:
            asked.append(index)
            if npu != "limit":
                raise AttributeError("get_device_limit")
            return {"cube_core_num": 18, "vector_core_num": 36}

    if npu is None:
        monkeypatch.delattr(torch, "npu", raising=False)
    else:
        monkeypatch.setattr(torch, "npu", FakeNpu, raising=False)
    launch_config.num_cores.cache_clear()
    try:
        for _ in range(3):
            assert launch_config.num_cores(FakeDevice("npu", 0)) == expected
            assert launch_config.num_cores(FakeDevice("npu", None)) == expected  # the current device
        assert sorted(set(asked)) == ([] if npu is None else [0, 1])
        assert len(asked) == {"properties": 2, "limit": 4, "neither": 4, None: 0}[npu]
    finally:
        launch_config.num_cores.cache_clear()


@pytest.mark.parametrize("path", ["triton", "torch"])
def test_custom_op_double_backward_raises(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """For the custom ops that torch.compile uses, called eagerly."""
    use_path(monkeypatch, path)
    x, t = make_inputs(torch.float32)
    loss = custom_ops.cross_entropy_fwd(x, t, 0.1, True, -100)[0]
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        torch.autograd.grad(g.sum(), x)


# ----------------------------------------------------------------------------- GPU only


@pytest.mark.gpu
def test_inductor_compile_fullgraph_on_gpu() -> None:
    torch.manual_seed(9)
    x, t = make_inputs(torch.bfloat16, b=4, sq=64, vocab=5000)

    def step(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return parallel_cross_entropy(logits.float() * 0.5, target, 0.1, reduce_loss=True)

    compiled = torch.compile(step, fullgraph=True)
    loss = compiled(x, t)
    loss.backward()
    ref_loss, ref_grad = reference(x.detach().float() * 0.5, t, 0.1, True, -100)
    check(loss.detach(), ref_loss, torch.float32)
    check(x.grad.float(), ref_grad * 0.5, torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4, 32, 5000), (8, 128, 1000)], ids=["split_rows", "whole_rows"])
def test_cuda_graph_capture_and_replay(shape: tuple[int, int, int]) -> None:
    torch.manual_seed(10)
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    t = torch.randint(0, shape[2], shape[:2], device="cuda")
    t[:, :5] = -100
    # warm up (compiles the kernels) on a side stream, as CUDA graph capture requires
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        parallel_cross_entropy(x, t, 0.1, True, is_cg_capturable=True).backward()
    torch.cuda.current_stream().wait_stream(s)
    x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = parallel_cross_entropy(x, t, 0.1, True, is_cg_capturable=True)
        loss.backward()
    for _ in range(2):
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            t.copy_(torch.randint(0, shape[2], t.shape, device="cuda"))
        x.grad.zero_()
        graph.replay()
        ref_loss, ref_grad = reference(x, t, 0.1, True, -100)
        check(loss.detach(), ref_loss, torch.float32)
        check(x.grad, ref_grad, torch.float32)


@pytest.mark.gpu
def test_large_vocab_default_blocks_on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real CUDA block sizes, several blocks per row, split and unsplit rows."""
    monkeypatch.undo()
    for b, sq in ((1, 8), (8, 128)):
        torch.manual_seed(11)
        x, t = make_inputs(torch.bfloat16, b=b, sq=sq, vocab=131071)
        loss = parallel_cross_entropy(x, t, 0.1)
        loss.sum().backward()
        ref_loss, ref_grad = reference(x, t, 0.1, False, -100)
        check(loss.detach(), ref_loss, torch.float32)
        check(x.grad, ref_grad, torch.bfloat16)


class _StandInLauncher:
    """A launcher of the shape Triton's CUDA launcher has; ``launch`` records its arguments."""

    def __init__(self, scratch: int = 0) -> None:
        self.calls: list[tuple] = []
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.global_scratch_size = scratch
        self.profile_scratch_size = 0

    def launch(self, *args):
        self.calls.append(args)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        global_scratch = profile_scratch = None
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    global_scratch, profile_scratch, *args)  # fmt: skip


class _OtherLauncher(_StandInLauncher):
    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        self.launch(gridX, gridY, gridZ, stream, function, *args)


class _StandInCompiled(NamedTuple):
    run: object
    function: int = 7
    packed_metadata: tuple = (4, 1)


@pytest.mark.parametrize(
    ("launcher", "direct"),
    [(_StandInLauncher(), True), (_StandInLauncher(scratch=64), False), (_OtherLauncher(), False)],
    ids=["c-launch", "needs-scratch", "other-protocol"],
)
def test_launcher_passes_what_run_would(launcher: _StandInLauncher, direct: bool) -> None:
    """The plans' launch entry: the launcher's C ``launch`` where its ``__call__`` only adds the
    launch flags (and no scratch buffer is needed), else ``run`` itself; either way ``launch``
    receives exactly what ``run(..., packed_metadata, None, None, None, *args)`` passes it."""
    compiled = _StandInCompiled(launcher)
    fn, head = direct_launch.launcher(compiled)
    assert (fn == launcher.launch) is direct
    fn(3, 2, 1, 99, *head, 10, 20.5, True)
    launcher(3, 2, 1, 99, compiled.function, compiled.packed_metadata, None, None, None, 10, 20.5, True)
    assert launcher.calls[0] == launcher.calls[1]


@pytest.mark.gpu
def test_fast_path_losses_have_plain_strides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plans allocate losses like an expanded element; they still come out with the strides
    of a fresh tensor of their shape, also where that shape holds one element."""
    monkeypatch.undo()
    for shape in ((1, 1, 50), (2, 3, 50), (1, 1, 70000)):
        x = torch.randn(shape, device="cuda", requires_grad=True)
        t = torch.randint(0, shape[2], shape[:2], device="cuda")
        for reduce_loss in (False, True, False):  # the second call of a signature uses its plan
            loss = parallel_cross_entropy(x, t, reduce_loss=reduce_loss)
            assert loss.dtype == torch.float32
            assert loss.stride() == torch.empty(loss.shape).stride()
            (grad,) = torch.autograd.grad(loss.sum(), x)
            assert grad.stride() == x.stride()
    assert any(p is not None and p.fwd is not None for p in eager_plans.PLANS.values())


@pytest.mark.gpu
def test_direct_launches_match_jit_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAST_LAUNCH (compiled kernels launched without Triton's JIT) gives the JIT's bits, also
    when inputs of one shape alternate between 16-byte aligned and misaligned addresses
    (Triton specializes on alignment: the keys must tell them apart)."""
    monkeypatch.undo()
    assert direct_launch.fast_protocol()
    torch.manual_seed(12)
    cases = []
    for b, sq, v in ((2, 64, 3000), (1, 8, 20000)):  # whole rows; rows split over 5 programs
        base = torch.randn(b * sq * v + 1, device="cuda")
        labels = torch.randint(0, v, (b * sq + 1,), device="cuda")
        for shift in (0, 1, 0, 1):  # aligned, misaligned, again: the second of each hits the plan
            x = base[shift : shift + b * sq * v].view(b, sq, v).detach().requires_grad_()
            t = labels[shift : shift + b * sq].view(b, sq)
            for reduce_loss, eps in ((True, 0.1), (False, 0.0)):
                cases.append((x, t, reduce_loss, eps))
            xt = x.detach().transpose(0, 1).requires_grad_()  # (SQ, B, V) strides
            cases.append((xt, t.t(), True, 0.0))
    results = {}
    for fast in (False, True):
        monkeypatch.setitem(tuning.FAST_LAUNCH, "cuda", fast)
        direct_launch.LAUNCHED.clear()
        eager_plans.PLANS.clear()
        out = []
        for x, t, reduce_loss, eps in cases:
            loss = parallel_cross_entropy(x, t, eps, reduce_loss)
            g = torch.linspace(0.5, 1.5, loss.numel(), device="cuda").view(loss.shape)
            (grad,) = torch.autograd.grad(loss, x, g)
            out.append((loss.detach(), grad))
        results[fast] = out
        if fast:  # the direct launches were taken: compiled kernels kept in plans
            plans = [p for p in eager_plans.PLANS.values() if p is not None]
            assert len(plans) == 12 and all(p.fwd is not None and p.bwd for p in plans)
            # this Triton's CUDA launcher is called at its C entry point, not through the
            # launcher object (which has that entry point as its ``launch``)
            assert not any(hasattr(p.fwd[0], "launch") for p in plans)
            assert {p.fused for p in plans} == {True, False}
    for (l0, g0), (l1, g1) in zip(results[False], results[True], strict=True):
        assert torch.equal(l0, l1) and torch.equal(g0, g1)
    x, t, _, _ = cases[9]  # misaligned, reduced, eps 0.1: a direct launch (its plan made by cases[3])
    ref_loss, ref_grad = reference(x, t, 0.1, True, -100, torch.linspace(0.5, 1.5, 1, device="cuda").view(()))
    check(results[True][9][0], ref_loss, torch.float32)
    check(results[True][9][1], ref_grad, torch.float32)


@pytest.mark.gpu
def test_forwards_on_two_streams_at_once() -> None:
    """Each stream has its own counter for the forward's last program: concurrent launches on
    two streams do not mix up which program comes last."""
    torch.manual_seed(13)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    inputs = [make_inputs(torch.float32, b=4, sq=256, vocab=2000) for _ in streams]
    inputs += [make_inputs(torch.float32, b=1, sq=8, vocab=50000) for _ in streams]  # split rows
    refs = [reference(x, t, 0.0, True, -100)[0] for x, t in inputs]
    torch.cuda.synchronize()
    results: list[list[torch.Tensor]] = [[] for _ in inputs]
    for _ in range(20):
        for i, (x, t) in enumerate(inputs):
            with torch.cuda.stream(streams[i % 2]):
                results[i].append(parallel_cross_entropy(x.detach(), t, reduce_loss=True))
    torch.cuda.synchronize()
    for ref, got in zip(refs, results, strict=True):
        for loss in got:
            check(loss, ref, torch.float32)
