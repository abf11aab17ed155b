"""Programs of tests/fixes/test_rsplit_bare_store.py: the token count of causal-LM training,
static and under ``dynamic=True``, compiled through a state's backend, kernels run in Triton's
interpreter, compared with eager, as built and with npu_fixes."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "rsplit-bare-store"


def _tokens(labels):
    return (labels[..., 1:] != -100).sum()


def _loss_tokens(labels):
    return (labels != -100).sum(-1)


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else what it gave or the error."""
    import torch

    torch.manual_seed(0)
    labels = torch.randint(0, 50, (8, 4096))
    labels[torch.rand(8, 4096) < 0.3] = -100

    def judge(got, want):
        return True if torch.equal(got, want) else got.tolist()

    programs = {"count": (_tokens, (labels,)), "row-counts": (_loss_tokens, (labels,))}
    static = against_eager(codegen, programs, judge)
    dynamic = against_eager(codegen, programs, judge, dynamic=True)
    return static | {f"{label}-dynamic": result for label, result in dynamic.items()}


def counts(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
