"""infinite-integer-fill: ``n.float().amin(-1)`` of integers gives -2147483648 (or 0).

- **Defect**: to drop the select of a looped float reduction, the backend picks the ``other=``
  fill of each reduction-axis load so that the pad lanes reach the reduction's identity (0,
  -inf, inf or 1), following the value through its ops, but never asks what the value's types
  can hold: an integer load converted to float before a min or max, or a float load converted
  to an integer and back (``x.int().float()``), gets ``other=float("inf")`` or
  ``float("-inf")``, which Triton converts to the integer type. That is undefined for an
  infinity (Triton's interpreter and x86 give INT_MIN, 0 for 8 bits; what the NPU gives has
  not been measured); the select is gone, so that value enters the result: in the
  interpreter ``n.float().amin(-1)`` of an int32 or int64 ``[4, 1000]`` of values 1..4 is
  -2147483648, of int8 values 0.
- **Where**: ``codegen.triton.NPUTritonKernel._pick_reduction_load_fill`` (asked by ``load``
  for the current FX load node).
- **Probe**: the live method on an int32 load cast to float32 and min-reduced (an FX graph of
  the loop body's form): does it pick an infinite fill?
- **Fix**: an infinite fill is refused (the default 0 fill and the select stay) where the
  loaded buffer's dtype cannot hold an infinity, is not known, or the value is converted to
  such a type on its way; finite fills (1) and floating values as the backend picks them.
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


def _holds_infinity(dtype: Any) -> bool:
    import torch

    return dtype.is_floating_point and bool(torch.tensor(math.inf).to(dtype).float().isinf())


def _value_dtypes() -> list[Any] | None:
    """The dtypes the load being generated goes through: its buffer's, then every conversion
    downstream of it in the loop body (None where the load cannot be read)."""
    from torch._inductor.virtualized import V

    try:
        load = V.interpreter.current_node
        dtypes, seen, stack = [V.graph.get_dtype(load.args[1])], set(), [load]
    except Exception:  # noqa: BLE001 - not a load this rule can read
        return None
    while stack:
        for user in stack.pop().users:
            if id(user) not in seen:
                seen.add(id(user))
                stack.append(user)
                if str(user.target) in ("to_dtype", "to_dtype_bitcast") and len(user.args) > 2:
                    dtypes.append(user.args[2])
    return dtypes


def allowed(fill: Any, dtypes: list[Any] | None) -> Any:
    """``fill`` where every one of ``dtypes`` can hold it, else None (the default fill)."""
    if fill is None or math.isfinite(fill) or dtypes is not None and all(map(_holds_infinity, dtypes)):
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
    buffers = types.SimpleNamespace(get_dtype={"buf0": torch.int32}.__getitem__)
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
        fill = wrapped(*args, **kwargs)  # asked for every reduction-axis load: walk only for an infinity
        return fill if fill is None or math.isfinite(fill) else allowed(fill, _value_dtypes())

    patcher.wrap_path(module, TARGET, pick)


FIX = Fix(
    name="infinite-integer-fill",
    about=About(
        symptom=(
            "`amin`/`min` of integer values converted to float (`n.float().amin(-1)`, `x.int().float()`), "
            "or `amax` of their negation, wrong: -2147483648 or 0 where the smallest value is 1 (masked "
            "lanes read as an infinity converted to an integer; measured in Triton's interpreter)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=(
            "set `torch_npu._inductor.triton_experimental.codegen.triton.npu_elide_reduction_where = False` "
            "before compiling, or reduce the integers before converting them (`n.amin(-1).float()`; "
            "for int64, `n.int().amin(-1).float()`)"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
