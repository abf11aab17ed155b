"""upsample-symbolic-sizes: nearest and bilinear upsampling compile under dynamic shapes.

- **Defect**: the loader takes PyTorch's Python kernels off ``upsample_nearest1d/2d/3d`` and
  ``upsample_bilinear2d`` (``.vec`` and ``.default``) for the whole process, so that the NPU's
  own kernels run instead of a decomposition. Under symbolic sizes (``dynamic=True``, or
  Dynamo's automatic dynamic shapes once a size changes) tracing then meets ATen's C++ code,
  which takes concrete integers only: ``F.interpolate`` with a ``size`` or
  ``recompute_scale_factor=True`` stops the compile in the ``.vec`` overload (``SymIntArrayRef
  expected to contain only concrete integers``), and the backward of ``upsample_nearest1d``,
  ``upsample_nearest3d`` and ``upsample_bilinear2d`` in its fake kernel (``isIntList() INTERNAL
  ASSERT FAILED ... Expected IntList but got GenericList``). The wheels give bilinear ``.vec``
  a Python kernel again; its backward still stops.
- **Where**: ``decomposition.disable_implicit_decomposition``.
- **Probe**: the live function run once more, the kernels it takes put back after: does a
  trace of ``upsample_nearest1d.vec`` with a symbolic output size stop?
- **Fix**: after the function runs (and at once where it ran already), each ``.vec`` it left
  without a Python kernel gets one that does what ATen's C++ one does, the output size in
  symbolic arithmetic, then the same ``.default`` (the NPU's kernel still runs); each backward
  whose fake kernel refuses symbolic sizes gets a Python one of the same result (the input's
  size and ATen's memory format).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "disable_implicit_decomposition"
#: The ops the loader takes Python's kernels from, and their spatial dims.
SPATIAL = {"upsample_nearest1d": 1, "upsample_nearest2d": 2, "upsample_nearest3d": 3,
           "upsample_bilinear2d": 2}
#: Those whose backward gives the gradient's suggested memory format (channels last), as ATen's does.
KEEPS_FORMAT = {"upsample_nearest2d", "upsample_bilinear2d"}


def _keys() -> tuple[Any, ...]:
    from torch._C import DispatchKey

    return (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)


def _overloads(name: str) -> tuple[Any, Any, Any]:
    """``name``'s ``.vec``, ``.default`` and backward overloads."""
    import torch

    packet = getattr(torch.ops.aten, name)
    return packet.vec, packet.default, getattr(torch.ops.aten, f"{name}_backward").default


@functools.cache  # one object per op, so that the probe's run of the loader keeps ours in place
def vec_kernel(default: Any) -> Callable[..., Any]:
    """The ``.vec`` overload of ``default``'s op (``input, output_size, *options,
    scale_factors``): the output size from ``scale_factors`` where none is given, then
    ``default(input, output_size, *options, *scales)``, in symbolic arithmetic."""
    from torch._decomp.decompositions import upsample_compute_output_size

    def vec(input: Any, output_size: Any, *rest: Any) -> Any:
        *options, scale_factors = rest
        size = upsample_compute_output_size(input.size(), output_size, scale_factors)
        return default(input, size, *options, *(scale_factors or [None] * len(size)))

    return vec


@functools.cache
def backward_meta(name: str) -> Callable[..., Any]:
    """A fake kernel of ``name``'s backward (``grad_output, output_size, input_size, ...``) that
    takes symbolic sizes: ATen's result, the input's size, contiguous or (where ATen's has it)
    in the gradient's suggested memory format."""
    import torch
    from torch._prims_common import suggest_memory_format

    spatial = SPATIAL[name]

    def meta(grad_output: Any, output_size: Any, input_size: Any, *options: Any) -> Any:
        torch._check(len(output_size) == spatial and len(input_size) == spatial + 2,
                     lambda: f"expected {spatial} output sizes and {spatial + 2} input sizes, got "
                             f"{list(output_size)} and {list(input_size)}")
        expected = [*input_size[:2], *output_size]
        torch._check(grad_output.ndim == spatial + 2, lambda: f"grad_output of {grad_output.ndim} dims, "
                                                                f"expected {spatial + 2}")
        for got, size in zip(grad_output.shape, expected, strict=True):
            torch._check(got == size,
                         lambda: f"grad_output of shape {list(grad_output.shape)}, expected {expected}")
        grad_input = grad_output.new_empty(input_size)
        if name in KEEPS_FORMAT:
            return grad_input.to(memory_format=suggest_memory_format(grad_output))
        return grad_input

    return meta


