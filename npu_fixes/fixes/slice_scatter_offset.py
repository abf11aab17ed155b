"""slice-scatter-offset (guard): masked loads at a negative offset; needs a torch_npu upgrade.

- **Defect**: Inductor's ``slice_scatter`` blends ``src`` in with a masked load at
  ``(i - start) // step``, which is negative on the lanes the mask turns off. The
  linearized ``NPUTritonKernel.indexing`` emits such an index as it is, and Triton-Ascend
  rejects the kernel: ``expected offsets to be non-negative``. The oldest state routed only
  step-1 ``slice_scatter`` with static bounds around the blend (a concat loop kernel);
  strided or dynamic-bound ones still reach it. Other masked loads with a negative base
  (constant padding) take the same indexing path; only ``slice_scatter`` was reported.
- **Where**: ``codegen.triton.NPUTritonKernel.indexing`` (the index of a load under an
  ``ops.masked`` mask), together with ``lowering.npu_slice_scatter`` and the concat loop
  kernel that upstream replaced in the same commit.
- **Probe**: a real ``NPUTritonKernel`` is built on CPU (stand-in-free: a fresh
  ``GraphLowering`` from an identity module, one x range of 64) and its live ``indexing`` is
  asked for the blend's source index under a masked load (``x0 - 3`` for ``start=3``,
  ``(x0 - 3) // 2`` for ``step=2``); the emitted index string is evaluated at lane
  ``x0 = 0``. A negative offset = defective. Detected this way, the Triton-Ascend error
  itself is not reproduced on CPU (no kernel is compiled).
- **Fix**: none at run time (guard only; no install; the state is ``upgrade-needed``).
  Upstream made masked indexes non-negative in ``indexing`` and removed the concat loop
  kernel and its lowering route in one refactor. Clamping the emitted index from a wrapper
  would be small, but no NPU is at hand to show that this alone clears the Triton-Ascend
  error, and the lowering half would stay; so no repair is claimed.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe, one_line
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernel.indexing"
UPGRADE = "upgrade torch_npu to a build at or after 95c9094da (2026-08-10) or the published 2.13.0 wheel"
SYMPTOM = "Triton-Ascend 'expected offsets to be non-negative' for some slice_scatter"
#: The mask the blend's ``ops.masked`` puts on the load (any ``tmp`` CSE name).
MASK = "tmp3"


def _floor_div(a: int, b: int) -> int:
    return a // b


class _Namespace:
    def __init__(self, **members: Any) -> None:
        self.__dict__.update(members)


#: What the names in an emitted index mean, for evaluating it at one lane.
_NAMES = {
    "tl": _Namespace(maximum=max, minimum=min, where=lambda c, a, b: a if c else b),
    "triton_helpers": _Namespace(div_floor_integer=_floor_div, maximum=max, minimum=min),
}


def offset_at(index_str: str, lanes: Mapping[str, int]) -> int | None:
    """The value of an emitted index string at the given lane coordinates, or None where
    it uses something other than integer arithmetic, ``tl.maximum``/``tl.minimum`` and
    ``triton_helpers.div_floor_integer``."""
    try:
        tree = ast.parse(index_str.strip(), mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
               ast.Call, ast.Attribute, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod,
               ast.USub, ast.UAdd)
    names = {**_NAMES, **lanes}
    for node in ast.walk(tree):
        if (not isinstance(node, allowed)
                or isinstance(node, ast.Name) and node.id not in names
                or isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            return None
    try:
        value = eval(compile(tree, "<index>", "eval"), {"__builtins__": {}}, names)  # noqa: S307
    except Exception:  # noqa: BLE001 - an index we cannot evaluate is not judged
        return None
    return value if isinstance(value, int) else None


def blend_indexes(x0: Any) -> dict[str, Any]:
    """The source index of ``slice_scatter``'s blend: start 3, step 1 and step 2."""
    from torch.utils._sympy.functions import FloorDiv

    return {"start=3": x0 - 3, "start=3,step=2": FloorDiv(x0 - 3, 2)}


def masked_offsets(module: types.ModuleType) -> dict[str, tuple[str, int | None]]:
    """Label -> (emitted index, its value at lane 0) for each blend index loaded under a
    ``tmp`` mask by the live ``indexing``."""
    out: dict[str, tuple[str, int | None]] = {}
    with cpu_kernel(module) as (kernel, x0):
        for label, index in blend_indexes(x0).items():
            kernel._load_mask = MASK
            try:
                emitted = kernel.indexing(index).index_str
            finally:
                kernel._load_mask = None
            out[label] = (emitted, offset_at(emitted, {str(x0): 0}))
    return out


def probe(module: types.ModuleType) -> Probe:
    """Ask the live ``indexing`` for the blend's masked source indexes; evaluate at lane 0."""
    try:
        offsets = masked_offsets(module)
    except Exception as exc:  # noqa: BLE001 - a kernel we cannot build is not judged
        return Probe(False, f"could not build a CPU kernel to probe indexing ({one_line(exc)}): "
                            "defect not seen")
    negative = {label: emitted for label, (emitted, value) in offsets.items()
                if value is not None and value < 0}
    if negative:
        shown = "; ".join(f"{label}: {emitted}" for label, emitted in negative.items())
        return Probe(True, f"masked slice_scatter loads emitted with negative offsets on masked "
                           f"lanes ({shown}), whence {SYMPTOM}; detected by the live "
                           f"NPUTritonKernel.indexing on CPU, not reproduced (no kernel "
                           f"compiled); fixed upstream in 95c9094da, no run-time repair: {UPGRADE}")
    unknown = [label for label, (_, value) in offsets.items() if value is None]
    if unknown:
        return Probe(False, f"masked slice_scatter index not evaluable for {', '.join(unknown)}: "
                            "defect not seen")
    return Probe(False, "masked slice_scatter loads are emitted with non-negative offsets")


FIX = Fix(
    name="slice-scatter-offset",
    about=About(
        symptom="triton-ascend `expected offsets to be non-negative` for some `slice_scatter`",
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=None,
    repairable=False,
)
