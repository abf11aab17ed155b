"""Gradient of the cross entropy at examples/ce_long_run.py's initial weights, against fp64.

TinyGPT's bf16 logits (the example's defaults, batch 16 and 64) for one batch of the
example's Markov data, drawn as a one-step run draws it (the long run's own first batch
is drawn from the same chain, but differently); the loss and the gradient of
ours, of PyTorch's with the logits upcast to fp32 (autocast's rule) and of PyTorch's in bf16,
each against PyTorch's in fp64: relative loss error, relative L1 error of the logits'
gradient, share of gradient elements equal to the fp64 gradient rounded to bf16, relative
error of the LM head's weight gradient (gradient^T hidden states). Shows whether two
training runs part because of an error or because of rounding alone.

    python benchmarks/ce_training_grads.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from ce_long_run import TinyGPT, markov_batches, parse_args  # noqa: E402

from npu_fixes.ops import parallel_cross_entropy  # noqa: E402

LOSSES = {
    "fp64": lambda x, t: F.cross_entropy(x.double().flatten(0, 1), t.flatten()),
    "ours": lambda x, t: parallel_cross_entropy(x, t, 0.0, True),
    "torch fp32": lambda x, t: F.cross_entropy(x.float().flatten(0, 1), t.flatten()),
    "torch bf16": lambda x, t: F.cross_entropy(x.flatten(0, 1), t.flatten()),
}


def first_batch(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hidden states, bf16 logits and targets of a one-step run (the example's defaults)."""
    a = parse_args(["--batch", str(batch)])
    data = markov_batches(1, a.batch, a.seq, a.vocab, a.successors, a.seed).cuda()
    torch.manual_seed(a.seed)
    model = TinyGPT(a.vocab, a.d_model, a.layers, a.heads, a.seq).cuda()
    idx, target = data[0, :, :-1], data[0, :, 1:]
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        hidden = model.hidden(idx)
        logits = model.head(hidden)
    return hidden, logits, target


def main() -> None:
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for batch in (16, 64):
        hidden, logits, target = first_batch(batch)
        h = hidden.double().flatten(0, 1)
        results = {}
        for name, fn in LOSSES.items():
            x = logits.clone().requires_grad_()
            loss = fn(x, target)
            loss.backward()
            results[name] = (loss.item(), x.grad.double())
        ref_loss, ref_grad = results.pop("fp64")
        ref_dw = ref_grad.flatten(0, 1).T @ h
        rounded = ref_grad.to(torch.bfloat16).double()
        print(f"\nbatch {batch} x 256, V 32000: fp64 loss {ref_loss:.9f}")
        print(f"{'':11s} {'loss rel':>9s} {'grad L1 rel':>11s} {'= bf16(fp64)':>12s} {'head dW rel':>11s}")
        for name, (loss, grad) in results.items():
            dw = grad.flatten(0, 1).T @ h
            print(f"{name:11s} {abs(loss - ref_loss) / ref_loss:9.2e} "
                  f"{((grad - ref_grad).abs().sum() / ref_grad.abs().sum()).item():11.2e} "
                  f"{(grad == rounded).double().mean().item():12.6f} "
                  f"{((dw - ref_dw).norm() / ref_dw.norm()).item():11.2e}")


if __name__ == "__main__":
    main()
