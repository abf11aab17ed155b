"""Programs of tests/fixes/test_mixed_leaf_xmask.py: reductions to one value of a product of
operands shaped differently, compiled through a state's backend, kernels run in Triton's
interpreter, compared with eager."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "mixed-leaf-xmask"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error."""
    import torch
    import torch.nn.functional as F

    def expected_position(x):
        return (F.softmax(x, -1) * torch.arange(x.shape[-1])).sum()

    def expected_position_grad(x):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(expected_position(x), x)[0]

    def weighted_rows(x, w):
        return (x * w[:, None]).sum(dim=(0, 1))

    def weighted_rows_per_batch(x, w):  # an x range: the kernel defines xmask
        return (x * w[:, :, None]).sum(dim=(1, 2))

    torch.manual_seed(0)
    programs = {
        "softmax-positions": (expected_position, (torch.randn(4, 8),)),
        "softmax-positions-backward": (expected_position_grad, (torch.randn(4, 8),)),
        "rows-by-weights": (weighted_rows, (torch.randn(16, 32), torch.randn(16))),
        "per-batch": (weighted_rows_per_batch, (torch.randn(4, 16, 32), torch.randn(4, 16))),
    }
    return against_eager(codegen, programs, lambda got, want: bool(torch.allclose(got, want, rtol=1e-5, atol=1e-5)))


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
