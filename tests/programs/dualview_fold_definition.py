"""Programs of tests/fixes/test_dualview_fold_definition.py: reductions whose addresses the
backend folds to the flat node of their reduction tree, compiled with ``dynamic=True``
through a state's backend, kernels run in Triton's interpreter, compared with eager."""

from __future__ import annotations

from tests.programs import host_load, innermost, interpreted_with_npu_fixes, main

NAME = "dualview-fold-definition"


def group_norm_gradients(codegen) -> object:
    """The gradients of ``native_group_norm`` (2 groups of 5 channels of 37) and its mean and
    rstd, compiled: True where they equal eager's, else the error."""
    import torch

    from npu_fixes.tools import interpret

    torch.manual_seed(0)
    inputs = [torch.randn(1, 10, 37), torch.randn(10), torch.randn(10)]
    weights = [torch.randn(1, 10, 37), torch.randn(1, 2), torch.randn(1, 2)]

    def gradients(fn) -> list:
        leaves = [t.clone().requires_grad_() for t in inputs]
        outs = fn(*leaves, 1, 10, 37, 2, 0.5)
        return torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, weights, strict=True)), leaves)

    torch._dynamo.reset()
    try:
        with interpret.cpu_device(codegen):
            compiled = gradients(torch.compile(torch.native_group_norm, dynamic=True))
    except Exception as exc:  # noqa: BLE001 - recorded
        return innermost(exc)
    expected = gradients(torch.native_group_norm)
    return all(torch.allclose(a, e, rtol=1e-4, atol=1e-4) for a, e in zip(compiled, expected, strict=True))


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error the compile or kernel raised."""
    import torch

    from tests.programs import against_eager

    torch.manual_seed(0)
    x, m = torch.randn(5, 5, 5), torch.rand(5, 5, 1) > 0.3

    def masked_and_sum(x, m):
        y = torch.where(m, x, 0.0)
        return y, y.sum()

    programs = {
        "masked-and-sum": (masked_and_sum, (x, m)),
        "centred-masked": (lambda x, m: (x - x.sum()) * m, (x, m)),
    }
    out = against_eager(codegen, programs, lambda a, e: all(torch.allclose(p, q) for p, q in zip(
        a if isinstance(a, tuple) else (a,), e if isinstance(e, tuple) else (e,), strict=True)), dynamic=True)
    out["group-norm-gradients"] = group_norm_gradients(codegen)
    return out


def folds(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


def folds_without_this_fix(location: str) -> dict:
    """The programs with npu_fixes applied as the environment says (this fix disabled)."""
    import os

    import npu_fixes
    from npu_fixes.tools import interpret

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    return run_all(codegen)


if __name__ == "__main__":
    main(globals())
