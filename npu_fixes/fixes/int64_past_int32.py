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
  wrapper returns is wrapped once more; the int64 arguments the kernel only reads are checked
  once while they stay as they are (:class:`BoundsWatch`), by a min/max on their device read
  back without blocking the host: a value past int32 raises :class:`Int64PastInt32`, naming the
  kernel, the argument and its values, at the first launch with an int64 input after the device
  has finished that check, or when the watch has 64 checks pending (that launch waits for the
  oldest), or at :meth:`BoundsWatch.settle` (on a CPU: at that launch). No host synchronisation
  in steady state; launchers without int64 inputs are not wrapped. Not checked: arguments the kernel writes
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

import collections
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
    kernel_name,
    layer_launchers,
    seen_by_kernel,
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


def _bounds(named: list[tuple[str, Any]]) -> Any:
    """The minimum and maximum of each tensor of ``named``, one tensor on their device."""
    import torch

    return torch.stack([v for _, t in named for v in torch.aminmax(t)])


def report(kernel: str, names: list[str], bounds: list[int]) -> None:
    """Raise :class:`Int64PastInt32` for the first of ``names`` whose ``bounds`` (minimum and
    maximum, in turn) leave int32's range."""
    import torch

    info = torch.iinfo(torch.int32)
    for k, name in enumerate(names):
        low, high = bounds[2 * k], bounds[2 * k + 1]
        if low < info.min or high > info.max:
            raise Int64PastInt32(
                f"{kernel}: int64 argument {name!r} holds values in [{low}, {high}], past int32's "
                f"[{info.min}, {info.max}]: this torch_npu computes int64 as int32 and would cut them "
                f"at the kernel boundary, without an error. {WORKAROUND[0].upper()}{WORKAROUND[1:]}; or, "
                f"where the kernel never reads those values, NPU_FIXES_DISABLE=int64-past-int32")


class BoundsWatch:
    """The bounds of the int64 inputs, found on their device and read back without blocking.

    Each tensor is checked once while it stays as it is (the same object, the same version
    counter: an in-place write is a new check), so a step checks each of its index tensors once,
    not at every launch that reads it. On a CPU the check is made at once. On a device, its
    minimum and maximum go to pinned host memory by a non-blocking copy followed by an event;
    each launch with int64 inputs first reads the checks whose events are done, and raises for
    the first one past int32, naming its kernel and argument. At most :attr:`limit` checks wait
    so: a further one makes that launch wait for the oldest. :meth:`settle` waits for them all.
    """

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self.pending: collections.deque = collections.deque()
        self._seen: dict[int, tuple[weakref.ref, int]] = {}

    def checked(self, tensor: Any) -> bool:
        """Whether ``tensor`` was checked as it is now."""
        entry = self._seen.get(id(tensor))
        return entry is not None and entry[0]() is tensor and entry[1] == tensor._version

    def note(self, tensor: Any) -> None:
        """``tensor`` is checked as it is now."""
        key = id(tensor)
        self._seen[key] = (weakref.ref(tensor, lambda _ref, k=key: self._seen.pop(k, None)), tensor._version)

    def submit(self, kernel: str, named: list[tuple[str, Any]]) -> None:
        """Start the check of ``named`` (the inputs of one launch of ``kernel``)."""
        named = [(name, t) for name, t in named if t.numel()]
        if not named:
            return
        names, bounds = [name for name, _ in named], _bounds(named)
        if bounds.device.type == "cpu":
            report(kernel, names, bounds.tolist())
            return
        self.pending.append((*self._start(bounds), kernel, names))

    @staticmethod
    def _start(bounds: Any) -> tuple[Any, Any]:
        """A non-blocking copy of ``bounds`` to pinned host memory, and an event recorded after it."""
        import torch

        host = torch.empty(bounds.shape, dtype=bounds.dtype, pin_memory=True)
        host.copy_(bounds, non_blocking=True)
        event = getattr(torch, bounds.device.type).Event()
        event.record()
        return event, host

    def poll(self) -> None:
        """Read the checks that are done (and the oldest, past :attr:`limit`); raise for one past int32."""
        while self.pending and (len(self.pending) > self.limit or self.pending[0][0].query()):
            self._read_oldest()

    def settle(self) -> None:
        """Wait for every check started and raise for one past int32 (a natural synchronisation)."""
        while self.pending:
            self._read_oldest()

    def _read_oldest(self) -> None:
        event, host, kernel, names = self.pending.popleft()
        event.synchronize()
        report(kernel, names, host.tolist())


#: The watch of this process's guard (:func:`install`): ``settle()`` it where a step synchronises.
WATCH = BoundsWatch()


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
             kernel: str, allocated: weakref.WeakSet, watch: BoundsWatch) -> Callable[..., Any]:
    """``narrowing`` (the launcher the backend's wrapper returned) preceded by ``watch``'s check
    of the int64 arguments at ``positions`` that are not buffers of ``allocated`` and not
    checked as they are, except during graph capture."""
    import torch

    n_def, Tensor, int64, detector = len(def_args), torch.Tensor, torch.int64, capture_detector()

    def checked_launcher(*args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if len(args) >= n_def and not is_capturing(detector):
            if watch.pending:
                watch.poll()
            named = [(name, args[i]) for i, name in positions
                     if isinstance(args[i], Tensor) and not watch.checked(args[i]) and args[i].dtype == int64
                     and args[i].untyped_storage() not in allocated]
            if named:
                for _, tensor in named:
                    watch.note(tensor)
                watch.submit(kernel, named)
        return narrowing(*args, stream=stream, **kwargs)

    return with_launcher_attrs(checked_launcher, narrowing)


def probe(module: types.ModuleType) -> Probe:
    """Wrap a recording launcher with the live function (a plain cast in place of the module's
    memoised one) and launch it on an int64 tensor holding ``2**31 + 7``."""
    import torch

    try:
        seen = seen_by_kernel(module, TARGET, "in_ptr0", "*i64", torch.tensor([PROBE_VALUE]))
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
        kernel = kernel_name(launcher)
        return checking(narrowing, def_args, positions, kernel, allocated, WATCH)

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
