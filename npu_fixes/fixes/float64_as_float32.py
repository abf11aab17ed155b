"""float64-as-float32 (guard): a kernel computes its float64 inputs in float32, without a word.

- **Defect**: the backend compiles float64 as float32. Its launcher's boundary wrapper casts
  every float64 tensor argument to float32 before the kernel runs and the result back, so a
  compiled float64 computation keeps float32's 24-bit mantissa: Unix timestamps in seconds
  (about 1.7e9) lose everything below 128 s, float64 RoPE angles of long positions drift. No
  error, no log line. Every state and both wheels.
- **Where**: ``npu_triton_heuristics._wrap_launcher_with_downcast``.
- **Probe**: does a launcher wrapped by the live function see a float64 ``in_ptr0`` holding
  ``2**30 + 0.25`` as another value, without a warning?
- **Fix**: none at run time (float64 has no vector unit on the NPU's cores). Guard: when the
  wrapper binds a launcher with float64 arguments, a :class:`Float64AsFloat32Warning` (a
  ``UserWarning``) names the kernel and those arguments, once per kernel and argument list
  (Python's warning registry); the launcher itself is returned unchanged, so a launch costs
  nothing more. ``warnings.simplefilter("error", Float64AsFloat32Warning)`` or
  ``-W error::UserWarning`` turns it into an error.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Collection, Mapping
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.narrowing import kernel_name, layer_launchers, seen_by_kernel

TARGET = "_wrap_launcher_with_downcast"
WORKAROUND = ("compute what needs float64 outside compiled code (`torch.compiler.disable`), or in "
              "float32 on values that fit it (timestamps as offsets from a recent epoch)")
PROBE_VALUE = 2**30 + 0.25


class Float64AsFloat32Warning(UserWarning):
    """A compiled kernel computes float64 arguments in float32."""


def float64_arguments(downcast_args: Mapping[str, str]) -> list[str]:
    """The arguments that the boundary narrows from float64, in signature order."""
    return [name for name, kind in downcast_args.items() if kind == "*fp64"]


def warn(kernel: str, names: list[str]) -> None:
    warnings.warn(
        f"{kernel}: float64 argument{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} "
        f"computed in float32: this torch_npu casts float64 to float32 at the kernel boundary, so "
        f"the results carry float32's precision. {WORKAROUND[0].upper()}{WORKAROUND[1:]}",
        Float64AsFloat32Warning, stacklevel=2)


def probe(module: types.ModuleType) -> Probe:
    """Wrap a recording launcher with the live function (a plain cast in place of the module's
    memoised one) and launch it on a float64 tensor holding ``2**30 + 0.25``."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", Float64AsFloat32Warning)
        value = torch.tensor([PROBE_VALUE], dtype=torch.float64)
        seen = seen_by_kernel(module, TARGET, "in_ptr0", "*fp64", value)
    said = [str(w.message) for w in caught if issubclass(w.category, Float64AsFloat32Warning)]
    if said:
        return Probe(False, f"a float64 argument computed in float32 is named: {said[0][:60]}...")
    if seen != [[PROBE_VALUE]]:
        return Probe(True, f"a float64 argument holding {PROBE_VALUE} reached the kernel as {seen[0]}, "
                           f"without a warning ({WORKAROUND})")
    return Probe(False, f"a float64 argument holding {PROBE_VALUE} reaches the kernel unchanged")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def named(narrowing: Any, launcher: Any, def_args: Collection[str], downcast_args: Mapping[str, str],
              mutated_arg_names: Collection[str]) -> Any:
        names = float64_arguments(downcast_args)
        if names:
            warn(kernel_name(launcher), names)
        return narrowing

    layer_launchers(module, patcher, TARGET, named)


FIX = Fix(
    name="float64-as-float32",
    about=About(
        symptom=(
            "float64 computations compiled with float32's precision, silently (Unix timestamps in "
            "seconds lose everything below 128 s): the launcher casts float64 tensors to float32"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=WORKAROUND,
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("launcher", "downcast_args", "mutated_arg_names")},
    repairable=False,
)
