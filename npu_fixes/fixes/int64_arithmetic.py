"""int64-arithmetic (guard): a kernel computes int64 values past int32 in int32.

- **Defect**: the backend computes int64 as int32 inside kernels too: an int64 index
  expression (``torch.arange``) and everything computed from it is typed ``tl.int32``. A value
  past int32 wraps, with no error, though every input is in int32's range (so the guard
  int64-past-int32, which reads inputs, says nothing): the flat offsets of labels into
  ``[N, V]`` logits, ``torch.arange(N)[:, None] * V + labels[:, None]`` with 16384 tokens and
  a 152064 vocabulary, come out wrong in 2,262 of 16,384 places. Every state and both wheels.
- **Where**: ``codegen.triton.NPUTritonKernel.codegen_kernel`` (the guard);
  ``NPUTritonKernelOverrides.index_expr`` types an int64 expression as int32 (the probe).
- **Probe**: does the live ``index_expr``, in a CPU kernel, type an int64 expression as
  ``torch.int32``?
- **Fix**: none at run time (widening the kernels' integer arithmetic touches the backend's
  type table and its boundary). Guard: ``codegen_kernel`` raises
  :class:`Int64ArithmeticOutOfRange`, naming the kernel and the value, for a kernel in which
  Inductor's value ranges prove an integer value past int32 (finite bounds beyond it). Not
  seen: values whose range Inductor does not know (computed from loaded data: a paged-KV
  slot from a block table, a sum of token ids), constants (int64-constant-range's) and
  int64's extremes used as fills. An int32 computation that wraps in eager too is refused
  as well (the kernel's types no longer tell it from an int64 one).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernel.codegen_kernel"
WORKAROUND = ("compute such values outside compiled code, or keep them in int32's range (offsets "
              "per row instead of flat offsets into a whole [tokens, vocabulary] buffer)")
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class Int64ArithmeticOutOfRange(OverflowError):
    """A kernel would compute an integer value past int32 in int32."""


def past_int32(kernel: Any) -> list[tuple[str, int, int]]:
    """``(name, lower, upper)`` of the kernel's integer values whose known range leaves int32's,
    but for constants and ranges bounded by int64's extremes (fills)."""
    import sympy
    import torch

    found = []
    for name, var in kernel.cse.varname_map.items():
        bounds, dtype = getattr(var, "bounds", None), getattr(var, "dtype", None)
        integer = isinstance(dtype, torch.dtype) and not dtype.is_floating_point and dtype != torch.bool
        if bounds is None or not integer:
            continue
        lower, upper = bounds.lower, bounds.upper
        if not all(isinstance(b, (int, sympy.Integer)) for b in (lower, upper)):
            continue
        lower, upper = int(lower), int(upper)
        if lower == upper or lower in INT64 or upper in INT64:
            continue
        if lower < INT32[0] or upper > INT32[1]:
            found.append((name, lower, upper))
    return found


def described(kernel: Any) -> str:
    """The kernel as its name will say it (``fused_add_arange_mul``), before it has a name."""
    from torch._inductor import config
    from torch._inductor.utils import get_fused_kernel_name

    try:
        fused = get_fused_kernel_name(kernel.features.node_schedule, config.triton.descriptive_names)
    except (AttributeError, TypeError, ValueError):
        return "a kernel"
    return f"the kernel {fused}"


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        found = past_int32(instance)
        if found:
            values = ", ".join(f"{var} in [{lower}, {upper}]" for var, lower, upper in found)
            raise Int64ArithmeticOutOfRange(
                f"{described(instance)} computes integer values past int32 ({values}), and this torch_npu "
                f"computes int64 as int32: they would wrap, without an error. {WORKAROUND[0].upper()}"
                f"{WORKAROUND[1:]}")
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, guard)


def probe(module: types.ModuleType) -> Probe:
    import torch

    with cpu_kernel(module) as (_, x0):
        value = module.NPUTritonKernelOverrides.index_expr(x0 * 152064, torch.int64)
    dtype = getattr(value, "dtype", None)
    if dtype == torch.int32:
        return Probe(True, f"an int64 index expression is computed as {dtype} in the kernel ({WORKAROUND})")
    return Probe(False, f"an int64 index expression is computed as {dtype}")


FIX = Fix(
    name="int64-arithmetic",
    about=About(
        symptom=(
            "silently wrong int64 values computed inside a kernel past int32 (flat label offsets "
            "`arange(N)[:, None] * V + labels` with N x V past 2^31), though every input is in int32's range"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=WORKAROUND,
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    repairable=False,
)
