"""How an argument crosses the int32 boundary of the backend's launchers: its role, and a
narrow copy that keeps the strides the kernel was compiled for."""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ...shim.scoped import with_globals

#: The attributes the backend's downcast wrapper copies from a launcher to its wrapper.
COPIED_ATTRS = (
    "config", "runnable", "n_regs", "n_spills", "shared", "store_cubin",
    "fn", "bin", "def_args", "call_args", "_npu_def_args", "cache_hash",
)


class Role(str, enum.Enum):
    """How one downcast argument crosses the boundary."""

    OUTPUT = "output"  # empty narrow temporary, copied back after the launch
    IN_OUT = "in-out"  # narrow copy of the input, copied back after the launch
    INPUT = "input"  # memoised narrow copy, nothing copied back


def boundary_role(name: str, mutated_arg_names: Collection[str]) -> Role:
    """The role of kernel argument ``name``: written arguments whose input the kernel may
    read (``in_out_ptr*`` or mutated) must keep their contents; ``out_ptr*`` need not."""
    if name.startswith("in_out_ptr") or name in mutated_arg_names:
        return Role.IN_OUT
    if name.startswith("out_ptr"):
        return Role.OUTPUT
    return Role.INPUT


def memory_span(tensor: Any) -> int:
    """How many elements of memory ``tensor``'s view covers, from its first to its last."""
    pairs = zip(tensor.shape, tensor.stride(), strict=True)
    return 1 + sum((size - 1) * abs(stride) for size, stride in pairs)


def is_dense(tensor: Any) -> bool:
    """Whether ``tensor``'s elements fill its memory span without gaps (contiguous or
    permuted), i.e. ``to``/``empty_like`` keep its strides."""
    if tensor.is_contiguous():
        return True
    return tensor.numel() == 0 or memory_span(tensor) == tensor.numel()


def narrow_like(tensor: Any, narrow: Any, keep_values: bool) -> Any:
    """A ``narrow``-dtype tensor with ``tensor``'s sizes and strides (the kernel was compiled
    for those strides), holding ``tensor``'s values when ``keep_values``.

    Dense layouts (contiguous or permuted) go through ``to``/``empty_like``, which keep
    them. Any other view, one with gaps (``x[:, ::2]``) or a broadcast one (stride 0,
    ``x.expand(...)``), gets the memory span it covers cast as a whole and viewed with the
    same strides, where ``to`` would make it contiguous (and ``copy_`` into a broadcast
    twin would refuse its overlapping elements).
    """
    import torch

    if is_dense(tensor):
        return tensor.to(narrow) if keep_values else torch.empty_like(tensor, dtype=narrow)
    span = memory_span(tensor)
    if keep_values:
        flat = tensor.as_strided((span,), (1,), tensor.storage_offset()).to(narrow)
    else:
        flat = torch.empty(span, dtype=narrow, device=tensor.device)
    return flat.as_strided(tensor.size(), tensor.stride())


def boundary_plan(dtype_map: Mapping[str, tuple[Any, Any]], def_args: Sequence[str],
                  downcast_args: Mapping[str, str],
                  mutated_arg_names: Collection[str]) -> list[tuple[int, str, Any, Any, Role]]:
    """``(position, name, wide dtype, narrow dtype, role)`` of each argument of ``def_args``
    that ``downcast_args`` narrows (``dtype_map``: the backend's ``_DTYPE_DOWNCAST_MAP``)."""
    return [(i, name, *dtype_map[downcast_args[name]], boundary_role(name, mutated_arg_names))
            for i, name in enumerate(def_args)
            if name in downcast_args and downcast_args[name] in dtype_map]


def launch_and_write_back(launcher: Callable[..., Any], args: tuple, new_args: list[Any] | None,
                          writebacks: list[tuple[Any, Any]], stream: Any, kwargs: dict) -> Any:
    """Launch with ``new_args`` (``args`` where nothing was narrowed), then copy each narrowed
    written argument back into its original, in argument order."""
    if new_args is None:
        return launcher(*args, stream=stream, **kwargs)
    result = launcher(*new_args, stream=stream, **kwargs)
    for original, tmp in writebacks:
        write_back(original, tmp)
    return result