def _stops(trace: Callable[..., Any], *shapes: tuple[int, ...]) -> bool:
    """Whether a symbolic trace of ``trace`` on empty tensors of ``shapes`` stops on
    ATen's refusal of symbolic sizes."""
    import logging

    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")  # logs the refusal we expect
    level = fake_tensor_log.level
    fake_tensor_log.setLevel(logging.CRITICAL)
    try:
        make_fx(trace, tracing_mode="symbolic")(*(torch.empty(s) for s in shapes))
    except RuntimeError as exc:
        return "concrete integers" in str(exc) or "Expected IntList" in str(exc)
    finally:
        fake_tensor_log.setLevel(level)
    return False


@functools.cache
def refuses_symbolic_sizes(name: str) -> bool:
    """Whether the fake kernel of ``name``'s backward stops on symbolic sizes."""
    spatial, backward = SPATIAL[name], _overloads(name)[2]
    options = [False] if "bilinear" in name else []

    def trace(grad: Any) -> Any:
        sizes = list(grad.shape)
        return backward(grad, sizes[2:], [*sizes[:2], *(s - 1 for s in sizes[2:])], *options)

    return _stops(trace, (1, 2, *[5] * spatial))


def repair(patcher: Patcher) -> None:
    """Python kernels where the loader took them: each ``.vec`` without one, and the
    backward of each op whose ``.default`` has none and whose fake kernel refuses symbolic
    sizes."""
    from torch._C import DispatchKey

    for name in SPATIAL:
        vec, default, backward = _overloads(name)
        if not any(key in vec.py_kernels for key in _keys()):
            for key in _keys():
                patcher.set_item(vec.py_kernels, key, vec_kernel(default), vec._dispatch_cache.clear)
        if not any(key in default.py_kernels for key in _keys()) and refuses_symbolic_sizes(name):
            patcher.set_item(backward.py_kernels, DispatchKey.Meta, backward_meta(name),
                             backward._dispatch_cache.clear)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def after(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        repair(patcher)
        return result

    patcher.wrap_path(module, TARGET, after)
    if getattr(getattr(module, TARGET), "has_run", False):  # the loader ran before npu_fixes was armed
        repair(patcher)


def probe(module: types.ModuleType) -> Probe:
    """The live function run once more (with the kernels it takes, and its run-once flag, put
    back after), then a symbolic trace of ``upsample_nearest1d.vec``."""
    import torch

    live = getattr(module, TARGET)
    if not hasattr(live, "has_run"):
        return Probe(False, f"{TARGET} is not the loader's run-once function: it cannot run again")
    ops = [op for name in SPATIAL for op in _overloads(name)]
    kernels, ran = [dict(op.py_kernels) for op in ops], live.has_run
    try:
        live.has_run = False
        live()
        for op in ops:
            op._dispatch_cache.clear()
        vec = torch.ops.aten.upsample_nearest1d.vec
        stops = _stops(lambda x: vec(x, [x.shape[-1] + 1], None), (1, 1, 4))
    finally:
        live.has_run = ran
        for op, saved in zip(ops, kernels, strict=True):
            op.py_kernels.clear()
            op.py_kernels.update(saved)
            op._dispatch_cache.clear()
    if stops:
        return Probe(True, f"after the loader's {TARGET}, a trace of upsample_nearest1d.vec with a symbolic "
                           "output size stops: ATen's C++ kernel takes concrete integers only")
    return Probe(False, f"after the loader's {TARGET}, upsample_nearest1d.vec traces with a symbolic "
                        "output size")


FIX = Fix(
    name="upsample-symbolic-sizes",
    about=About(
        symptom=(
            "under dynamic shapes (`dynamic=True`, or automatic once a size changes) `F.interpolate` "
            "nearest/bilinear with a `size`, `recompute_scale_factor=True` or a backward stops the compile: "
            "`SymIntArrayRef expected to contain only concrete integers`, or `isIntList() INTERNAL ASSERT "
            "FAILED ... Expected IntList but got GenericList`"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=("compile with `dynamic=False` (and "
                    "`torch._dynamo.config.automatic_dynamic_shapes = False`)"),
    ),
    module="torch_npu._inductor.decomposition",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
