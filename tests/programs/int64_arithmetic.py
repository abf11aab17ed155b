"""Programs of tests/fixes/test_int64_arithmetic.py: int64 arithmetic inside a kernel, compiled
through a state's backend, kernels run in Triton's interpreter, compared with eager, as built
and with npu_fixes."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "int64-arithmetic"
TOKENS, VOCAB = 16384, 152064


def _flat_offsets(labels):  # where each token's label sits in flat [tokens, vocabulary] logits
    import torch

    return torch.arange(labels.shape[0])[:, None] * VOCAB + labels[:, None]


def _row_offsets(labels):
    import torch

    return torch.arange(labels.shape[0])[:, None] * 1000 + labels[:, None]


def _masked_max(x, mask):
    import torch

    return torch.where(mask, x, torch.iinfo(torch.int64).min).amax(-1)


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else how many elements differ, or the error."""
    import torch

    torch.manual_seed(0)
    labels = torch.randint(0, VOCAB, (TOKENS,))

    def judge(got, want):
        return True if torch.equal(got, want) else int((got != want).sum())

    return against_eager(codegen, {
        "flat-offsets": (_flat_offsets, (labels,)),
        "row-offsets": (_row_offsets, (labels[:64] % 1000,)),
        "masked-max": (_masked_max, (torch.randint(-50, 50, (8, 16)), torch.rand(8, 16) < 0.5)),
    }, judge)


def guarded(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
