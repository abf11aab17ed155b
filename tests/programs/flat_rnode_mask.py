"""Programs of tests/fixes/test_flat_rnode_mask.py: reductions over a split range whose load
runs through the whole-range node, compiled through a state's backend, kernels run in
Triton's interpreter (every load bounds-checked), compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "flat-rnode-mask"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error."""
    import torch

    def scattered_amax(x):  # the sweep's gen:96
        y = x.flatten(0, 1).t()
        return torch.slice_scatter(y, torch.ones_like(y[:, 2848::2]), 1, 2848, None, 2).amax()

    def plain_amax(x):
        return x.t().amax()

    def shifted_loss(logits, labels):  # causal-LM training's loss line
        import torch.nn.functional as F

        vocab = logits.shape[-1]
        return F.cross_entropy(logits[..., :-1, :].reshape(-1, vocab), labels[..., 1:].reshape(-1),
                               ignore_index=-100)

    torch.manual_seed(0)
    x = torch.randn(109, 481, 5)

    def close(got, want):
        return bool(torch.allclose(got, want, rtol=1e-4, atol=1e-4))

    labels = torch.randint(0, 32, (2, 1024))
    labels[:, :5] = -100
    static = against_eager(codegen, {"scattered-amax": (scattered_amax, (x,)),
                                     "plain-amax": (plain_amax, (torch.randn(3001, 7),)),
                                     "shifted-loss": (shifted_loss, (torch.randn(2, 1024, 32), labels))}, close)
    dynamic = against_eager(codegen, {"scattered-amax-dynamic": (scattered_amax, (x,))}, close, dynamic=True)
    return static | dynamic


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
