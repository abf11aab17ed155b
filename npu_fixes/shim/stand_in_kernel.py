"""A stand-in compiled kernel for the probes of the backend's launcher: the live
``NPUTritonCompileResult.make_launcher`` builds a real launcher for it, and its runner
records the grid of each launch instead of launching anything."""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping, Sequence
from typing import Any

from .scoped import with_globals

CORE_COUNT = "get_npu_vector_core_count"  # the module global make_launcher reads
PROBE_CORES = 48


class RecordingRunner:
    """Stand-in for the binary's runner: ``launch`` records the grid it was given."""

    def __init__(self) -> None:
        self.grids: list[int] = []

    def launch(self, *args: Any) -> None:
        self.grids.append(args[0])


class StandInBinary(types.SimpleNamespace):
    """Stand-in compiled binary. Launch hooks live as class attributes of the compiled
    kernel's class in triton-ascend 3.2.x (older backend states read them there) and in
    ``triton.knobs`` from 3.6 (the wheel's launcher reads those): both say "no hook"."""

    launch_enter_hook = None
    launch_exit_hook = None


def stand_in_binary(arg_names: Sequence[str], constexprs: Sequence[int]) -> StandInBinary:
    """A binary for ``kernel(*arg_names)`` whose arguments at ``constexprs`` are constexpr;
    its ``run`` is a fresh :class:`RecordingRunner`."""
    fn = types.SimpleNamespace(arg_names=list(arg_names), constexprs=list(constexprs))
    return StandInBinary(
        src=types.SimpleNamespace(fn=fn), _init_handles=lambda: None, shared=0, packed_metadata={},
        num_warps=1, num_ctas=1, cluster_dims=(1, 1, 1), function=None, run=RecordingRunner(),
        launch_metadata=lambda *a: None, n_regs=0, n_spills=0, hash=None,
    )


def stand_in_result(module: types.ModuleType, binary: Any, constants: Mapping[str, int],
                    meta: Mapping[str, Any]) -> Any:
    """The live ``NPUTritonCompileResult`` of ``module`` for ``binary``: ``constants`` (each
    constexpr's value) in its config and compile meta, the other arguments typed ``*fp32``
    (names holding "ptr") or ``i32``, inductor meta ``meta``."""
    from triton import Config

    signature = {name: "constexpr" if name in constants else "*fp32" if "ptr" in name else "i32"
                 for name in binary.src.fn.arg_names}
    compile_meta = {"constants": dict(constants), "signature": signature}
    return module.NPUTritonCompileResult(binary, Config(dict(constants)), compile_meta, meta)


def launched_grids(result: Any, sizes: Mapping[str, int], cores: int = PROBE_CORES) -> list[int]:
    """Build ``result``'s launcher with the live ``make_launcher`` (wrappers included) under
    a scoped core count of ``cores``, launch it once with ``sizes`` (numel arguments by
    name, every other numel 1) and return the grids it asked for."""
    cls = type(result)
    make_launcher = with_globals(inspect.getattr_static(cls, "make_launcher"), {CORE_COUNT: lambda: cores})
    launcher = make_launcher.__get__(result, cls)()
    params = list(inspect.signature(launcher).parameters)  # states differ in what they keep
    launcher(*[sizes.get(name, 1) if "numel" in name else None for name in params[: params.index("stream")]],
             stream=None)
    return result.kernel.run.grids
