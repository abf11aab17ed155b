"""int64-past-int32 (guard): an int64 value past int32 is cut at the kernel boundary.

- **Defect**: the backend computes int64 as int32. Its launcher's boundary wrapper narrows
  every int64 tensor argument with a cast to int32 before the kernel runs, so a value past
  int32's range (a hash, a large count or offset, an int64 extreme used as a value) reaches
  the kernel cut to its low 32 bits, with no error: ``x + 1`` of ``2**40`` compiles to ``1``,
  ``unravel_index`` of ``2**63 - 2`` gives wrong coordinates. Every state and both wheels.
- **Where**: ``npu_triton_heuristics._wrap_launcher_with_downcast``.
- **Probe**: does a launcher wrapped by the live function see an int64 ``in_ptr0`` holding
  ``2**31 + 7`` as another value, without an error?
- **Fix**: none at run time (the kernels have no int64 arithmetic). Guard: the launcher the
  wrapper returns is wrapped once more; before each launch, the int64 arguments the kernel
  only reads are checked, and a value past int32 raises
  :class:`Int64PastInt32` naming the kernel, the argument and its values. The check costs one
  min/max reduction per such argument and one host synchronisation per launch that has one
  (on an H100, 50 to 90 microseconds a launch: ``benchmarks/int64_guard_cost.py``); launchers
  without int64 inputs are not wrapped. Not checked: arguments the kernel writes
  (``out_ptr*``, ``in_out_ptr*``, mutated graph inputs, a split sum's ``ws_ptr`` workspace),
  whose contents may be uninitialised
  (a sum's 0-dim result and its epilogue share an ``in_out_ptr`` that holds whatever its
  allocation held); buffers the compiled code allocates for itself (its ``empty_strided_npu``,
  wrapped to note each int64 buffer's storage while it lives), which hold what the backend's
  kernels wrote, in int32's range, or what the allocation held: Inductor's circular ``pad``
  reads such a buffer before anything writes it and overwrites what it read (a launch the
  guard stopped, though the result was eager's); and launches during graph capture, where a
  synchronisation is not allowed. So an int64 value past int32 that an extern kernel writes
  into such a buffer (``out=``), or that eager code writes in place into a compiled graph's
  output passed to a graph again, is not seen.
  This guard comes after boundary-downcast in the list, so that it is the outermost layer.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.narrowing import (
    Role,
    boundary_plan,
    capture_detector,
    is_capturing,
    layer_launchers,
    probe_wrapper,
    with_launcher_attrs,
)

TARGET = "_wrap_launcher_with_downcast"
WORKAROUND = ("keep int64 values past int32 (hashes, large counts or offsets, int64 extremes as values) "
              "out of compiled code")
PROBE_VALUE = 2**31 + 7
#: Where the code a graph compiles to gets the allocator of its own buffers: its header binds
#: ``empty_strided_npu = torch_npu._C._empty_strided_npu``; CPU buffers (the CPU harness's
#: kernels) come from ``torch._C._dynamo.guards._empty_strided_cpu``.
ALLOCATORS = ("torch_npu._C._empty_strided_npu", "torch._C._dynamo.guards._empty_strided_cpu")


class Int64PastInt32(OverflowError):
    """An int64 argument of a kernel holds a value that this backend's int32 boundary would cut."""


def checked_arguments(plan: list[tuple[int, str, Any, Any, Role]]) -> list[tuple[int, str]]:
    """``(position, name)`` of the int64 arguments of a :func:`boundary_plan` that the kernel
    only reads, its ``in_ptr*`` (one it writes, a workspace too, may hold uninitialised memory)."""
    import torch

    return [(i, name) for i, name, wide, _, role in plan
            if wide == torch.int64 and role is Role.INPUT and name.startswith("in_ptr")]


