"""Direct launches of compiled kernels, past Triton's JIT, and the check that this Triton
launches the way they assume.

Through Triton's JIT a launch binds and specializes every argument, builds a cache key and
asks the driver about every pointer: 20-30 us of host time per launch on an H200 host, for
kernels that take a few microseconds on the device. Once a kernel has been compiled for a
call, later calls with the same key launch the compiled kernel through its launcher at once,
with raw pointers. Keys hold the exact value of every integer argument and the dtype and low
address bits of every tensor whose buffer was not allocated here (those are fresh and 512-byte
aligned), so a key is never coarser than Triton's own specialization (dtype, 16-byte
alignment, divisibility by 16, equality to 1, integer width). Per device type
(``tuning.FAST_LAUNCH``); used only where JITFunction.run launches the way this code does
(checked once).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch import Tensor

from . import tuning

raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
LAUNCHED: dict[tuple[Any, ...], Any] = {}  # launch key -> (launch, head) of its compiled kernel
_FAST_PROTOCOL: list[bool] = []  # [whether Triton's launch protocol is the expected one], once known
_RUN_CALL = (
    "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
    "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())"
)


@cache
def load_kernels() -> Any:
    """The kernel module, imported at the first Triton call (``import triton`` is slow)."""
    from . import kernels

    return kernels


def fast_protocol() -> bool:
    """Whether this Triton's JIT launches a compiled kernel exactly as :func:`launch` does."""
    if not _FAST_PROTOCOL:
        try:
            import inspect

            from triton.runtime.jit import JITFunction

            source = " ".join(inspect.getsource(JITFunction.run).split())
            _FAST_PROTOCOL.append(_RUN_CALL in source and load_kernels().RUNTIME_KNOBS is not None)
        except Exception:  # noqa: BLE001 - any surprise: the JIT path
            _FAST_PROTOCOL.append(False)
    return _FAST_PROTOCOL[0]


# A compiled kernel's ``run`` is Triton's launcher object; on CUDA its ``__call__`` allocates
# scratch buffers (none for our kernels) and passes the call on to its C ``launch`` with the
# launch flags. The eager plans call that C function themselves where the launcher is this one
# (checked once), saving about 2 us per launch on an H200 host.
_LAUNCHER_CALL = (
    "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
    "global_scratch, profile_scratch, *args)"
)
_C_LAUNCH: dict[type, bool] = {}  # launcher class -> whether its __call__ is the one above


def launcher(compiled: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(launch, head)`` for a compiled kernel: ``launch(grid_0, grid_1, grid_2, stream, *head,
    *args)`` launches it as its ``run`` would, with hooks and launch metadata off."""
    run = compiled.run
    cls = type(run)
    direct = _C_LAUNCH.get(cls)
    if direct is None:
        try:
            import inspect

            direct = _LAUNCHER_CALL in " ".join(inspect.getsource(cls.__call__).split())
        except Exception:  # noqa: BLE001 - any surprise: through run
            direct = False
        _C_LAUNCH[cls] = direct
    if direct and not run.global_scratch_size and not run.profile_scratch_size:
        head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None)
        return run.launch, head + (compiled.packed_metadata, None, None, None)
    return run, (compiled.function, compiled.packed_metadata, None, None, None)


def fast_key(device: torch.device) -> bool:
    """Whether launches on ``device`` may be keyed for direct launching."""
    return tuning.FAST_LAUNCH.get(device.type, False) and fast_protocol()


def no_launch_hooks(runtime: Any) -> bool:
    """No profiler hooks on launches (else the JIT path runs them)."""
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


def launch(
    kernel: Any, grid: tuple[int, int], args: tuple[Any, ...], num_warps: int, key: tuple[Any, ...] | None
) -> None:
    """``kernel[grid](*args, num_warps=num_warps)``; ``args``: every parameter in order,
    constexprs included. With a ``key`` (see :func:`fast_key`) a kernel compiled for that key
    is launched directly."""
    if key is not None:
        known = LAUNCHED.get(key)
        if known is not None and no_launch_hooks(load_kernels().RUNTIME_KNOBS):
            raw = [a.data_ptr() if isinstance(a, Tensor) else a for a in args]
            known[0](grid[0], grid[1], 1, raw_stream(key[1]), *known[1], *raw)
            return
    compiled = kernel[grid](*args, num_warps=num_warps)
    if key is not None and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
        if len(LAUNCHED) >= 4096:
            LAUNCHED.clear()
        LAUNCHED[key] = launcher(compiled)