def write_back(original: Any, tmp: Any) -> None:
    """Copy ``tmp`` (a :func:`narrow_like` of ``original``: same sizes and strides) into
    ``original``. Where ``original``'s elements overlap (a broadcast output buffer, strides
    ``(1, 0, 0)``), which ``copy_`` refuses, each memory position it covers is written once."""
    import torch

    if torch._debug_has_internal_overlap(original) == 0:
        original.copy_(tmp)
        return
    span = memory_span(original)
    offsets = torch.arange(span, device=original.device).as_strided(original.size(), original.stride())
    positions = offsets.reshape(-1).unique()
    wide = original.as_strided((span,), (1,), original.storage_offset())
    wide[positions] = tmp.as_strided((span,), (1,), tmp.storage_offset())[positions].to(original.dtype)


def capture_detector() -> Callable[[], bool] | None:
    """The current-stream capture test of the accelerator in use (NPU, else CUDA), or None
    when no graph can be captured in this process."""
    import torch

    found = getattr(getattr(torch, "npu", None), "is_current_stream_capturing", None)
    if found is None and torch.cuda.is_available():
        found = torch.cuda.is_current_stream_capturing
    return found


def is_capturing(detector: Callable[[], bool] | None) -> bool:
    """Whether ``detector`` (a :func:`capture_detector`) says a graph is being captured now."""
    if detector is None:
        return False
    try:
        return bool(detector())
    except Exception:  # noqa: BLE001 - no usable capture state means no capture
        return False


def with_launcher_attrs(wrapper: Callable[..., Any], launcher: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` given the attributes of ``launcher`` that the backend's wrapper copies."""
    for attr in COPIED_ATTRS:
        if hasattr(launcher, attr):
            setattr(wrapper, attr, getattr(launcher, attr))
    return wrapper


def kernel_name(launcher: Any) -> str:
    """The name of the kernel ``launcher`` launches: its ``fn``'s, else that of the compiled
    kernel its code holds as ``bin`` (Triton's ``CompiledKernel.name``), else "triton kernel"."""
    fn = getattr(launcher, "fn", None)
    binary = (getattr(launcher, "__globals__", None) or {}).get("bin")
    return getattr(fn, "__name__", None) or getattr(binary, "name", None) or "triton kernel"


def layer_launchers(module: Any, patcher: Any, target: str, layer: Callable[..., Any]) -> None:
    """Wrap the downcast wrapper ``target`` of ``module`` so that each launcher it returns with
    something to narrow gets ``layer(narrowing, launcher, def_args, downcast_args,
    mutated_arg_names)`` (``narrowing``: what the wrapper returned for ``launcher``) in its
    place; a launcher the wrapper leaves as it is, or one without ``_npu_def_args``, is
    returned unchanged."""

    def layered(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        def bind(launcher: Any, downcast_args: Mapping[str, str], mutated_arg_names: Collection[str]) -> Any:
            narrowing = wrapped(launcher, downcast_args, mutated_arg_names)
            def_args = getattr(launcher, "_npu_def_args", None)
            if narrowing is launcher or not def_args:
                return narrowing
            return layer(narrowing, launcher, def_args, downcast_args, mutated_arg_names)

        return bind(*args, **kwargs)

    patcher.wrap_path(module, target, layered)


def probe_wrapper(module: Any, target: str) -> Callable[..., Any]:
    """A private copy of the live downcast wrapper ``target`` of ``module`` (its wrappers
    kept) with a plain cast in place of the module's memoised one: a probe touches no
    module cache."""
    import inspect

    return with_globals(inspect.getattr_static(module, target),
                        {"_memoized_downcast": lambda src, dtype: src.to(dtype)})


def seen_by_kernel(module: Any, target: str, name: str, kind: str, tensor: Any,
                   mutated: Collection[str] = ()) -> list[Any]:
    """What a kernel of one argument ``name`` (signature type ``kind``) sees of ``tensor``
    (``tolist()``, one entry per launch) when its launcher, wrapped by :func:`probe_wrapper`'s
    copy of the live ``target`` with ``mutated`` as the mutated arguments, is launched once."""
    seen: list[Any] = []

    def launcher(*args: Any, stream: Any = None) -> None:
        seen.append(args[0].tolist())

    launcher._npu_def_args = [name, "xnumel"]  # type: ignore[attr-defined]
    probe_wrapper(module, target)(launcher, {name: kind}, list(mutated))(tensor, tensor.numel(), stream=None)
    return seen

