"""widened-load-inner-axis: a widened select keeps a mask or an address shaped along the axis
its lanes replace.

- **Defect**: a select of one element of rows of K (``x[:, c]`` in a kernel whose innermost
  axis runs over something else) is widened into K contiguous lanes taken along the
  innermost tile axis, then narrowed to lane 0 with ``extract_slice``. The load keeps its
  own mask and address as they were; where the select sits under a condition on that axis
  (the masked loads of ``slice_backward``, the backward of circular padding) or its address
  was broadcast to the whole tile, those are shaped along the axis the lanes stand in for:

  - the tile along it is not K wide: the load stops the compile, ``Cannot
    make_shape_compatible: incompatible dimensions ... 3 and 4`` (``F.pad(...,
    mode="circular")`` backward, ``Conv1d(padding_mode="circular")`` training);
  - it is K wide: lane j is loaded under the condition of position j of the tile, and lane
    0, the one kept, only where position 0's holds, so positions whose condition holds
    while position 0's does not get the masked default (0), silently.

  A stride-k slice (``x[:, ::k]``) replaces the inner mask by its own and keeps any other
  condition on the axis, with the same shapes.
- **Where**: ``codegen.triton.NPUTritonKernel._maybe_rewrite_select_lane_load`` (every state,
  both wheels; at 8bfbb9ed1 its text match skips loads with a bracketed address, so only a
  masked select of a plain address is widened there).
- **Probe**: the live method on a CPU kernel, given a select load masked by a condition on
  the inner axis: does it widen that load?
- **Fix**: loads whose mask, or whose address where it does not index the inner axis itself,
  depends on the inner axis (followed through the kernel's assignments) are left as plain
  loads, as with ``select_extract_slice`` off; every other select is widened as before.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable, Iterable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel
from .shared.kernel_text import calls, load_mask, names

TARGET = "NPUTritonKernel._maybe_rewrite_select_lane_load"
#: The probe's kernel body: element 1 of a buffer, loaded where ``x0 >= 3``.
PROBE_BODY = (
    "    x0index = x0offset + tl.arange(0, real_block_x0)[:]",
    "    x0 = x0index",
    "    x0mask = x0index < x0numel",
    "    tmp0 = x0 >= 3",
    "    tmp1 = tl.load(in_ptr0 + (1), tmp0, other=0.0)",
)


def _assignment(line: Any) -> ast.Assign | None:
    text = line if isinstance(line, str) else getattr(line, "line", None)
    try:
        body = ast.parse(text.strip()).body if isinstance(text, str) else []
    except SyntaxError:
        return None
    return body[0] if len(body) == 1 and isinstance(body[0], ast.Assign) else None


def _tile_token(assign: ast.Assign) -> set[str]:
    """The names in ``tl.arange(0, TOKEN)`` of an index line: the tile's size along its axis."""
    aranges = calls(assign.value, "tl.arange")
    return set().union(*(names(call.args[1]) for call in aranges if len(call.args) == 2))


def varying_loads(lines: Iterable[Any], inner: str, prefix: str) -> set[str]:
    """The result names of the loads in ``lines`` whose mask (less the ``{inner}mask`` a
    stride-k widening replaces), or whose address where it does not index ``inner`` itself,
    depends on the inner axis ``inner`` of a tree of ``prefix``: through its index, offset,
    mask, tile size, or any assignment of those."""
    varying = {inner, f"{inner}index", f"{inner}offset", f"{inner}mask", f"{prefix}mask"}
    loads = set()
    for line in lines:
        assign = _assignment(line)
        if assign is None:
            continue
        assigned = set().union(*(names(target) for target in assign.targets))
        if assigned == {f"{inner}index"}:
            varying |= _tile_token(assign)
        load = next(iter(calls(assign.value, "tl.load")), None)
        if load is not None and load.args:
            address, condition = names(load.args[0]), names(load_mask(load))
            if inner in address:  # a stride-k slice: its address is rebuilt, its inner mask replaced
                address, condition = set(), condition - {f"{inner}mask"}
            if (address | condition) & varying:
                loads |= assigned
        if names(assign.value) & varying:
            varying |= assigned
    return loads


def inner_axis(kernel: Any) -> tuple[str, str] | None:
    """The kernel's innermost tile axis and its tree's prefix, as the rewrite finds them
    (None where it would not rewrite)."""
    slots = {}
    for tree in kernel.range_trees:
        dims = {} if tree.is_reduction else getattr(tree, "var_tensor_dims", None) or {}
        slots |= {slot: (name, tree.prefix) for name, slot in dims.items()}
    try:
        return slots.get(kernel.triton_tensor_ndim() - 1)
    except Exception:  # noqa: BLE001 - a kernel the rewrite would leave too
        return None


def _rewritten(module: types.ModuleType) -> list[str] | None:
    """The live rewrite's body for :data:`PROBE_BODY` on a CPU kernel whose one axis is
    ``x0`` (None: the method is not as this fix knows)."""
    import sympy

    if not getattr(module, "triton_codegen_linearize", False):
        return None
    with cpu_kernel(module) as (kernel, _):
        tree = kernel.range_trees[0]
        tree.var_tensor_dims, tree.node_block_constexpr = {"x0": 0}, {"x0": "real_block_x0"}
        kernel._linearize_applied = True
        recorded = {"lane": 4, "index": sympy.Integer(1), "pointer": "in_ptr0"}
        if not hasattr(kernel, "_select_index_node_relation"):  # 8bfbb9ed1 records the lane only
            recorded = 4
        kernel._npu_select_lane_loads = {"tmp1": recorded}
        kernel.body._lines = list(PROBE_BODY)
        kernel._maybe_rewrite_select_lane_load()
        return [line for line in kernel.body._lines if isinstance(line, str)]


def probe(module: types.ModuleType) -> Probe:
    """The live rewrite of a select load masked by ``x0 >= 3``."""
    lines = _rewritten(module)
    if lines is None:
        return Probe(False, "the select rewrite is not as this fix knows")
    widened = next((line.strip() for line in lines if "_es_full" in line and "tmp0" in line), None)
    if widened is not None:
        return Probe(True, f"a select under a condition on x0 is widened along x0: {widened!r}")
    return Probe(False, "a select under a condition on the inner axis stays a plain load")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def rewrite(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        targets = getattr(instance, "_npu_select_lane_loads", None)
        axis = inner_axis(instance) if targets else None
        if axis is None:
            return wrapped(*args, **kwargs)
        left = varying_loads(instance.body._lines, *axis)
        instance._npu_select_lane_loads = {name: t for name, t in targets.items() if name not in left}
        try:
            return wrapped(*args, **kwargs)
        finally:
            instance._npu_select_lane_loads = targets

    patcher.wrap_path(module, TARGET, rewrite)


FIX = Fix(
    name="widened-load-inner-axis",
    about=About(
        symptom=(
            "a select under a condition on the kernel's inner axis (`F.pad(mode='circular')` or "
            "`Conv1d(padding_mode='circular')` backward, `slice_backward` of a selected column) stops the "
            "compile ('Cannot make_shape_compatible') or silently loads 0 where the condition fails at the "
            "tile's first position"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="set `torch_npu._inductor.triton_experimental.config.select_extract_slice = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
