"""A CPU graph and codegen kernels: a real ``NPUTritonKernel`` built without an NPU, to ask
its live methods about indexes and reductions (slice-scatter-offset, split-fused-fixpoint,
widened-load-tail, int64-minmax-identity, axis-split-self-reference), and a graph to run a
live lowering in (empty-cat-input)."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

X_LENGTH = 64


@contextlib.contextmanager
def cpu_graph() -> Iterator[Any]:
    """A fresh ``GraphLowering`` of an empty program on the CPU, set as the current graph."""
    import torch
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    graph = GraphLowering(torch.fx.symbolic_trace(torch.nn.Identity()))
    graph.current_device = torch.device("cpu")
    with V.set_graph_handler(graph):
        yield graph


@contextlib.contextmanager
def cpu_kernel(module: types.ModuleType, x_length: Any = X_LENGTH,
               ranges: dict[Any, tuple[int, int]] | None = None) -> Iterator[tuple[Any, Any]]:
    """A real ``NPUTritonKernel`` with one x range of ``x_length`` (an int, or an expression
    of size symbols whose values lie in ``ranges``, low and high included), under a fresh
    :func:`cpu_graph` and set as the current kernel; yields ``(kernel, x0)``. Nothing
    global is changed."""
    import sympy
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
    from torch._inductor.virtualized import V
    from torch.utils._sympy.value_ranges import ValueRanges

    length = sympy.sympify(x_length)
    with cpu_graph() as graph:
        for symbol, (low, high) in (ranges or {}).items():
            graph.sizevars.shape_env.var_to_range[symbol] = ValueRanges(low, high)
        features = SIMDKernelFeatures([], length, sympy.Integer(1))
        kernel = module.NPUTritonKernel({"x": length}, features=features)
        with V.set_kernel_handler(kernel):
            x0 = kernel.range_trees[0].lookup(sympy.Integer(1), length).symbol()
            yield kernel, x0


@contextlib.contextmanager
def cpu_reduction_kernel(module: types.ModuleType, length: int = X_LENGTH) -> Iterator[Any]:
    """A real ``NPUTritonKernel`` with an x range and a looped r0 range of ``length`` each,
    under a fresh :func:`cpu_graph` and set as the current kernel. Nothing global is
    changed."""
    import sympy
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
    from torch._inductor.virtualized import V

    with cpu_graph():
        features = SIMDKernelFeatures([], sympy.Integer(length), sympy.Integer(length))
        kernel = module.NPUTritonKernel({"x": sympy.Integer(length), "r0_": sympy.Integer(length)},
                                        features=features)
        with V.set_kernel_handler(kernel):
            yield kernel


def emitted(kernel: Any) -> str:
    """Everything ``kernel`` has emitted so far, its buffers joined."""
    buffers = ("indexing_code", "loads", "compute", "stores", "body", "post_loop_combine", "post_loop_store")
    return "\n".join(getattr(kernel, name).getvalue() for name in buffers if hasattr(kernel, name))
