"""int64-constant-range: an int64 constant in a kernel that holds it in int32.

- **Defect**: the backend computes int64 as int32, and ``NPUTritonKernelOverrides.constant``
  turns an int64 constant's type into int32 but keeps its value: ``tl.full([],
  -9223372036854775808, tl.int32)``. Triton's frontend cuts such a value to its low 32 bits
  (int64's minimum to 0, its maximum to -1); the interpreter refuses it. ``torch.masked``'s
  ``amax``/``amin``/``argmax``/``argmin``/``logsumexp`` of int64 fill masked-out elements
  with int64's extreme (``torch.where(mask, x, iinfo.min)``): with 0 in its place
  ``masked.amax`` of negative values is 0. The same class as int64-minmax-identity (the
  accumulators), by the constant's route.
- **Where**: ``codegen.triton.NPUTritonKernelOverrides.constant``.
- **Probe**: the live method, in a CPU kernel, asked for int64's minimum: is the value it
  emits out of the range of the type it names?
- **Fix**: int64's minimum and maximum are emitted as int32's: below (above) every value
  the kernel holds, the role they have as fills. Any other int64 constant int32 cannot hold
  stops the compile with :class:`Int64ConstantOutOfRange`, naming it, instead of being cut
  (with values the kernel holds in int32, such a constant gives a result int32 cannot hold
  either; only a second constant could bring it back, as in ``x - 2**31 + 7000``, which is
  refused too). Where an extreme itself reaches an output (every element masked out), the
  output holds int32's extreme, not int64's: values past int32 are beyond this backend.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernelOverrides.constant"
INT64 = (-(2 ** 63), 2 ** 63 - 1)
INT32 = (-(2 ** 31), 2 ** 31 - 1)
WORKAROUND = "compute with the constant outside the compiled region, or in a floating type"


class Int64ConstantOutOfRange(ValueError):
    """An int64 constant that the kernel would hold in int32 and int32 cannot hold."""


def held(value: Any) -> Any:
    """The rule for an int64 constant of a kernel that holds int64 in int32: int64's
    extremes become int32's; another value int32 cannot hold is refused; anything else
    (and anything not an int) unchanged."""
    if type(value) is not int or INT32[0] <= value <= INT32[1]:
        return value
    if value in INT64:
        return INT32[INT64.index(value)]
    raise Int64ConstantOutOfRange(
        f"the int64 constant {value} would be computed as int32 by this torch_npu's kernels, and int32 "
        f"cannot hold it (Triton would cut it to {(value + 2 ** 31) % 2 ** 32 - 2 ** 31}): {WORKAROUND}")


def probe(module: types.ModuleType) -> Probe:
    """The live constant emitted for int64's minimum in a CPU kernel."""
    import torch

    with cpu_kernel(module):
        text = str(module.NPUTritonKernelOverrides.constant(INT64[0], torch.int64))
    match = re.search(r"(-?\d+), tl\.(u?int\d+)\)", text)
    if match is None:
        return Probe(False, f"int64's minimum is emitted as {text}")
    value, bits = int(match.group(1)), int(re.sub(r"\D", "", match.group(2)))
    if bits < 64 and value == INT64[0]:
        return Probe(True, f"int64's minimum is emitted as {text}: Triton cuts it to 32 bits")
    return Probe(False, f"int64's minimum is emitted as {text}")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    import torch

    def constant(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) == 2 and not kwargs and args[1] == torch.int64:
            return wrapped(held(args[0]), args[1])
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, constant)


FIX = Fix(
    name="int64-constant-range",
    about=About(
        symptom=(
            "an int64 constant int32 cannot hold is cut to 32 bits in the kernel: `torch.masked` "
            "`amax`/`amin`/`argmax`/`argmin` of int64 fill masked-out elements with 0 or -1 (masked `amax` "
            "of negative values is 0)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="reduce int64 values as int32 (`x.int()`) or keep masked int64 reductions out of "
                   "the compiled region",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("value", "dtype")},
)
