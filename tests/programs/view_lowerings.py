"""Programs of tests/fixes/test_view_lowerings.py: writes into ``diagonal`` and ``as_strided``
views compiled through a state's backend, kernels run in Triton's interpreter, compared with
eager."""

from __future__ import annotations

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "view-lowerings"


def _diagonal_add(x, s):  # noqa: ANN001, ANN202
    y = x.clone()
    y.diagonal().add_(s)
    return y


def _fill_diagonal(x):  # noqa: ANN001, ANN202
    y = x.clone()
    y.fill_diagonal_(7.0)
    return y


def _strided_zero(x):  # noqa: ANN001, ANN202
    y = x.clone()
    y.as_strided((4,), (5,)).zero_()
    return y


def _input_diagonal(y, s):  # noqa: ANN001, ANN202
    y.diagonal().mul_(s)  # a write into a view of a graph input
    return y + 1


def run_all(codegen) -> dict:
    """Each program on fresh inputs: whether its result (and a mutated input) equal eager's."""
    import torch

    out = {}
    for label, fn, make in (("diagonal-add", _diagonal_add, lambda: (torch.rand(4, 4), 2.0)),
                            ("fill-diagonal", _fill_diagonal, lambda: (torch.rand(4, 4),)),
                            ("as-strided-zero", _strided_zero, lambda: (torch.rand(4, 4),)),
                            ("input-diagonal", _input_diagonal, lambda: (torch.rand(4, 4), 3.0))):
        torch.manual_seed(0)
        compiled_args, eager_args = make(), None
        torch.manual_seed(0)
        eager_args = make()
        run = interpreted(codegen, fn, *compiled_args)
        expected = fn(*eager_args)
        out[label] = run if "error" in run else bool(torch.equal(run["result"], expected)
                                                      and torch.equal(compiled_args[0], eager_args[0]))
    return out


def writes(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