def check(kernel: str, named: list[tuple[str, Any]]) -> None:
    """Raise :class:`Int64PastInt32` where a tensor of ``named`` holds a value past int32
    (one min/max reduction each, one host synchronisation for all)."""
    import torch

    named = [(name, t) for name, t in named if t.numel()]
    if not named:
        return
    bounds = torch.stack([v for _, t in named for v in torch.aminmax(t)]).tolist()
    info = torch.iinfo(torch.int32)
    for k, (name, _) in enumerate(named):
        low, high = bounds[2 * k], bounds[2 * k + 1]
        if low < info.min or high > info.max:
            raise Int64PastInt32(
                f"{kernel}: int64 argument {name!r} holds values in [{low}, {high}], past int32's "
                f"[{info.min}, {info.max}]: this torch_npu computes int64 as int32 and would cut them "
                f"at the kernel boundary, without an error. {WORKAROUND[0].upper()}{WORKAROUND[1:]}; or, "
                f"where the kernel never reads those values, NPU_FIXES_DISABLE=int64-past-int32")


def track_allocations(patcher: Patcher, allocated: weakref.WeakSet) -> None:
    """Wrap each of :data:`ALLOCATORS` that exists so that the storage of every int64 buffer it
    allocates joins ``allocated`` (and leaves it with the buffer's last view)."""
    import torch

    def tracked(allocate: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        buffer = allocate(*args, **kwargs)
        if buffer.dtype == torch.int64:
            allocated.add(buffer.untyped_storage())
        return buffer

    for dotted in ALLOCATORS:
        root, *path, attr = dotted.split(".")
        try:
            owner = functools.reduce(getattr, path, sys.modules[root])
        except (KeyError, AttributeError):
            continue
        if hasattr(owner, attr):
            patcher.wrap(owner, attr, tracked)


def checking(narrowing: Callable[..., Any], def_args: Collection[str], positions: list[tuple[int, str]],
             kernel: str, allocated: weakref.WeakSet) -> Callable[..., Any]:
    """``narrowing`` (the launcher the backend's wrapper returned) preceded by :func:`check`
    of the int64 arguments at ``positions`` that are not buffers of ``allocated``, except
    during graph capture."""
    import torch

    n_def, Tensor, detector = len(def_args), torch.Tensor, capture_detector()

    def checked_launcher(*args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if len(args) >= n_def and not is_capturing(detector):
            check(kernel, [(name, args[i]) for i, name in positions
                           if isinstance(args[i], Tensor) and args[i].dtype == torch.int64
                           and args[i].untyped_storage() not in allocated])
        return narrowing(*args, stream=stream, **kwargs)

    return with_launcher_attrs(checked_launcher, narrowing)


def probe(module: types.ModuleType) -> Probe:
    """Wrap a recording launcher with the live function (a plain cast in place of the module's
    memoised one) and launch it on an int64 tensor holding ``2**31 + 7``."""
    import torch

    seen: list[list[int]] = []

    def launcher(in_ptr0: Any, xnumel: int, stream: Any = None) -> None:
        seen.append(in_ptr0.tolist())

    launcher._npu_def_args = ["in_ptr0", "xnumel"]  # type: ignore[attr-defined]
    wrap = probe_wrapper(module, TARGET)
    try:
        wrap(launcher, {"in_ptr0": "*i64"}, [])(torch.tensor([PROBE_VALUE]), 1, stream=None)
    except OverflowError as exc:
        return Probe(False, f"an int64 value past int32 stops the launch: {exc}")
    if seen != [[PROBE_VALUE]]:
        return Probe(True, f"an int64 argument holding {PROBE_VALUE} reached the kernel as {seen[0]}, "
                           f"without an error ({WORKAROUND})")
    return Probe(False, f"an int64 argument holding {PROBE_VALUE} reaches the kernel unchanged")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    allocated: weakref.WeakSet = weakref.WeakSet()
    track_allocations(patcher, allocated)

    def guard(narrowing: Any, launcher: Any, def_args: Collection[str], downcast_args: Mapping[str, str],
              mutated_arg_names: Collection[str]) -> Any:
        plan = boundary_plan(module._DTYPE_DOWNCAST_MAP, def_args, downcast_args, mutated_arg_names)
        positions = checked_arguments(plan)
        if not positions:
            return narrowing
        kernel = getattr(getattr(launcher, "fn", None), "__name__", None) or "triton kernel"
        return checking(narrowing, def_args, positions, kernel, allocated)

    layer_launchers(module, patcher, TARGET, guard)


FIX = Fix(
    name="int64-past-int32",
    about=About(
        symptom=(
            "silently wrong results where an int64 input of a compiled kernel holds a value past int32 "
            "(`x + 1` of `2**40` gives 1): the launcher cuts it to 32 bits"
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
