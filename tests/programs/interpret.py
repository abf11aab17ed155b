"""Programs of tests/test_interpret.py that compile through a host-loaded backend."""

from __future__ import annotations

from tests.programs import host_load, interpreted, main


def nan_reductions(location: str) -> dict:
    """``amax``/``amin`` of rows holding a NaN, compiled through the backend at ``location``,
    kernels in the interpreter: label -> whether the result equals eager's, NaN included."""
    import torch

    from npu_fixes.tools import interpret

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    x = torch.rand(4, 64)
    x[1, 7] = x[3, 0] = float("nan")
    out = {}
    for label, fn in {"amax": lambda t: t.amax(-1), "amin": lambda t: t.amin(-1),
                      "max-of-all": lambda t: t.max()}.items():
        run = interpreted(codegen, fn, x)
        out[label] = run if "error" in run else bool(torch.allclose(run["result"], fn(x), equal_nan=True))
    return out


def gpu_type_decisions(location: str) -> dict:
    """Five programs whose kernels depend on whether Inductor takes the device for a GPU or
    for a CPU, compiled through the backend at ``location``: label -> equal to eager, kernels
    launched, those holding a ``tl.sum``, loops reordered after fusion, kernels indexing rows of
    1100 floats padded to 1120, kernels multiplying by a third, matrix products decomposed
    into pointwise ones; and whether ``is_gpu("cpu")`` is False and ``div_prim`` compares with
    "cpu" again once the interpreter device is closed."""
    import inspect

    import torch
    import torch._inductor.ir as ir
    import torch._inductor.lowering as lowering
    import torch._inductor.metrics as metrics
    from torch._dynamo.utils import counters
    from torch.utils._pytree import tree_leaves

    from npu_fixes.tools import interpret

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    programs = {
        "sum-of-4": (lambda x: x.sum(), torch.rand(4)),
        "transposed-copy-and-row-sum": (lambda x: ((x + 1).t().contiguous(), x.sum(1)), torch.rand(64, 32)),
        "softmax-of-1100-then-matmul": (lambda x: torch.softmax(x, -1) @ torch.ones(1100, 3), torch.rand(4, 1100)),
        "divide-by-3": (lambda x: x / 3.0, torch.rand(7)),
        "outer-product-40x6": (lambda x: x @ torch.arange(6.0).reshape(1, 6), torch.rand(40, 1)),
    }
    out = {}
    for label, (fn, x) in programs.items():
        metrics.reset()
        counters.clear()
        run = interpreted(codegen, fn, x)
        if "error" in run:
            out[label] = run
            continue
        expected, actual = fn(x), run["result"]
        out[label] = {
            "equal": all(torch.allclose(a, e) for a, e in zip(tree_leaves(actual), tree_leaves(expected),
                                                              strict=True)),
            "kernels": len(run["launches"]),
            "summing": sum("tl.sum(" in launch.source for launch in run["launches"]),
            "reordered": metrics.num_loop_reordering,
            "row-stride-1120": sum("1120" in launch.source for launch in run["launches"]),
            "by-a-third": sum("0.3333333333333333" in launch.source for launch in run["launches"]),
            "mm-decomposed": counters["inductor"]["decompose_mm"],
        }
    out["cpu-after"] = ir.is_gpu("cpu")
    out["div-compares-with-cpu-after"] = "cpu" in inspect.unwrap(lowering.div_prim).__code__.co_consts
    return out


if __name__ == "__main__":
    main(globals())
