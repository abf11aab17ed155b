"""flat-rnode-mask: a load through the whole-range node of a split reduction loses its mask
and reads past its buffer.

- **Defect**: in linearize mode (``codegen_linearize``, on by default) ``indexing`` gives a
  load the reduction mask ``r0_mask`` only where its index uses the tree's innermost free
  node, taken as the one node of smallest divisor. A split tree can hold two nodes of
  divisor 1: the inner part (``r0_0``, length ``b``) and the whole range (``r0_2 = r0_index``,
  length ``a*b``), which ``indexing`` itself creates when it merges ``r0_0 + b*r0_1``. A load
  through the whole-range node gets no mask, and on the last block it reads past its buffer
  (a ``slice_scatter`` into a transposed view, then ``amax``: the sweep's ``gen:96``; the
  values read are discarded by the accumulator's guard, the reads are not). So does a load
  through a node the tree was split from (kept in its ``tree_node_mapping``, ``r0_0 = r0_1 +
  1023*r0_2``): the shifted-label cross entropy of causal-LM training,
  ``F.cross_entropy(logits[..., :-1, :], labels[..., 1:])`` over 2 x 1023 tokens, reads one
  element past the per-token loss on the last block of 512 (f8802037a on, both wheels); on a
  device a read past an allocation can fault, depending on the block size autotuning picks.
- **Where**: ``codegen.triton.NPUTritonKernel.indexing``.
- **Probe**: the live ``indexing`` on a CPU kernel whose r0 range of 65 has nodes of 5, 13
  and the whole range: does ``r0_0`` get ``r0_mask`` and ``r0_0 + 5*r0_1`` (emitted as the
  whole-range node) none?
- **Fix**: after ``indexing``, an index through a node (free, or split into free ones) whose
  divisor equals the smallest one of the tree's free nodes gets that tree's mask too, unless
  the kernel's own mask filter drops it (a tree whose mask is constant, a reduction whose
  guard is proven dead).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_reduction_kernel

TARGET = "NPUTritonKernel.indexing"


def _divisor_key(node: Any) -> int:
    import sympy
    from torch._inductor.virtualized import V

    if isinstance(node.divisor, (int, sympy.Integer)):
        return int(node.divisor)
    return int(V.graph.sizevars.optimization_hint(node.divisor))


def missing_masks(kernel: Any, result: Any) -> list[str]:
    """The reduction masks ``result`` (an ``IndexingOptions``) lacks though its index runs
    through a node of its tree's smallest free divisor (trees of two or more free nodes)."""
    used = {symbol.name for symbol in result.index.free_symbols}
    missing = []
    for tree in kernel.range_trees:
        mask = f"{tree.prefix}mask"
        if not tree.is_reduction or mask in result.mask_vars:
            continue
        mapped = getattr(tree, "tree_node_mapping", {})
        free = [node for node in tree.nodes.values() if node.name not in mapped]
        if len(free) < 2:
            continue
        smallest = min(_divisor_key(node) for node in free)
        # a node split into others (its mapping) runs over their whole range too
        if any(node.symbol().name in used and _divisor_key(node) == smallest for node in tree.nodes.values()):
            missing.append(mask)
    return missing


def with_masks(kernel: Any, result: Any) -> Any:
    """``result`` with :func:`missing_masks` added where the kernel's ``filter_masks`` keeps
    them; ``result`` itself where nothing is added."""
    import dataclasses

    from torch._inductor.codegen.triton import IndexingOptions
    from torch.utils._ordered_set import OrderedSet

    if not isinstance(result, IndexingOptions):
        return result
    added = OrderedSet(missing_masks(kernel, result))
    kernel.filter_masks(added)
    if not added:
        return result
    return dataclasses.replace(result, mask_vars=OrderedSet([*result.mask_vars, *added]))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def indexing(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        if not module.triton_codegen_linearize or kwargs.get("override_mask"):
            return result
        return with_masks(instance, result)

    patcher.wrap_path(module, TARGET, indexing)


def masks_of(module: types.ModuleType) -> tuple[Any, Any]:
    """The masks the live ``indexing`` gives ``r0_0`` and ``r0_0 + 5*r0_1`` (emitted as the
    whole-range node) in a CPU kernel whose r0 range of 65 is split into 5 x 13."""
    import sympy

    with cpu_reduction_kernel(module, 65) as kernel:
        tree = next(t for t in kernel.range_trees if t.is_reduction)
        inner = tree.lookup(sympy.Integer(1), sympy.Integer(5)).symbol()
        outer = tree.lookup(sympy.Integer(5), sympy.Integer(13)).symbol()
        tree.lookup(sympy.Integer(1), sympy.Integer(65))  # the whole range (a body reading r0_index)
        merged = kernel.indexing(inner + 5 * outer)
        return kernel.indexing(inner).mask_vars, merged


def probe(module: types.ModuleType) -> Probe:
    if not module.triton_codegen_linearize:
        return Probe(False, "linearize mode is off: indexing gives every reduction node the tree's mask")
    inner, merged = masks_of(module)
    if "r0_mask" not in inner:
        return Probe(False, f"the inner node of a split reduction gets no r0_mask here ({list(inner)}): "
                            "defect not seen")
    if "r0_mask" not in merged.mask_vars:
        return Probe(True, f"a load through the split reduction's whole-range node ({merged.index}) gets no "
                           f"r0_mask (masks {list(merged.mask_vars)}): it reads past its buffer on the last "
                           "block")
    return Probe(False, f"a load through the whole-range node ({merged.index}) keeps r0_mask")


FIX = Fix(
    name="flat-rnode-mask",
    about=About(
        symptom="a reduction over a split range reads past its input on the last block (the "
                "shifted-label cross entropy of causal-LM training; a `slice_scatter` into a transposed "
                "view, then `amax`), with no error",
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="`torch_npu._inductor.triton_experimental.config.codegen_linearize = False`, set before "
                   "the backend's codegen module is imported (it is read once, then)",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
