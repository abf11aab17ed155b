"""int64-minmax-identity: a max or min over int64 values starts from int64's extreme in a
32-bit accumulator.

- **Defect**: the backend computes int64 as int32 (its codegen patches map ``tl.int64`` to
  ``tl.int32``), but a reduction's accumulator is still filled with the identity of the
  source dtype: ``tl.full(..., -9223372036854775808, tl.int32)`` for ``amax``/``max``/
  ``argmax``, ``9223372036854775807`` for ``amin``/``min``/``argmin``. Triton's frontend
  cuts the constant to 32 bits (0 and -1), so lanes past the row's end hold 0 or -1:
  ``torch.arange(20).amin()`` gives -1, ``amax`` of negative values 0. Triton's interpreter
  refuses the constant.
- **Where**: ``codegen.triton.NPUTritonKernel.reduction``.
- **Probe**: where the backend computes int64 as int32 (its codegen patches map the type),
  a real reduction kernel on CPU asked for int64 ``max``, ``min`` and ``argmax``: does it
  fill an accumulator with a constant int32 cannot hold?
- **Fix**: a max or min (or arg-) reduction over int64 that the kernel computes as int32 is
  emitted as one over int32 (an index result keeps its dtype), so its accumulator starts
  from int32's extreme: the identity of the values the kernel really holds. Other
  reductions and dtypes, and int64 computed as int64, are emitted as before.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_reduction_kernel, emitted

TARGET = "NPUTritonKernel.reduction"
MINMAX = frozenset({"max", "min", "argmax", "argmin", "argmax_value", "argmin_value", "argmax_with_value",
                    "argmin_with_value"})
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def demotes_int64(module: types.ModuleType) -> bool:
    """Whether the backend computes int64 as int32: its codegen patches map ``tl.int64`` to
    ``tl.int32`` (already in Inductor's type mapping once activated; before that, both
    names among the constants of the module's ``apply_npu_codegen_patches``)."""
    from torch._inductor import utils

    if utils._triton_type_mapping.get("tl.int64") == "tl.int32":
        return True
    patches = getattr(module, "apply_npu_codegen_patches", None)
    code, constants = getattr(patches, "__code__", None), set()
    pending = [code] if code is not None else []
    while pending:
        for const in pending.pop().co_consts:
            if isinstance(const, types.CodeType):
                pending.append(const)
            else:
                constants.add(const)
    return {"tl.int64", "tl.int32"} <= constants


def narrowed(dtype: Any, src_dtype: Any, reduction_type: str) -> tuple[Any, Any]:
    """The rule, for a backend that computes int64 as int32: a max or min (or arg-)
    reduction of int64 values is emitted over int32 (an index result keeps its dtype), so
    that its identity is int32's extreme; anything else unchanged."""
    import torch

    if reduction_type not in MINMAX or src_dtype != torch.int64:
        return dtype, src_dtype
    index = reduction_type in ("argmax", "argmin")
    return (dtype if index else torch.int32), torch.int32


def probe(module: types.ModuleType) -> Probe:
    """The live reduction asked for int64 max, min and argmax, where the backend computes
    int64 as int32."""
    import torch

    if not demotes_int64(module):
        return Probe(False, "the backend computes int64 as int64")
    with cpu_reduction_kernel(module) as kernel:
        value = kernel.cse.generate(kernel.compute, "tmp_in", dtype=torch.int64,
                                    shape=("XBLOCK", "R0_BLOCK"))
        for reduction_type in ("max", "min", "argmax"):
            kernel.reduction(torch.int64, torch.int64, reduction_type, value)
        text = emitted(kernel)
    fills = {int(v) for v in re.findall(r"tl\.full\(\[[^\]]*\], (-?\d+), tl\.int(?:32|64)\)", text)}
    outside = sorted(v for v in fills if not _INT32[0] <= v <= _INT32[1])
    if outside:
        return Probe(True, f"int64 max/min accumulators, computed as int32, start from {outside} "
                           "(cut to 32 bits by Triton's frontend)")
    return Probe(False, f"int64 max/min accumulators start from int32 values ({sorted(fills)})")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def reduction(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) != 4 or kwargs:
            return wrapped(*args, **kwargs)
        dtype, src_dtype, reduction_type, value = args
        return wrapped(*narrowed(dtype, src_dtype, reduction_type), reduction_type, value)

    patcher.wrap_path(module, TARGET, reduction)


FIX = Fix(
    name="int64-minmax-identity",
    about=About(
        symptom=(
            "`amax`/`amin`/`max`/`min`/`argmax` over int64 values wrong: `torch.arange(20).amin()` gives -1, "
            "`amax` of negative values 0 (the accumulator starts from int64's extreme cut to 32 bits)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="reduce int64 values as float64 or int32 (`x.int().amax()`) outside the compiled region",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("dtype", "src_dtype", "reduction_type", "value")},
)
