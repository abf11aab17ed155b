"""permuted-full-reduction: the store of a promoted full reduction keeps its old rank.

- **Defect**: a full reduction of a permuted view (``x.view(64, 16).t().reshape(-1).sum()``)
  keeps two free reduction nodes; ``rtree_real_block`` (on by default) promotes them to
  tensor slots of their own, so the summed value has rank 3 (``[1, 1, 1]``). Its store
  address is the scalar index ``tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)``,
  emitted at the rank before promotion. Up to 95c9094da the linearize post-pass re-ranked
  such indexes; 22fb7f528 deleted that code with the rank-mismatch fix, and the promoted
  rewrite does not do it, so the kernel does not build: ``ValueError: Expected pointer
  argument to have shape [1, 1, 1] but got [1, 1]`` (Triton; the report names ``[1, 8, 1]``
  and ``[8, 1]``).
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines``, which rewrites the kernel
  body of one promoted reduction tree (called once per tree by ``codegen_body``).
- **Probe**: does the function leave the probe's scalar store index at rank 2 against a
  rank-3 value while ``NPUTritonScheduling._apply_linearize`` has no scalar-index re-rank of
  its own?
- **Fix**: the function runs unchanged; then each store whose address holds a
  ``tl.full([1, ...], v, dt).broadcast_to(...)`` of lower rank is given the promoted rank,
  as the published wheel does: ``[1] * real_ndim``, the reduction slots 1 and the kept
  slots their block extents, in order (``broadcast_to(1, 1, XBLOCK)`` above). A store whose
  kept extents cannot be matched one to one is left as it was.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable, Sequence
from typing import Any

from ..shim.catalogue import WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.kernel_text import calls
from .shared.promoted import TARGET, promoted_rewrite, rewrite_body, spliced

#: The scalar store of ``x.view(64, 16).t().reshape(-1).sum()`` as bafc50684 emits it,
#: before promotion: two reduction slots (0 and 1) and the x slot (2) make rank 3.
PROBE_STORE = "    tl.store(out_ptr0 + (tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)), tmp2, None)"
PROBE_R_SLOTS, PROBE_NDIM = [0, 1], 3


def _scalar_index(node: ast.AST, real_ndim: int) -> bool:
    """Whether ``node`` is ``tl.full([1, ...], v, dt).broadcast_to(...)`` below ``real_ndim``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "broadcast_to" and len(node.args) < real_ndim and not node.keywords):
        return False
    full = node.func.value
    return (isinstance(full, ast.Call) and ast.unparse(full.func) == "tl.full" and len(full.args) == 3
            and isinstance(full.args[0], ast.List) and len(full.args[0].elts) < real_ndim
            and all(isinstance(e, ast.Constant) and e.value == 1 for e in full.args[0].elts))


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1


def reranked(line: str, r_slots: Sequence[int], real_ndim: int) -> str | None:
    """``line`` with the scalar store indexes of its ``tl.store`` at rank ``real_ndim``
    (``r_slots`` 1, the other slots the old non-1 extents in order); None where nothing
    changes."""
    stripped = line.lstrip()
    if "tl.store(" not in stripped:
        return None
    try:
        statement = ast.parse(stripped)
    except SyntaxError:
        return None
    found = [n for store in calls(statement, "tl.store") if store.args
             for n in ast.walk(store.args[0]) if _scalar_index(n, real_ndim)]
    kept = [s for s in range(real_ndim) if s not in r_slots]
    edits = []
    for node in found:
        extents = [ast.unparse(a) for a in node.args if not _is_one(a)]
        if node.lineno != node.end_lineno or len(extents) != len(kept):
            continue
        full = node.func.value
        target = ["1" if s in r_slots else extents[kept.index(s)] for s in range(real_ndim)]
        text = (f"tl.full([{', '.join(['1'] * real_ndim)}], {ast.unparse(full.args[1])}, "
                f"{ast.unparse(full.args[2])}).broadcast_to({', '.join(target)})")
        edits.append((node.col_offset, node.end_col_offset, text))
    return spliced(line, edits)


def rerank_body(kernel: Any, r_slots: Sequence[int], real_ndim: int) -> None:
    """Re-rank the scalar store indexes in ``kernel.body._lines``."""
    rewrite_body(kernel, lambda line: reranked(line, r_slots, real_ndim))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    signature = inspect.signature(getattr(module, TARGET))

    def apply_lines(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        bound = signature.bind(*args, **kwargs).arguments
        rerank_body(bound["kernel"], bound["r_slots"], bound["real_ndim"])
        return result

    patcher.wrap_path(module, TARGET, apply_lines)


# -- probe -------------------------------------------------------------------------------
def probe_store(module: types.ModuleType) -> str:
    """What the live function makes of :data:`PROBE_STORE`."""
    return promoted_rewrite(module, PROBE_STORE, "r0_mask", "[R0_BLOCK, 1]", 0, "[None, None, :]",
                            PROBE_R_SLOTS, ["r0_2_blk", "r0_1_blk", "XBLOCK"])


def linearize_reranks(module: types.ModuleType) -> bool:
    """Whether the live ``NPUTritonScheduling._apply_linearize`` re-ranks scalar store
    indexes itself (its code builds ``tl.full(...`` texts: up to 95c9094da)."""
    try:
        source = inspect.getsource(inspect.unwrap(module.NPUTritonScheduling._apply_linearize))
    except (AttributeError, OSError, TypeError):
        return False
    return any(isinstance(n, ast.JoinedStr) and ast.unparse(n).startswith("f'tl.full(")
               for n in ast.walk(ast.parse(textwrap.dedent(source))))


def probe(module: types.ModuleType) -> Probe:
    """Run the live function on :data:`PROBE_STORE` (two reduction slots, rank 3), and read
    whether the linearize post-pass re-ranks such indexes before it."""
    line = probe_store(module)
    if reranked(line, PROBE_R_SLOTS, PROBE_NDIM) is None:
        return Probe(False, f"the promoted rewrite gives the rank-3 store index: {line}")
    if linearize_reranks(module):
        return Probe(False, "the linearize post-pass re-ranks scalar store indexes, before the promoted "
                            "rewrite")
    return Probe(True, f"a promoted full reduction keeps a rank-2 store index against a rank-3 value: {line} "
                       "(workaround: rtree_real_block=False)")


FIX = Fix(
    name="permuted-full-reduction",
    about=About(
        symptom=(
            "a full reduction of a permuted view does not build: `ValueError: Expected pointer argument to "
            "have shape [1, 1, 1] but got [1, 1]` (`x.view(64, 16).t().reshape(-1).sum()`)"
        ),
        present=frozenset({"f8802037a", "5ff81d9c5", "bafc50684"}),
        fixed_in=WHEEL,
        workaround="`torch_npu._inductor.triton_experimental.config.rtree_real_block = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
