"""downcast-strides: an int64/fp64 view with gaps keeps its strides across the int32 boundary.

- **Defect**: the launcher's boundary wrapper narrows an int64/fp64 argument with
  ``src.to(torch.int32)`` (or ``float32``). For a view with gaps (``idx[1::2]``, a column
  ``x[:, 1]``, a slice of an embedding bag's offsets) that returns a contiguous copy, while the
  kernel indexes it with the view's strides, compiled in: it reads the wrong elements, and past
  the end of the copy. ``idx[1::2] * 2`` comes back wrong (or the read leaves the buffer), with
  no error. Dense layouts (contiguous or permuted) keep their strides and are right. An output
  buffer whose elements overlap (an expand's strides, ``x.expand(5, 5, 5)`` returned) stops the
  launch instead: the narrow result is copied back with ``copy_``, which refuses such a
  destination.
- **Where**: ``npu_triton_heuristics._wrap_launcher_with_downcast``.
- **Probe**: does a launcher wrapped by the live function see an int64 ``in_ptr0`` that is
  every other element of a tensor (stride 2) with other strides than the view's?
- **Fix**: the launcher the wrapper returns is wrapped once more: before each launch, every
  wide argument that is a view with gaps or a broadcast is narrowed here, into a narrow tensor
  with the view's strides over the memory span it covers (holding its values unless it is a
  pure output), so the wrapped function finds it narrow already and passes it through; the
  written ones (``out_ptr*``, ``in_out_ptr*``, mutated) are copied back after the launch, in
  argument order, an output whose elements overlap position by position. Dense arguments are
  left to the wrapped function; the layer costs one layout
  check per wide argument per launch, and only launchers with wide arguments get it. This fix
  comes before boundary-downcast in the list: where boundary-downcast rebuilds the whole
  wrapper (the states before 5ff81d9c5), its rebuild keeps strides itself and this layer
  below it is not called.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.narrowing import (
    Role,
    boundary_plan,
    is_dense,
    launch_and_write_back,
    layer_launchers,
    narrow_like,
    probe_wrapper,
    with_launcher_attrs,
)

TARGET = "_wrap_launcher_with_downcast"


def keep_strides(
    module: types.ModuleType,
    narrowing: Callable[..., Any],
    def_args: Collection[str],
    downcast_args: Mapping[str, str],
    mutated_arg_names: Collection[str],
) -> Callable[..., Any]:
    """``narrowing`` (the launcher the backend's wrapper returned) preceded by the narrowing of
    every wide argument that is not dense, with its strides kept."""
    import torch

    plan = boundary_plan(module._DTYPE_DOWNCAST_MAP, def_args, downcast_args, mutated_arg_names)
    if not plan:
        return narrowing
    n_def, Tensor = len(def_args), torch.Tensor
    steps = [(i, wide, narrow, role is not Role.OUTPUT, role is not Role.INPUT)  # keep values, write back
             for i, _, wide, narrow, role in plan]

    def strided_launcher(*args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if len(args) < n_def:
            return narrowing(*args, stream=stream, **kwargs)
        new_args, writebacks = None, []
        for i, wide, narrow, keep_values, written in steps:
            a = args[i]
            if isinstance(a, Tensor) and not a.is_contiguous() and a.dtype == wide and not is_dense(a):
                new_args = new_args or list(args)
                new_args[i] = tmp = narrow_like(a, narrow, keep_values=keep_values)
                if written:
                    writebacks.append((a, tmp))
        if new_args is None:  # every wide argument dense: the backend's wrapper as it is
            return narrowing(*args, stream=stream, **kwargs)
        return launch_and_write_back(narrowing, args, new_args, writebacks, stream, kwargs)

    return with_launcher_attrs(strided_launcher, narrowing)


def probe(module: types.ModuleType) -> Probe:
    """Wrap a recording launcher with the live function (a plain cast in place of the module's
    memoised one) and launch it on every other element of an int64 tensor."""
    import torch

    seen: list[tuple[tuple[int, ...], list[int]]] = []

    def launcher(in_ptr0: Any, xnumel: int, stream: Any = None) -> None:
        seen.append((tuple(in_ptr0.stride()), in_ptr0.tolist()))

    launcher._npu_def_args = ["in_ptr0", "xnumel"]  # type: ignore[attr-defined]
    view = torch.arange(16)[::2]
    wrap = probe_wrapper(module, TARGET)
    wrap(launcher, {"in_ptr0": "*i64"}, [])(view, 8, stream=None)
    if seen != [((2,), view.tolist())]:
        return Probe(True, f"an int64 view of stride 2 reached the kernel, compiled for stride 2, as {seen}")
    return Probe(False, "an int64 view of stride 2 reaches the kernel with its strides")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def restrided(narrowing: Any, launcher: Any, def_args: Collection[str], downcast_args: Mapping[str, str],
                  mutated_arg_names: Collection[str]) -> Any:
        return keep_strides(module, narrowing, def_args, downcast_args, mutated_arg_names)

    layer_launchers(module, patcher, TARGET, restrided)


FIX = Fix(
    name="downcast-strides",
    about=About(
        symptom=(
            "silently wrong results from int64 or float64 views with gaps (`idx[1::2] * 2`, a column "
            "`x[:, 1]`): the kernel reads a contiguous copy with the view's strides"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="make such views contiguous before compiled code reads them (`idx[1::2].contiguous()`)",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("launcher", "downcast_args", "mutated_arg_names")},
)
