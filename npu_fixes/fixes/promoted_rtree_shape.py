"""promoted-rtree-shape: a masked load of a promoted reduction gets a pointer of the mask's shape.

- **Defect**: ``rtree_real_block`` (on by default) promotes the free nodes of a reduction
  tree to tensor slots of their own and widens each load's mask to the whole block. A load
  whose address does not use every node (a factor broadcast inside the reduction:
  ``(a.view(4, 512, 32) * b[None]).sum(dim=(0, 1))``, or a per-position weight in a per-head
  sum) keeps a pointer of a bar's shape (``[1, 1, 1, r0_2_blk]``) against a mask of the
  block's (``[1, 1, r0_3_blk, r0_2_blk]``). Stock Triton broadcasts the pointer to the mask
  and computes right; triton-ascend does not broadcast them (upstream's wheel: "triton-ascend
  rejects the implicit ptr-vs-mask broadcasts"), so on the NPU such a kernel does not build.
  Not run on Ascend hardware here: on CPU the shapes in the generated kernel are the
  observable.
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines``, which rewrites the kernel
  body of one promoted reduction tree.
- **Probe**: does the function leave a bar-shaped load as it is? (a per-position weight
  loaded inside a per-head sum: address of node ``r0_2`` only, mask of both promoted nodes
  ``r0_3`` and ``r0_2``, rank 4).
- **Fix**: the function runs unchanged; then each masked load whose mask names a promoted
  node's mask but whose address leaves out one of those nodes gets its address broadcast
  to the block, ``tl.broadcast_to(<address>, [<each slot's block extent>])``, as the wheel
  emits it. The extents are the promoted value's (the collapsed shape with its reduction
  entry split back into the nodes' blocks); where they cannot be read, the load is left.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.kernel_text import calls, names
from .shared.promoted import TARGET, promoted_rewrite, rewrite_body, spliced

#: A per-position weight loaded inside a per-head sum as bafc50684 emits it: address of node
#: ``r0_2`` only, mask of both promoted nodes (slots 2 and 3 of rank 4).
PROBE_LOAD = "    tmp1 = tl.load(in_ptr1 + (r0_2), (r0_3mask & r0_2mask), other=0.0)"
PROBE_TOKENS = ["real_block_x5", "real_block_x4", "r0_3_blk", "r0_2_blk"]
PROBE_R_SLOTS = [2, 3]


def slot_tokens(collapsed_shape: str, collapsed_dim: int, real_ndim: int) -> list[str] | None:
    """Each slot's block extent: ``collapsed_shape`` (``[a, b, r0_3_blk*r0_2_blk]``) with its
    entry ``collapsed_dim`` split back into its factors; None where that does not give
    ``real_ndim`` entries."""
    try:
        shape = ast.parse(collapsed_shape, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(shape, ast.List) or not 0 <= collapsed_dim < len(shape.elts):
        return None

    def factors(node: ast.AST) -> list[str]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return factors(node.left) + factors(node.right)
        return [ast.unparse(node)]

    entries = [ast.unparse(e) for e in shape.elts]
    tokens = entries[:collapsed_dim] + factors(shape.elts[collapsed_dim]) + entries[collapsed_dim + 1:]
    return tokens if len(tokens) == real_ndim else None


def broadcast_load(line: str, leaves: Sequence[str], tokens: Sequence[str]) -> str | None:
    """``line`` with the address of its masked ``tl.load`` broadcast to ``tokens`` where the
    mask names ``<leaf>mask`` of a leaf the address leaves out; None where nothing changes."""
    stripped = line.lstrip()
    if "tl.load(" not in stripped:
        return None
    try:
        statement = ast.parse(stripped)
    except SyntaxError:
        return None
    edits = []
    for load in calls(statement, "tl.load"):
        if len(load.args) < 2 or isinstance(load.args[1], ast.Constant):
            continue
        pointer = load.args[0]
        if not (isinstance(pointer, ast.BinOp) and isinstance(pointer.op, ast.Add)
                and isinstance(pointer.left, ast.Name)):
            continue
        masked = {leaf for leaf in leaves if f"{leaf}mask" in names(load.args[1])}
        address = pointer.right
        if (not masked or masked <= names(address) or address.lineno != address.end_lineno
                or isinstance(address, ast.Call) and ast.unparse(address.func) == "tl.broadcast_to"):
            continue
        text = f"tl.broadcast_to({ast.unparse(address)}, [{', '.join(tokens)}])"
        edits.append((address.col_offset, address.end_col_offset, text))
    return spliced(line, edits)


def leaves_of(arguments: dict[str, Any]) -> list[str]:
    """The tree's free nodes: ``leaf_names`` where the function takes it, else its block
    names (``r0_2_blk``, static ``real_block_r0_2``) read back (8bfbb9ed1)."""
    if "leaf_names" in arguments:
        return list(arguments["leaf_names"])
    blocks = arguments["blk_node_names"]
    return [str(block).removeprefix("real_block_").removesuffix("_blk") for block in blocks]


def install(module: types.ModuleType, patcher: Patcher) -> None:
    signature = inspect.signature(getattr(module, TARGET))

    def apply_lines(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        bound = signature.bind(*args, **kwargs).arguments
        tokens = slot_tokens(bound["collapsed_shape"], bound["collapsed_dim"], bound["real_ndim"])
        if tokens is not None:
            leaves = leaves_of(bound)
            rewrite_body(bound["kernel"], lambda line: broadcast_load(line, leaves, tokens))
        return result

    patcher.wrap_path(module, TARGET, apply_lines)


def probe(module: types.ModuleType) -> Probe:
    """Run the live function on :data:`PROBE_LOAD` (two promoted nodes, rank 4): does the
    load keep a pointer narrower than its mask?"""
    line = promoted_rewrite(module, PROBE_LOAD, "r0_3mask & r0_2mask",
                            "[real_block_x5, real_block_x4, r0_3_blk*r0_2_blk]", 2, "[:, :, None, None]",
                            PROBE_R_SLOTS, PROBE_TOKENS, leaves=["r0_3", "r0_2"])
    if broadcast_load(line, ["r0_3", "r0_2"], PROBE_TOKENS) is None:
        return Probe(False, f"the promoted rewrite gives the load a pointer of the mask's shape: {line}")
    return Probe(True, f"a promoted reduction's load keeps a pointer of node r0_2 only under the mask of "
                       f"r0_3 and r0_2: {line} (workaround: rtree_real_block=False)")


FIX = Fix(
    name="promoted-rtree-shape",
    about=About(
        symptom=(
            "a reduction with a load narrower than its mask (a weight broadcast inside the sum) does not "
            "build on triton-ascend"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="`torch_npu._inductor.triton_experimental.config.rtree_real_block = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
