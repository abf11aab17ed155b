"""triton36-combine-attrs: the rsplit combine kernel builds under a triton-ascend 3.6 runtime.

- **Defect**: the cross-core split's combine kernel describes its arguments with
  ``triton.compiler.compiler.AttrsDescriptor`` (triton-ascend 3.2.x), which Tritons of the
  3.6 generation no longer have: every kernel the split fires on stops at codegen with
  ``ImportError: cannot import name 'AttrsDescriptor' from 'triton.compiler.compiler'``.
- **Where**: ``codegen.triton.NPUTritonScheduling._npu_emit_rsplit_combine``.
- **Probe**: the live method run with a stand-in partial kernel as far as its argument
  description, under the installed Triton; it finds the defect with a Triton of the 3.6
  generation (see triton36-launcher). With triton-ascend 3.2.x nothing is found and nothing
  is changed.
- **Fix**: the method runs as a scoped copy whose ``from triton.compiler.compiler import
  AttrsDescriptor`` gets :class:`ConfigAttrs` (nothing global changes): its ``from_dict``
  gives the description as 3.6 takes it, ``{(index,): [["tt.divisibility", 16]]}`` per
  divisible argument, which is what the published wheel builds there. The combine
  kernel's launcher needs triton36-launcher like any other.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe, one_line
from ..shim.patcher import Patcher
from ..shim.scoped import call_rebound, importing, scoped_method
from .shared.triton_generation import knobs_generation

TARGET = "NPUTritonScheduling._npu_emit_rsplit_combine"
SOURCE = "triton.compiler.compiler"


class ConfigAttrs:
    """Where the combine kernel asks for triton-ascend 3.2.x's ``AttrsDescriptor``: the
    same description in the form Tritons of the 3.6 generation take."""

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> dict[tuple[int], list[list[Any]]]:
        properties = data["arg_properties"]
        if properties.get("tt.equal_to"):
            raise ValueError(f"npu_fixes triton36-combine-attrs: no 3.6 form for tt.equal_to {properties}")
        return {(index,): [["tt.divisibility", 16]] for index in properties["tt.divisibility"]}


_BUILTINS = importing(SOURCE, AttrsDescriptor=ConfigAttrs)


def build_combine(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """wrapt wrapper of ``_npu_emit_rsplit_combine``: run it with :class:`ConfigAttrs`."""
    return call_rebound("triton36-combine-attrs", wrapped, {"__builtins__": _BUILTINS}, args, kwargs)


class _Reached(Exception):
    """The probe's stop: the method got past its argument description."""


def _stop(*args: Any) -> None:
    raise _Reached


def probe(module: types.ModuleType) -> Probe:
    """Run the live method on a stand-in partial kernel (a 16-wide output) until it asks
    for the device (right after describing the combine kernel's arguments)."""
    import sympy
    import torch
    import triton
    from torch._inductor.virtualized import V

    if not knobs_generation():
        return Probe(False, f"triton {triton.__version__}: AttrsDescriptor present (the 3.2 generation)")
    # the output buffer is named through a helper in later states, read off args in 8bfbb9ed1
    partial = types.SimpleNamespace(npu_rsplit_ws=("ws", 0, 16, torch.float32), range_trees=[],
                                    args=types.SimpleNamespace(output_buffers={"buf0": "out_ptr0"}))
    graph = types.SimpleNamespace(sizevars=types.SimpleNamespace(optimization_hint=lambda e: int(e)),
                                  get_current_device_or_throw=_stop)
    cores = types.SimpleNamespace(get_npu_vector_core_count=lambda: 40)
    scheduling = module.NPUTritonScheduling.__new__(module.NPUTritonScheduling)
    method = scoped_method(module.NPUTritonScheduling, TARGET.rpartition(".")[2], scheduling,
                           {"_npu_rsplit_out_binding": lambda p: ("buf0", "out_ptr0"), "device_props": cores,
                            "sympy": sympy})
    seen = f"triton {triton.__version__}: the combine kernel's argument description"
    try:
        with V.set_graph_handler(graph):  # type: ignore[arg-type]
            method(partial, [])
    except _Reached:
        return Probe(False, f"{seen} builds")
    except ImportError as exc:
        message = one_line(exc).split(" (")[0]  # not the path of the installed Triton
        return Probe(True, f"{seen} stops: {message} (without npu_fixes: rsplit_outer=False)")
    raise RuntimeError(f"{seen} was not reached: the method returned before it")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, build_combine)


FIX = Fix(
    name="triton36-combine-attrs",
    about=About(
        symptom=(
            "with a Triton of the 3.6 generation every split OUTER sum stops: `ImportError: cannot import "
            "name 'AttrsDescriptor'`"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround=(
            "`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`, or triton-ascend 3.2.x"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("partial", "node_schedule")},
)
