"""downcast-workspace: a split sum's per-core partials survive the int32 boundary.

- **Defect**: a sum the backend splits across cores writes one partial per core into a
  workspace argument, ``ws_ptr``, and a combine kernel adds them. The workspace has the sum's
  dtype: int64 for int64, int32 and bool inputs, float64 for float64. The kernels take it as
  ``*i32`` / ``*fp32``, and the launcher's boundary wrapper narrows it as it narrows an input:
  into a temporary that nobody copies back (only ``out_ptr*``, ``in_out_ptr*`` and mutated
  arguments are). The partials are thrown away with the temporary and the combine kernel adds
  uninitialised memory: ``(labels != -100).sum()`` over 2048 or more tokens, ``mask.sum(-1)``
  of a ``[4, 4096]`` int64 mask or ``x.sum(0)`` of an int64 ``[4096, 8]`` come back as garbage,
  with no error. fp32 sums are right (their workspace is not narrowed).
- **Where**: ``npu_triton_heuristics._wrap_launcher_with_downcast`` (boundary-downcast's
  rebuilt wrapper has the same rule).
- **Probe**: does a launcher that writes 7s into an int64 ``ws_ptr`` compiled as ``*i32``
  leave the caller's workspace without them? (wrap a writing stand-in launcher with the live
  function, launch it once; the workspace is a strided view, so that no wrapper stores it in
  the module's cache of narrowed inputs).
- **Fix**: the wrapper is called with ``ws_ptr`` among the mutated arguments wherever the
  kernel takes it narrowed, so it crosses the boundary as an in/out argument: narrowed with
  its contents and copied back after the launch. The partial kernel's writes reach the
  workspace; the combine kernel, which only reads it, copies the same values back (one copy
  of ``cores x rows`` elements per launch). Everything else is left to the wrapped function.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.narrowing import probe_wrapper

TARGET = "_wrap_launcher_with_downcast"
WORKSPACE = "ws_ptr"


def with_workspace(downcast_args: Mapping[str, str], mutated_arg_names: Collection[str]) -> Collection[str]:
    """``mutated_arg_names`` with the workspace added where it is narrowed at the boundary
    (unchanged otherwise)."""
    if WORKSPACE not in downcast_args or WORKSPACE in mutated_arg_names:
        return mutated_arg_names
    return [*mutated_arg_names, WORKSPACE]


def probe(module: types.ModuleType) -> Probe:
    """Wrap a stand-in launcher that writes 7s into ``ws_ptr`` with the live function (a plain
    cast in place of the module's memoised one) and launch it on an int64 workspace."""
    import torch

    def launcher(ws_ptr: Any, xnumel: int, stream: Any = None) -> None:
        ws_ptr.fill_(7)

    launcher._npu_def_args = [WORKSPACE, "xnumel"]  # type: ignore[attr-defined]
    workspace = torch.zeros(16, dtype=torch.int64)[::2]
    wrap = probe_wrapper(module, TARGET)
    wrap(launcher, {WORKSPACE: "*i64"}, [])(workspace, 8, stream=None)
    if workspace.tolist() != [7] * 8:
        return Probe(True, f"the kernel's writes into an int64 {WORKSPACE} narrowed to *i32 did not "
                           f"reach it: it holds {workspace.tolist()} (split int64/fp64 sums add "
                           "uninitialised partials)")
    return Probe(False, f"the kernel's writes into an int64 {WORKSPACE} narrowed to *i32 reach it")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def keep_workspace(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        def bind(launcher: Any, downcast_args: Mapping[str, str], mutated_arg_names: Collection[str]) -> Any:
            return wrapped(launcher, downcast_args, with_workspace(downcast_args, mutated_arg_names))

        return bind(*args, **kwargs)

    patcher.wrap_path(module, TARGET, keep_workspace)


FIX = Fix(
    name="downcast-workspace",
    about=About(
        symptom=(
            "silently wrong int64, int32, bool and float64 sums that the backend splits across cores: "
            "`(labels != -100).sum()` over 2048 or more tokens comes back as garbage"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="sum in float32 (`mask.float().sum()`: exact below 2^24)",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("launcher", "downcast_args", "mutated_arg_names")},
)
