"""infinite-integer-fill: ``n.float().amin(-1)`` of integers gives -2147483648 (or 0).

- **Defect**: to drop the select of a looped float reduction, the backend picks the ``other=``
  fill of each reduction-axis load so that the pad lanes reach the reduction's identity (0,
  -inf, inf or 1), following the value through its ops, but never asks the load's dtype: an
  integer or bool load converted to float before a min or max gets ``other=float("inf")`` or
  ``float("-inf")``, a value its type cannot hold. Triton converts it to the load's type, which
  is undefined for an infinity (x86 and Triton's interpreter give INT_MIN, 0 for 8 bits); the
  select is gone, so that value enters the result: ``n.float().amin(-1)`` of an int32 or int64
  ``[4, 1000]`` is -2147483648, of int8/uint8 values 1..4 is 0.
- **Where**: ``codegen.triton.NPUTritonKernel._pick_reduction_load_fill`` (asked by ``load``
  for the current FX load node).
- **Probe**: the live method on an int32 load cast to float32 and min-reduced (an FX graph of
  the loop body's form): does it pick an infinite fill?
- **Fix**: an infinite fill for a load whose buffer is not floating is refused (the default 0
  fill and the select stay); finite fills (1) and floating loads as the backend picks them.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "NPUTritonKernel._pick_reduction_load_fill"


def _load_dtype() -> Any:
    """The dtype of the buffer the load being generated reads (None where not known)."""
    from torch._inductor.virtualized import V

    try:
        return V.graph.get_dtype(V.interpreter.current_node.args[1])
    except Exception:  # noqa: BLE001 - not a load this rule can read
        return None


def allowed(fill: Any, dtype: Any) -> Any:
    """``fill`` where the load's ``dtype`` can hold it, else None (the default fill)."""
    if fill is None or math.isfinite(fill) or dtype is not None and dtype.is_floating_point:
        return fill
    return None


@contextlib.contextmanager
def _integer_min_load() -> Iterator[Any]:
    """A stand-in kernel whose current FX node loads int32 ``buf0``, cast to float32 and
    min-reduced over ``r0_0``, with the virtualized graph and interpreter set for it."""
    import sympy
    import torch
    import torch.fx
    from torch._inductor.virtualized import V

    graph = torch.fx.Graph()
    ops = graph.placeholder("ops")
    index = graph.call_module("get_index", ("index0",))
    load = graph.call_method("load", (ops, "buf0", index))
    cast = graph.call_method("to_dtype", (ops, load, torch.float32))
    reduced = graph.call_method("reduction", (ops, torch.float32, torch.float32, "min", cast))
    graph.call_method("store_reduction", (ops, "buf1", index, reduced))
    r0 = sympy.Symbol("r0_0", integer=True, nonnegative=True)
    body = types.SimpleNamespace(indexing_exprs={"index0": r0}, reduce_vars=[r0])
    kernel = types.SimpleNamespace(current_node=types.SimpleNamespace(_body=body))
    buffers = types.SimpleNamespace(get_dtype=lambda name: torch.int32)
    with V.set_graph_handler(buffers), V.set_interpreter_handler(types.SimpleNamespace(current_node=load)):
        yield kernel


def probe(module: types.ModuleType) -> Probe:
    """The live fill choice for an int32 load cast to float32 and min-reduced."""
    with _integer_min_load() as kernel:
        fill = module.NPUTritonKernel._pick_reduction_load_fill(kernel)
    if fill is not None and not math.isfinite(fill):
        return Probe(True, f"an int32 load reduced by min as float32 gets other={fill}, "
                           "a value int32 cannot hold")
    return Probe(False, f"an int32 load reduced by min as float32 gets other={fill} (None: the default 0)")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def pick(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        return allowed(wrapped(*args, **kwargs), _load_dtype())

    patcher.wrap_path(module, TARGET, pick)


FIX = Fix(
    name="infinite-integer-fill",
    about=About(
        symptom=(
            "`amin`/`amax`/`min`/`max` of integer or bool values converted to float (`n.float().amin(-1)`) "
            "wrong: -2147483648 or 0 where the smallest value is 1 (masked lanes read as an infinity "
            "converted to an integer)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=(
            "set `torch_npu._inductor.triton_experimental.codegen.triton.npu_elide_reduction_where = False` "
            "before compiling, or reduce the integers before converting them (`n.amin(-1).float()`)"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
