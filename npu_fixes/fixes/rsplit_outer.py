"""rsplit-outer: the cross-core r-axis split only fires on kernels with one live output.

- **Defect**: ``_npu_rsplit_outer_applicable`` looks only at the reduction type, the
  output x size and the reduction size, so a kernel with several live outputs gets the
  partial+combine rewrite: the first output's store lands in a small partial workspace
  (hf_Bert backward: wrong gradients at step 1, NaN loss from step 4).
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable``.
- **Probe**: does the predicate accept an OUTER ``sum`` kernel with two live outputs?
  (hf_Bert sizes, a 2048x768 pointwise store next to a 1x768 reduction store, reduction
  numel 2048, one flat reduction node).
- **Fix**: the split is accepted only if upstream accepts it and the kernel has exactly
  one live output (removed arguments excluded, an in-place buffer counted once), for the
  INNER hint too, as the fixed wheel's own check does. Any doubt rejects the split (the
  kernel then compiles without it). The nested reduction loops that ignore the core's
  ``r0_lo..r0_hi``, named in the same report, are a defect of their own:
  rsplit-nested-range.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

TARGET = "_npu_rsplit_outer_applicable"
_REMOVED_PREFIX = "REMOVED"


def split_allowed(upstream: bool, live_outputs: int | None) -> bool:
    """The corrected decision; a ``None`` count means "could not tell" and rejects."""
    return upstream and live_outputs == 1


def _is_removed(arg: Any) -> bool:
    from torch._inductor.codegen.common import RemovedArg

    name = getattr(arg, "inner_name", arg)
    return isinstance(arg, RemovedArg) or (isinstance(name, str) and name.startswith(_REMOVED_PREFIX))


def live_outputs(args: Any) -> int | None:
    """Live output bindings of kernel ``args``: output buffers plus distinct in-place
    buffers, removed entries skipped; None when an entry cannot be understood."""
    count = 0
    for arg in args.output_buffers.values():
        if not _is_removed(arg):
            count += 1
    seen: set[str] = set()
    for arg in args.inplace_buffers.values():
        if _is_removed(arg):
            continue
        inner = getattr(arg, "inner_name", None)
        if not isinstance(inner, str) or not getattr(arg, "other_names", None):
            return None
        if inner not in seen:
            seen.add(inner)
            count += 1
    return count


def kernel_allows_split(kernel: Any) -> bool:
    """Our condition (:func:`split_allowed` with upstream's verdict taken as yes) on a live
    kernel; any error rejects the split."""
    try:
        return split_allowed(True, live_outputs(kernel.args))
    except Exception:  # noqa: BLE001 - in doubt, no split
        return False


# -- probe -------------------------------------------------------------------------------
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


def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about an hf_Bert-sized kernel with one and two live outputs
    (2048x768 pointwise store next to the 1x768 reduction store)."""
    store = (pointwise_node("arg0"),)  # the 2048x768 store, fused beside the reduction
    one = outer_sum_kernel(module, {"buf1": "out_ptr0"}, pointwise=store)
    two = outer_sum_kernel(module, {"buf0": "out_ptr0", "buf1": "out_ptr1"}, pointwise=store)
    if not predicate_accepts(module, one):
        raise RuntimeError(f"{TARGET} rejects the one-output control kernel: probe not valid")
    if predicate_accepts(module, two):
        return Probe(True, f"{TARGET} accepts an OUTER sum kernel with two live outputs")
    return Probe(False, f"{TARGET} rejects an OUTER sum kernel with two live outputs")


def narrow_predicate(module: types.ModuleType, patcher: Patcher, allows: Callable[[Any], bool]) -> None:
    """Wrap the split predicate so that a kernel is split only if ``allows(kernel)`` and
    upstream's predicate agree; ours is asked first, so a kernel we reject never reaches
    upstream's. The rsplit fixes each narrow it this way, in any order."""
    def narrowed(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> bool:
        kernel = args[0] if args else kwargs["kernel"]
        return allows(kernel) and bool(wrapped(*args, **kwargs))

    patcher.wrap_path(module, TARGET, narrowed)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, kernel_allows_split)


FIX = Fix(
    name="rsplit-outer",
    about=About(
        symptom=(
            "wrong gradients at step 1 and a NaN loss from step 4 (hf_Bert): an OUTER cross-core split "
            "accepted for a kernel with a second live output"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
