"""The rsplit predicate: narrow the cross-core split predicate
``_npu_rsplit_outer_applicable``, and ask the live one about stand-in kernels (rsplit-outer,
rsplit-nonsum, rsplit-nested-range, rsplit-epilogue, rsplit-inner-static); the live partial-stage
source rewrite on a stand-in kernel (rsplit-slice-tail, rsplit-bare-store)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

from ...shim.patcher import Patcher
from ...shim.scoped import with_globals

TARGET = "_npu_rsplit_outer_applicable"


def _node(name: str, length: int) -> types.SimpleNamespace:
    import sympy

    return types.SimpleNamespace(name=name, length=sympy.Integer(length))


def pointwise_node(reads: str, op: str | None = None) -> types.SimpleNamespace:
    """A stand-in pointwise scheduler node whose body loads buffer ``reads`` and stores it
    into ``buf1``, through ``op`` with a second input (``arg1``) when given."""
    import torch

    graph = torch.fx.Graph()
    ops = graph.placeholder("ops")
    index = graph.call_module("get_index", ())
    value = graph.call_method("load", (ops, reads, index))
    if op is not None:
        value = graph.call_method(op, (ops, value, graph.call_method("load", (ops, "arg1", index))))
    graph.call_method("store", (ops, "buf1", index, value, None))
    graph.output(None)
    NS = types.SimpleNamespace
    return NS(is_reduction=lambda: False, get_buffer_names=lambda: {"buf1"},
              _body=NS(root_block=NS(graph=graph), subblocks={}))


def outer_sum_kernel(module: types.ModuleType, outputs: dict[str, Any],
                     reduction_nodes: tuple[tuple[str, int], ...] = (("r0_1", 2048),),
                     pointwise: tuple[Any, ...] = ()) -> types.SimpleNamespace:
    """Stand-in of the hf_Bert backward kernel's sizes: OUTER ``sum`` (into ``buf0``) of
    2048 rows into a 1x768 output; by default one flat reduction node and no other
    scheduler node than the reduction (``pointwise`` adds some)."""
    import sympy

    NS = types.SimpleNamespace
    reduction = NS(node=NS(data=NS(reduction_type="sum")), is_reduction=lambda: True,
                   get_buffer_names=lambda: {"buf0"})
    features = NS(
        get_reduction_hint=lambda: module.ReductionHint.OUTER,
        scheduler_nodes=lambda: [reduction, *pointwise],
        reduction_nodes=lambda: [reduction],
        reduction_numel=sympy.Integer(2048),
    )
    x_tree = NS(is_reduction=False, is_loop=False, tree_node_mapping={},
                nodes={"x0": _node("x0", 768)})
    r_tree = NS(is_reduction=True, is_loop=False, tree_node_mapping={},
                nodes={name: _node(name, length) for name, length in reduction_nodes})
    return NS(inside_reduction=True, features=features, range_trees=[x_tree, r_tree],
              args=NS(output_buffers=outputs, inplace_buffers={}))


def predicate_accepts(module: types.ModuleType, kernel: Any) -> bool:
    """The live predicate (with any wrappers) on ``kernel``, its gate on and 40 vector
    cores, through a scoped copy: the module's globals are not touched."""
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    cores = types.SimpleNamespace(get_npu_vector_core_count=lambda: 40)
    graph = types.SimpleNamespace(sizevars=SizeVarAllocator())
    predicate = with_globals(inspect.getattr_static(module, TARGET),
                             {"npu_rsplit_outer": True, "device_props": cores})
    with V.set_graph_handler(graph):  # type: ignore[arg-type]
        return bool(predicate(kernel))


def narrow_predicate(module: types.ModuleType, patcher: Patcher, allows: Callable[[Any], bool]) -> None:
    """Wrap the split predicate so that a kernel is split only if ``allows(kernel)`` and
    upstream's predicate agree; ours is asked first, so a kernel we reject never reaches
    upstream's. The rsplit fixes each narrow it this way, in any order."""
    def narrowed(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> bool:
        kernel = args[0] if args else kwargs["kernel"]
        return allows(kernel) and bool(wrapped(*args, **kwargs))

    patcher.wrap_path(module, TARGET, narrowed)


def partial_rewrite(module: types.ModuleType, source: str) -> str:
    """``source`` through the live ``NPUTritonKernel._npu_rewrite_rsplit_partial_body`` of a
    kernel of the live class set up as a split sum's partial stage: one reduction tree
    ``r0_``, output ``out_ptr0``, workspace ``ws_ptr`` of one float32 row."""
    import torch

    NS = types.SimpleNamespace
    kernel = object.__new__(module.NPUTritonKernel)
    kernel.npu_rsplit_axis = None
    kernel.npu_rsplit_ws = ("ws_ptr", 0, "1", torch.float32)
    kernel.range_trees = [NS(is_reduction=False, prefix="x"), NS(is_reduction=True, prefix="r0_")]
    kernel.args = NS(output_buffers={"buf0": "out_ptr0"}, inplace_buffers={})
    return module.NPUTritonKernel._npu_rewrite_rsplit_partial_body(kernel, source)
