"""boundary-downcast: in/out arguments keep their contents across the i64->i32 boundary.

- **Defect**: when a runtime int64/fp64 buffer reaches a kernel compiled for ``*i32`` /
  ``*fp32``, the launcher wrapper hands every ``out_ptr``/``in_out_ptr``/mutated argument
  an uninitialised narrow temporary (kept in a module cache, also during graph capture),
  so an in/out buffer loses its input: fastNLP_Bert computes ``[237]*4`` instead of
  ``[474]*4`` and then fails with "The expanded size of the tensor (237) must match the
  existing size (474)".
- **Where**: ``npu_triton_heuristics._wrap_launcher_with_downcast``.
- **Probe**: does the wrapped launcher fail to see an int64 ``in_out_ptr0`` holding
  ``[474]*4`` as ``[474]*4``? (wrap a recording launcher with the live function and launch
  it once).
- **Fix**: the wrapper is rebuilt from :func:`boundary_role`; the wrapped upstream function
  is not called. That is safe only because its whole behaviour is known: at every genuine
  pre-fix state it differs from upstream's fix only in the defect, and the tests compare
  the rebuilt wrapper with upstream's fix on a battery at every state (memo, dedup switch,
  attributes, keywords, extra arguments, aliasing, raising launchers). Pure outputs get a
  fresh empty narrow temporary, in/out and mutated arguments a narrow copy of their input,
  and both are copied back into the original buffer after the launch, in argument order
  (as upstream's fix does: where two written arguments share a buffer, the later one's
  result is what the buffer keeps). Temporaries keep the compiled strides of views with
  gaps and of broadcast (stride 0) inputs, where upstream's are contiguous. Input-only
  arguments keep the module's memoised cast, except during graph capture, when nothing is
  cached. Launchers without ``_npu_def_args``, with nothing to cast, or called with too
  few positional arguments behave as upstream's. A value past the narrow dtype's range is
  cut as upstream's wrapper cuts it (the guard int64-past-int32 stops the launch first).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.narrowing import (
    Role,
    boundary_plan,
    capture_detector,
    is_capturing,
    is_dense,
    launch_and_write_back,
    narrow_like,
    seen_by_kernel,
    with_launcher_attrs,
)

TARGET = "_wrap_launcher_with_downcast"


def wrap_launcher(
    module: types.ModuleType,
    launcher: Callable[..., Any],
    downcast_args: Mapping[str, str],
    mutated_arg_names: Collection[str],
) -> Callable[..., Any]:
    """Return ``launcher`` narrowing its int64/fp64 tensors as ``downcast_args`` says
    (``module._DTYPE_DOWNCAST_MAP`` maps a signature type to (wide, narrow) dtypes)."""
    import torch

    def_args = getattr(launcher, "_npu_def_args", None)
    if not def_args:
        return launcher
    plan = boundary_plan(module._DTYPE_DOWNCAST_MAP, def_args, downcast_args, mutated_arg_names)
    if not plan:
        return launcher

    n_def = len(def_args)
    # Written arguments in argument order: their write-backs run in that order.
    written = [(i, n, wide, narrow, role is Role.IN_OUT) for i, n, wide, narrow, role in plan
               if role is not Role.INPUT]
    inputs = [(i, n, wide, narrow) for i, n, wide, narrow, role in plan if role is Role.INPUT]
    detector = capture_detector() if inputs else None
    Tensor = torch.Tensor

    def narrowing_launcher(*args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if len(args) < n_def:
            return launcher(*args, stream=stream, **kwargs)
        new_args: list[Any] | None = None
        writebacks = []
        for i, _, wide, narrow, keep in written:
            a = args[i]
            if isinstance(a, Tensor) and a.dtype == wide:
                new_args = new_args or list(args)
                new_args[i] = tmp = narrow_like(a, narrow, keep_values=keep)
                writebacks.append((a, tmp))
        if inputs:
            memo = None if is_capturing(detector) else getattr(module, "_memoized_downcast", None)
            for i, _, wide, narrow in inputs:
                a = args[i]
                if isinstance(a, Tensor) and a.dtype == wide:
                    new_args = new_args or list(args)
                    dense_memo = memo is not None and is_dense(a)
                    new_args[i] = memo(a, narrow) if dense_memo else narrow_like(a, narrow, keep_values=True)
        return launch_and_write_back(launcher, args, new_args, writebacks, stream, kwargs)

    return with_launcher_attrs(narrowing_launcher, launcher)


def probe(module: types.ModuleType) -> Probe:
    """Wrap a recording launcher for the fastNLP kernel (int64 ``in_out_ptr0`` compiled as
    ``*i32``, mutated) and launch it with ``[474]*4``. The live function runs with a plain
    cast in place of the module's memoised one, so no module cache is touched."""
    import torch

    buffer = torch.full((4,), 474, dtype=torch.int64)
    seen = seen_by_kernel(module, TARGET, "in_out_ptr0", "*i64", buffer, ["in_out_ptr0"])
    after = buffer.tolist()
    if seen != [[474] * 4] or after != [474] * 4:
        return Probe(True, f"in/out int64 [474]*4 reached the kernel as {seen} and left {after}")
    return Probe(False, "in/out int64 [474]*4 reaches the kernel and the buffer unchanged")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def rebuild(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        def bind(launcher: Any, downcast_args: Mapping[str, str], mutated_arg_names: Collection[str]) -> Any:
            return wrap_launcher(module, launcher, downcast_args, mutated_arg_names)

        return bind(*args, **kwargs)

    patcher.wrap_path(module, TARGET, rebuild)


FIX = Fix(
    name="boundary-downcast",
    about=About(
        symptom=(
            "an int64 in/out buffer loses its contents at the int32 boundary: `[237]*4` instead of `[474]*4`,"
            " then a size mismatch (fastNLP_Bert)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("launcher", "downcast_args", "mutated_arg_names")},
)
