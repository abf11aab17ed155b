"""promoted-tile-mask: a load indexed by an outer node of a promoted reduction reads past the
node's last tile.

- **Defect**: ``NPUTritonKernel.indexing`` gives the reduction mask only to an index that uses
  the innermost node of a reduction tree: it takes the outer nodes for scalar loop variables,
  which need no mask. ``rtree_real_block`` (on by default) later promotes the tree, and with
  dynamic shapes it runs each node in a tiled loop of its own (``for r0_2inner in range(0,
  r0_2numel, r0_2_blk)``) whose last tile is partial, guarded by ``r0_2mask``. A load indexed
  by an outer node alone keeps no mask of it (a per-channel weight inside a sum over channels
  and positions, ``(x * w[:, None]).sum((1, 2))`` under ``dynamic=True``:
  ``tl.load(in_ptr1 + (r0_2), None)``) and reads past the node's length on the last tile: an
  out-of-bounds access (hidden where one tile covers the whole node). Every state has it, the
  published wheels too.
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines``, which writes the nodes' loops
  and masks and only replaces a load's existing ``r0_mask`` (promotion is decided in
  ``_apply_linearize``, after the loads were indexed).
- **Probe**: the live function on a dynamic promoted body of two tiled nodes holding a load
  indexed by the outer node only: does the load's mask come out with that node's mask? (The
  wheels' function rebuilds each loop from the kernel's record of its reduction pass: the probe
  gives it one, without index aliases.)
- **Fix**: the function runs unchanged; then, in a dynamic rewrite, each ``tl.load`` of the
  body whose address names a tiled node ``N`` while its mask lacks ``Nmask`` gets ``Nmask``
  ANDed into its mask (a load without a mask gets ``Nmask`` as its mask). The lanes it masks
  off lie outside the node, where the accumulation's own mask drops them.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.kernel_text import calls, load_mask, names
from .shared.promoted import TARGET, looped_sum, rewrite_body, spliced, two_node_lines

#: The probe's load: a per-row weight of the outer tiled node ``r0_1``, unmasked as
#: ``indexing`` leaves it.
PROBE_LOAD = "tmp1 = tl.load(in_ptr1 + (r0_1), None, eviction_policy='evict_last')"


def tile_masked(line: str, tiled: Sequence[str]) -> str | None:
    """``line`` with ``<N>mask`` ANDed into the mask of each ``tl.load`` whose address names
    a node ``N`` of ``tiled`` and whose mask lacks it; None where nothing changes."""
    stripped = line.lstrip()
    if "tl.load(" not in stripped:
        return None
    try:
        statement = ast.parse(stripped)
    except SyntaxError:
        return None
    edits = []
    for load in calls(statement, "tl.load"):
        if not load.args:
            continue
        address, mask = load.args[0], load_mask(load)
        missing = [f"{node}mask" for node in tiled
                   if node in names(address) and f"{node}mask" not in names(mask)]
        if not missing or address.lineno != address.end_lineno:
            continue
        added = " & ".join(missing)
        if mask is None:  # no mask at all: the first keyword follows the address
            edits.append((address.end_col_offset, address.end_col_offset, f", {added}"))
        elif isinstance(mask, ast.Constant) and mask.value is None:
            edits.append((mask.col_offset, mask.end_col_offset, added))
        elif mask.lineno == mask.end_lineno:
            edits.append((mask.col_offset, mask.end_col_offset, f"({ast.unparse(mask)}) & {added}"))
    return spliced(line, edits)


def tiled_nodes(arguments: dict[str, Any]) -> list[str]:
    """The nodes the rewrite gives tiled loops of their own: those of ``loop_nodes``
    (``(name, slot, tile, numel)``) where ``dynamic`` is set; none in a static rewrite."""
    if not arguments.get("dynamic"):
        return []
    return [entry[0] for entry in arguments.get("loop_nodes") or ()]


def install(module: types.ModuleType, patcher: Patcher) -> None:
    signature = inspect.signature(getattr(module, TARGET))

    def apply_lines(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        bound = signature.bind(*args, **kwargs).arguments
        tiled = tiled_nodes(bound)
        if tiled:
            rewrite_body(bound["kernel"], lambda line: tile_masked(line, tiled))
        return result

    patcher.wrap_path(module, TARGET, apply_lines)


def _rewritten_load(module: types.ModuleType) -> str:
    """The probe's load as the live function leaves it in a dynamic promoted body whose two
    nodes, ``r0_1`` (outer) and ``r0_0``, each run in a tiled loop."""
    body = looped_sum("tmp3", ["tmp0 = tl.load(in_ptr0 + (r0_0 + ks0*r0_1), r0_mask, other=0.0)", PROBE_LOAD,
                               "tmp2 = tmp0 * tmp1", "_tmp3 = _tmp3 + tmp2"])
    lines = two_node_lines(module, body, dynamic=True, with_passes=True)
    return next(line.strip() for line in lines if line.strip().startswith("tmp1 = tl.load("))


def probe(module: types.ModuleType) -> Probe:
    line = _rewritten_load(module)
    if tile_masked(line, ["r0_1"]) is None:
        return Probe(False, f"the promoted rewrite masks a load of an outer tiled node with its tile: {line}")
    return Probe(True, f"a load indexed by the outer tiled node r0_1 keeps no r0_1mask after the promoted "
                       f"rewrite: {line} (it reads past the node's last tile; workaround: dynamic=False)")


FIX = Fix(
    name="promoted-tile-mask",
    about=About(
        symptom=(
            "a reduction over several dimensions with a load of an outer one alone (a per-channel "
            "weight inside the sum: `(x * w[:, None]).sum((1, 2))`, group norm's backward) reads out of "
            "bounds under `dynamic=True`"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="compile with `dynamic=False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
