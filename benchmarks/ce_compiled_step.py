"""A ``torch.compile``d training step ending in our cross entropy, against the same step with
PyTorch's, on a CUDA GPU.

The step is an LM head as a language model's last layer has it: hidden states ``(B, S, H)``
(bf16) through a bias-free linear layer to ``(B, S, V)`` logits, then the shifted-label
cross entropy over tokens ``1..S-1`` (label smoothing 0.1 or 0, a tenth of the labels
ignored), reduced, then backward to the hidden states and the weight. The whole step is
compiled with Inductor (``fullgraph=True``): ours reaches Inductor as the custom ops
``npu_fixes::cross_entropy_fwd/bwd``, PyTorch's as its decomposition. For each shape it
checks that loss and gradients agree (bf16 tolerances, both against a float64 eager
reference), then times both steps in paired, alternating blocks (``ce_mass.paired``) and
prints milliseconds per step, ours/PyTorch (median of the per-round ratios) and the peak
memory of one step for each.

    python benchmarks/ce_compiled_step.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from ce_mass import paired  # noqa: E402

from npu_fixes.ops import parallel_cross_entropy  # noqa: E402

# (batch, sequence, hidden, vocabulary, label smoothing)
SHAPES = ((8, 512, 1024, 32000, 0.0), (4, 1024, 2048, 50304, 0.1), (2, 2048, 4096, 128256, 0.0),
          (1, 4096, 4096, 152064, 0.1))


def ours_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    """(B, S-1, V) logits against the next tokens."""
    return parallel_cross_entropy(logits, labels, smoothing, reduce_loss=True)


def torch_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100,
                           label_smoothing=smoothing)


def make_step(loss_fn: Callable[..., torch.Tensor], smoothing: float) -> Callable[..., torch.Tensor]:
    def step(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = hidden @ weight.t()
        return loss_fn(logits[:, :-1], labels[:, 1:], smoothing)
    return step


def inputs(b: int, s: int, h: int, v: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(b * s + v)
    hidden = torch.randn(b, s, h, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
    weight = torch.randn(v, h, device="cuda", dtype=torch.bfloat16, generator=gen) * h**-0.5
    weight.requires_grad_()
    labels = torch.randint(0, v, (b, s), device="cuda", generator=gen)
    labels[torch.rand(b, s, device="cuda", generator=gen) < 0.1] = -100
    return hidden, weight, labels


def grads(step: Callable[..., torch.Tensor], hidden: torch.Tensor, weight: torch.Tensor,
          labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
    loss = step(hidden, weight, labels)
    return (loss.detach(), *torch.autograd.grad(loss, (hidden, weight)))


def peak_bytes(fn: Callable[[], object]) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def measure(b: int, s: int, h: int, v: int, eps: float, rounds: int) -> tuple[str, bool]:
    """One shape's line of the table, and whether ours agrees with float64 as PyTorch's does."""
    hidden, weight, labels = inputs(b, s, h, v)
    ours = torch.compile(make_step(ours_loss, eps), fullgraph=True)
    theirs = torch.compile(make_step(torch_loss, eps), fullgraph=True)
    ref = grads(make_step(torch_loss, eps), hidden.detach().double().requires_grad_(),
                weight.detach().double().requires_grad_(), labels)
    errors = []
    for step in (ours, theirs):
        got = grads(step, hidden, weight, labels)
        errors.append(max(((g.double() - r).abs().max() / r.abs().max()).item()
                          for g, r in zip(got, ref, strict=True)))
    del ref
    # ours must be as close to float64 as PyTorch's own compiled step is, within bf16's step
    ok = errors[0] <= max(2 * errors[1], 2**-7)
    def run_ours() -> object:
        return grads(ours, hidden, weight, labels)

    def run_theirs() -> object:
        return grads(theirs, hidden, weight, labels)

    ta, tb = paired(run_ours, run_theirs, rounds, torch.cuda.synchronize, block_s=0.05)
    ratio = statistics.median(a / t for a, t in zip(ta, tb, strict=True))
    mem = [peak_bytes(run) / 2**20 for run in (run_ours, run_theirs)]
    line = (f"{f'{b}x{s}x{h}x{v}':>24} {eps:4.1f} {statistics.median(ta):8.3f} {statistics.median(tb):8.3f} "
            f"{ratio:6.3f} {mem[0]:9.0f} {mem[1]:9.0f}  ours {errors[0]:.2e}, PyTorch {errors[1]:.2e}"
            f"{'' if ok else '  DISAGREES'}")
    return line, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; compiled step = LM head + shifted CE, "
          "fwd+bwd, bf16")
    print(f"{'B x S x H x V':>24} {'eps':>4} {'ours ms':>8} {'torch ms':>8} {'ratio':>6} {'ours MiB':>9} "
          f"{'torch MiB':>9}  agreement (max |err| / max |ref|, loss and grads, against float64)")
    failed = False
    for shape in SHAPES:
        line, ok = measure(*shape, rounds=args.rounds)
        print(line)
        failed |= not ok
        torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
