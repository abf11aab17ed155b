"""rank-mismatch: an x tree whose nodes are all folded away still holds one tensor slot.

- **Defect**: in linearize mode ``triton_tensor_ndim`` counts one slot per free x node. An
  x tree that keeps its tensor slot but has every node folded away (``xnumel`` 1, as in
  ``sum(dim=0, keepdim=True)`` of ``[4096, 1]``) counts zero, so the kernel is linearized
  one rank short: accumulator ``[R0_BLOCK]`` and ``promote_to_tensor`` where the fixed
  release has ``[R0_BLOCK, 1]`` and ``[:, None]``. Whatever keeps the 2-D shape then
  fails the kernel build with ``ValueError('Cannot broadcast, rank mismatch: ...')``
  (upstream's report: ``[1], [1, 1]``; generated on CPU at 8bfbb9ed1:
  ``(x + x[5, 0]).sum(dim=0, keepdim=True)``). The plain keepdim sum builds on these
  releases, because the store fixup below shrinks its scalar store index as well.
- **Where**: ``codegen.triton.NPUTritonKernel.triton_tensor_ndim`` (read by
  ``NPUTritonScheduling._apply_linearize``, ``dense_size_str``, ``reduction_resize`` and
  the other shape helpers).
- **Probe**: is the count for a linearized kernel with such an x tree and a reduction tree 1
  rather than 2?
- **Fix**: the method runs unchanged; in linearize mode, once the kernel is linearized,
  :func:`folded_x_trees` more slots are added: one per x tree that has a tensor slot but
  no counted node. Every other count is left as it is.
- **Not repaired**: upstream deleted, with this fix, a store fixup inside
  ``_apply_linearize`` that re-ranks scalar store indexes (``tl.full([1, ...], ...)``)
  and rewrites ``.broadcast_to(...)`` store targets from the pre-linearize to the
  linearized block sizes. It is inline code and cannot be removed by wrapping. With the
  corrected count it no longer changes ranks here, but it still rewrites the kept 2-D
  scalar store target ``.broadcast_to(XBLOCK, 1)`` into ``.broadcast_to(1, 1)`` (the
  stored value's shape; both build). Generated on CPU at 95c9094da, the repaired
  keepdim kernels equal f8802037a's but for that.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import code_globals, scoped_method
from .shared.linearize import linearized as linearize_mode

TARGET = "NPUTritonKernel.triton_tensor_ndim"


def counted_nodes(tree: Any) -> int:
    """The nodes of an x tree that get a slot of their own: neither folded into another
    node (``tree_node_mapping``) nor a scalar odometer axis."""
    folded = set(getattr(tree, "tree_node_mapping", None) or {})
    scalar = set(getattr(tree, "_npu_scalar_odometer", None) or ())
    return sum(1 for node in tree.nodes.values() if node.name not in folded | scalar)


def folded_x_trees(range_trees: Iterable[Any]) -> int:
    """Slots the pre-fix count misses: x trees with a tensor slot and no counted node
    (each still occupies one slot in the linearized tile)."""
    return sum(
        1 for tree in range_trees
        if tree.tensor_dim is not None and not tree.is_reduction and counted_nodes(tree) == 0
    )


def linearized(kernel: Any, namespace: dict[str, Any]) -> bool:
    """Whether ``triton_tensor_ndim`` counts per node for ``kernel``: linearize mode and the
    linearize post-pass has run on it."""
    return linearize_mode(kernel, namespace) and bool(getattr(kernel, "_linearize_applied", False))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def tensor_ndim(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        ndim = wrapped(*args, **kwargs)
        kernel = args[0] if instance is None else instance
        if not linearized(kernel, code_globals(wrapped, vars(module))):
            return ndim
        return ndim + folded_x_trees(kernel.range_trees)

    patcher.wrap_path(module, TARGET, tensor_ndim)


# -- probe -------------------------------------------------------------------------------
def keepdim_sum_kernel() -> types.SimpleNamespace:
    """Stand-in of ``sum(dim=0, keepdim=True)`` of ``[4096, 1]`` after the linearize
    post-pass: x tree (xnumel 1) whose only node ``x0`` is folded into the mapping, and an
    unpromoted reduction tree ``r0_`` (4096); both trees keep a tensor slot."""
    import sympy

    NS = types.SimpleNamespace
    x = NS(prefix="x", is_reduction=False, tensor_dim=0, tree_node_mapping={"x0": sympy.Integer(0)},
           _npu_scalar_odometer=set(), nodes={"x0": NS(name="x0", length=sympy.Integer(1))})
    r = NS(prefix="r0_", is_reduction=True, tensor_dim=0, tree_node_mapping={},
           nodes={"r0_0": NS(name="r0_0", length=sympy.Integer(4096))})
    return NS(range_trees=[x, r], _linearize_applied=True, _npu_linearize=True,
              _npu_rtree_promoted={})


def probe(module: types.ModuleType) -> Probe:
    """Count the tensor slots of :func:`keepdim_sum_kernel` with the live method
    (linearize on): two trees with a slot each must give 2."""
    kernel = keepdim_sum_kernel()
    count = scoped_method(module.NPUTritonKernel, "triton_tensor_ndim",
                          kernel, {"triton_codegen_linearize": True})
    ndim = count()
    if ndim != 2:
        return Probe(True, f"linearized keepdim sum (x tree folded away + r tree) counts {ndim} tensor slots")
    return Probe(False, "linearized keepdim sum (x tree folded away + r tree) counts 2 tensor slots")


FIX = Fix(
    name="rank-mismatch",
    about=About(
        symptom=(
            "kernel build fails: `ValueError('Cannot broadcast, rank mismatch: [1], [1, 1]')` (a reduction to"
            " one element kept 2-D, e.g. `sum(dim=0, keepdim=True)` of `[4096, 1]`)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da"}),
        fixed_in="22fb7f528",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
