"""promoted-epilogue (report): stores and products after promoted reductions; needs an upgrade.

- **Defect**: upstream corrected several things inside the large codegen methods at once,
  none of them labelled: stores after a promoted (multi-node) reduction keep the block
  sizes of the reduction slots in their ``broadcast_to`` (a store shape that does not match
  the reduced value), a product of a load that covers fewer reduction nodes than the other
  factor is not masked, so pad lanes compute ``0*inf = NaN``, select-lane loads are
  rewritten from the wrong lane, and Cartesian-product loops are emitted for outer
  reduction nodes.
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines`` (store shapes, masked
  products); ``NPUTritonKernel._maybe_record_select_lane_load`` /
  ``_maybe_rewrite_select_lane_load`` (select lanes); the reduction-entry emission and the
  outer-node loop filter in ``_apply_linearize`` (loops).
- **Probe**: the live promoted-reduction rewrite runs on a real ``NPUTritonKernel`` built on
  CPU whose body is a hand-written four-line reduction epilogue (a load over ``r0_1``, a
  load over ``r0_1``/``r0_2``, their product, a store of the reduced value broadcast over
  ``XBLOCK`` and both reduction blocks); defective when the store keeps the reduction blocks
  or the narrower factor is multiplied unmasked. Detected this way, two of the four
  corrections are seen; the select-lane and loop corrections came in the same commit and
  are not probed separately. No kernel is compiled on CPU: the symptoms themselves are not
  reproduced.
- **Fix**: none at run time (guard only; no install). The corrections sit inside large
  methods and only porting upstream's code would make them; the state is reported as
  ``upgrade-needed``.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import types
from collections.abc import Iterator, Sequence
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe, one_line

TARGET = "_npu_apply_promoted_rtree_lines"
KERNEL = "NPUTritonKernel"
UPGRADE = "upgrade torch_npu to a build at or after 95c9094da (2026-08-10) or the published 2.13.0 wheel"
SYMPTOMS = ("store shapes after promoted reductions, 0*inf NaN in masked products, "
            "wrong-lane select loads, Cartesian-product loops")

#: Reduction slots 1 and 2 of a rank-3 tile [XBLOCK, r0_1, r0_2] (r0_2 outermost first).
R_SLOTS = (1, 2)
LEAVES = ("r0_2", "r0_1")
#: A promoted-reduction epilogue: ``tmp0`` covers r0_1 only, ``tmp1`` r0_1 and r0_2.
BODY = (
    "    tmp0 = tl.load(in_ptr0 + (r0_1 + 8*x0), (r0_1mask) & xmask, other=0.0)",
    "    tmp1 = tl.load(in_ptr1 + (r0_1 + 8*r0_2 + 64*x0), (r0_1mask & r0_2mask) & xmask, other=0.0)",
    "    tmp2 = tmp0 * tmp1",
    "    tl.store(out_ptr0 + (x0), tmp3.broadcast_to(XBLOCK, real_block_r0_1, real_block_r0_2), xmask)",
)


def _statements(lines: Sequence[Any]) -> list[ast.stmt]:
    out = []
    for raw in lines:
        line = raw if isinstance(raw, str) else getattr(raw, "line", None)
        if not isinstance(line, str) or not line.strip():
            continue
        try:
            out.extend(ast.parse(line.strip()).body)
        except SyntaxError:
            continue
    return out


def _is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == name


def store_keeps_reduction_blocks(lines: Sequence[Any], r_slots: Sequence[int], ndim: int) -> bool | None:
    """Whether a ``tl.store`` of a rank-``ndim`` value still broadcasts it over block
    sizes at the reduction slots (after the reduction each of them is 1). None: no such
    store in ``lines``."""
    for statement in _statements(lines):
        for store in (n for n in ast.walk(statement) if _is_call(n, "tl.store")):
            for call in ast.walk(store):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "broadcast_to" and len(call.args) == ndim):
                    return any(not (isinstance(call.args[s], ast.Constant) and call.args[s].value == 1)
                               for s in r_slots)
    return None


def product_unmasked(lines: Sequence[Any], product: str, narrow: str, missing_mask: str) -> bool | None:
    """Whether ``product`` multiplies ``narrow`` (the factor that covers fewer reduction
    nodes) as it is, rather than a ``tl.where`` of it under ``missing_mask`` with 0 off
    the mask. None: ``product`` is not assigned a product in ``lines``."""
    defined: dict[str, ast.expr] = {}
    for statement in _statements(lines):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(
                statement.targets[0], ast.Name):
            defined[statement.targets[0].id] = statement.value
    value = defined.get(product)
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult)):
        return None
    for operand in (value.left, value.right):
        if isinstance(operand, ast.Name) and operand.id == narrow:
            return True
        source = defined.get(operand.id) if isinstance(operand, ast.Name) else operand
        if (source is not None and _is_call(source, "tl.where") and len(source.args) == 3
                and any(isinstance(n, ast.Name) and n.id == missing_mask for n in ast.walk(source.args[0]))
                and ast.unparse(source.args[1]) == narrow
                and isinstance(source.args[2], ast.Constant) and source.args[2].value == 0):
            return False
    return None


@contextlib.contextmanager
def cpu_kernel(module: types.ModuleType, x_length: int = 64) -> Iterator[Any]:
    """A real ``NPUTritonKernel`` with one x range, under a fresh CPU ``GraphLowering`` and
    set as the current kernel. Nothing global is changed."""
    import sympy
    import torch
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    graph = GraphLowering(torch.fx.symbolic_trace(torch.nn.Identity()))
    with V.set_graph_handler(graph):
        features = SIMDKernelFeatures([], sympy.Integer(x_length), sympy.Integer(1))
        kernel = getattr(module, KERNEL)({"x": sympy.Integer(x_length)}, features=features)
        with V.set_kernel_handler(kernel):
            yield kernel


def rewrite_epilogue(module: types.ModuleType, body: Sequence[str] = BODY) -> list[Any]:
    """Run the live promoted-reduction rewrite over ``body``; return the rewritten lines.
    The body holds no reduction loop, so only the whole-body passes act on it."""
    rewrite = getattr(module, TARGET)
    params = inspect.signature(rewrite).parameters
    kwargs: dict[str, Any] = dict(
        prefix="r0_", blk_defs=[], blk_node_names=[], arange_lines=[],
        combined_mask="r0_2mask & r0_1mask", collapsed_shape="[XBLOCK, real_block_r0_1*real_block_r0_2]",
        collapsed_dim=1, post_resize="[:, None, None]", r_slots=list(R_SLOTS), real_ndim=3,
    )
    if "leaf_names" in params:  # from 95c9094da on
        kwargs["leaf_names"] = list(LEAVES)
    with cpu_kernel(module) as kernel:
        kernel.body._lines = list(body)
        rewrite(kernel, **kwargs)
        return list(kernel.body._lines)


def probe(module: types.ModuleType) -> Probe:
    """Rewrite the hand-written epilogue with the live code; look at the store and product."""
    try:
        lines = rewrite_epilogue(module)
    except Exception as exc:  # noqa: BLE001 - a rewrite we cannot run is not judged
        return Probe(False, f"could not run the promoted-reduction rewrite ({one_line(exc)}): "
                            "defect not seen")
    store = store_keeps_reduction_blocks(lines, R_SLOTS, 3)
    product = product_unmasked(lines, "tmp2", "tmp0", "r0_2mask")
    seen = [text for flag, text in ((store, "the store keeps the reduction block sizes"),
                                    (product, "the narrower factor of a product is not masked"))
            if flag]
    if seen:
        return Probe(True, f"codegen predates 95c9094da ({SYMPTOMS}): after a promoted "
                           f"reduction {' and '.join(seen)}; detected by running the live "
                           "promoted-reduction rewrite on a hand-written kernel body on CPU, "
                           f"not reproduced (no kernel compiled); no run-time repair: {UPGRADE}")
    if store is None or product is None:
        return Probe(False, "promoted-reduction rewrite left no store or product to judge: "
                            "defect not seen")
    return Probe(False, "after a promoted reduction the store collapses the reduction slots "
                        "and the narrower factor of a product is masked")


FIX = Fix(
    name="promoted-epilogue",
    old_names=("codegen-misc-95c",),
    about=About(
        symptom=(
            "wrong stores after promoted reductions, NaN from `0*inf` in masked products, wrong-lane select "
            "loads"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET, KERNEL),
    probe=probe,
    install=None,
    repairable=False,
)
