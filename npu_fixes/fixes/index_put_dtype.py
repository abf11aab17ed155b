"""index-put-dtype: ``index_put`` lowers to Inductor's index-put fallback, values cast first.

- **Defect**: the backend's registration turns Inductor's ``index_put`` / ``index_put_``
  lowerings (which cast the values to self's dtype) into generic eager fallbacks that
  hand the values over as they are. CANN rejects an ``index_put`` whose values have
  another dtype than self (``aclnnIndexPutImpl`` error EZ1001). Eager code raises on
  such calls, so only graph-made values reach it: ``x[idx] = torch.ones(n)`` on a float16
  ``x``, which Inductor accepts. On CPU the same fallback stops with ``Index put requires
  the source and destination dtypes match``. The generic fallback of the in-place
  ``index_put_`` also returns an alias of self that Inductor takes for a fresh buffer, so
  a later kernel may reuse it in place and overwrite self: ``x.index_put_(...); return
  x + 1`` on a graph input leaves ``x + 1`` in ``x`` (seen on CPU, any dtypes).
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the ``index_put`` /
  ``index_put_`` entries it leaves in Inductor's ``lowerings`` table).
- **Probe**: does the registered ``index_put`` lowering pass other-dtype values through?
  (register into a scratch table with real generic fallbacks, lower ``index_put`` of float32
  values into float16 self in a real CPU ``GraphLowering``, look at the dtypes the extern
  kernel receives).
- **Fix**: after each registration, the ``default`` and ``hacked_twin`` overloads of
  ``index_put`` / ``index_put_`` that it turned into fallbacks lower as follows: values
  of another dtype are cast to self's, then Inductor's own index-put fallback
  (``IndexPutFallback``, which records the mutation of self) runs on self, or on a copy
  of self for the out-of-place op. Where the backend registered before npu_fixes was
  armed, the fallbacks it left are replaced the same way. Other overloads (``out``, which
  Inductor graphs do not hold) stay as registered.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

REGISTER = "_register_npu_inductor_fallbacks"
PACKETS = ("index_put", "index_put_")
#: Overloads repaired: Inductor's index-put fallback runs ``index_put_`` of the same name.
OVERLOADS = ("default", "hacked_twin")
_CASTS = "_npu_fixes_index_put_cast"


def index_put_ops() -> list[Any]:
    """The repaired OpOverloads of ``aten.index_put`` and ``aten.index_put_`` present here."""
    import torch

    packets = [getattr(torch.ops.aten, name) for name in PACKETS]
    return [getattr(p, name) for p in packets for name in OVERLOADS if name in p.overloads()]


def needs_cast(self_dtype: Any, values_dtype: Any) -> bool:
    """The rule: values reach the fallback in self's dtype, so they are cast when theirs differs."""
    return values_dtype != self_dtype


def values_for(self: Any, values: Any) -> Any:
    """``values`` in ``self``'s dtype (IR nodes; anything without a dtype passes as is)."""
    get_self, get_values = getattr(self, "get_dtype", None), getattr(values, "get_dtype", None)
    if get_self is None or get_values is None or not needs_cast(get_self(), get_values()):
        return values
    from torch._inductor.lowering import to_dtype

    return to_dtype(values, get_self())


def index_put_lowering(in_place: bool) -> Callable[..., Any]:
    """The lowering of ``index_put_`` (``in_place``) or ``index_put``: cast the values to
    self's dtype, then Inductor's index-put fallback on self or on a copy of it."""

    def lower_index_put(self: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
        from torch._inductor import lowering as inductor

        target = self if in_place else inductor.clone(self)
        return inductor.index_put_fallback(target, indices, values_for(target, values), accumulate)

    lower_index_put.__name__ = "npu_fixes_index_put_" if in_place else "npu_fixes_index_put"
    setattr(lower_index_put, _CASTS, True)
    return lower_index_put


def repair_entries(table: MutableMapping[Any, Any], ops: Iterable[Any],
                   patcher: Patcher | None = None) -> list[Any]:
    """Give ``ops``' entries in ``table`` the repaired lowering; return the ops changed.

    With a ``patcher`` the replaced entries are restored by ``npu_fixes.undo()``.
    """
    import torch

    done = []
    for op in ops:
        current = table.get(op)
        if current is None or getattr(current, _CASTS, False):
            continue
        lowering = index_put_lowering(in_place=op.overloadpacket is torch.ops.aten.index_put_)
        if patcher is None:
            table[op] = lowering
        else:
            patcher.set_item(table, op, lowering)
        done.append(op)
    return done


# -- probe ---------------------------------------------------------------------------------


def _scratch_fallback(scratch: dict[Any, Any]) -> Callable[..., None]:
    """A ``make_fallback`` stand-in that puts Inductor's generic fallback lowering for an
    op into ``scratch`` (only for ops already there), as the real one does in its table."""
    from torch._inductor import lowering as inductor

    with_dict = "lowering_dict" in inspect.signature(inductor.register_lowering).parameters

    def make_fallback(op: Any, *args: Any, **kwargs: Any) -> None:
        if op not in scratch:
            return
        handler = inductor.fallback_handler(op)
        if with_dict:
            inductor.register_lowering(op, type_promotion_kind=None, lowering_dict=scratch)(handler)
        else:
            scratch[op] = handler

    return make_fallback


def lowered(lowering: Callable[..., Any], op: Any, self_dtype: Any, values_dtype: Any,
            accumulate: bool = False) -> tuple[Any, list[Any]]:
    """Lower ``op`` (``self_dtype`` self [5], int64 index [3], ``values_dtype`` values [3])
    with ``lowering`` in a fresh CPU ``GraphLowering``: its result and the extern kernels
    it created."""
    import torch
    from torch._inductor import ir
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses import FakeTensorMode

    specs = {"self": (self_dtype, 5), "index": (torch.int64, 3), "values": (values_dtype, 3)}
    fx = torch.fx.Graph()
    nodes = {}
    for name, (dtype, size) in specs.items():
        nodes[name] = fx.placeholder(name)
        nodes[name].meta["val"] = torch.empty(size, dtype=dtype, device="meta")
    call = fx.call_function(op, (nodes["self"], [nodes["index"]], nodes["values"], accumulate))
    fx.output(call)
    graph = GraphLowering(torch.fx.GraphModule({}, fx))

    def buffer(name: str) -> Any:
        dtype, size = specs[name]
        layout = ir.FixedLayout(torch.device("cpu"), dtype, [size], [1])
        return ir.TensorBox.create(ir.InputBuffer(name=name, layout=layout))

    with V.set_graph_handler(graph), V.set_fake_mode(FakeTensorMode()), graph.set_current_node(call):
        out = lowering(buffer("self"), [buffer("index")], buffer("values"), accumulate)
    kernels = [o for o in graph.operations
               if isinstance(o, ir.ExternKernel) and not isinstance(o, ir.MultiOutput)]
    return out, kernels


def _kernel_dtypes(lowering: Callable[..., Any], op: Any) -> list[list[str]]:
    """The input dtypes of each extern kernel that lowering ``op`` with float32 values
    into float16 self creates."""
    import torch
    from torch._inductor import ir

    _, kernels = lowered(lowering, op, torch.float16, torch.float32)
    return [[str(i.get_dtype()) for i in k.inputs if isinstance(i, ir.IRNode)] for k in kernels]


def probe(module: types.ModuleType) -> Probe:
    """Run the live registration on a scoped scratch table holding the current
    ``index_put`` / ``index_put_`` lowerings (``make_fallback`` puts real generic
    fallbacks there; the module's own table and lists untouched), then lower both with
    float32 values into float16 self in a real CPU ``GraphLowering``: does float32 reach
    an extern kernel?"""
    import torch

    aten = torch.ops.aten
    ops = [aten.index_put.default, aten.index_put_.default]
    table = vars(module).get("lowerings", {})
    scratch = {op: table[op] for op in ops if table.get(op) is not None}
    if not scratch:
        return Probe(False, "no index_put lowering in the table: nothing turns into a fallback")
    overrides: dict[str, Any] = {"lowerings": scratch, "make_fallback": _scratch_fallback(scratch),
                                 "FALLBACK_LIST": []}
    if hasattr(module, "EXPLICIT_FALLBACK_LIST"):  # only some states have it
        overrides["EXPLICIT_FALLBACK_LIST"] = []
    with_globals(inspect.getattr_static(module, REGISTER), overrides)()
    seen = {str(op): _kernel_dtypes(lowering, op) for op, lowering in scratch.items()}
    uncast = [op for op, kernels in seen.items() if any("torch.float32" in k for k in kernels)]
    if uncast:
        return Probe(True, f"after the registration, lowering {', '.join(uncast)} passes float32 values "
                           "to an extern kernel for float16 self: CANN rejects that (EZ1001)")
    dtypes = sorted({d for kernels in seen.values() for k in kernels for d in k})
    return Probe(False, f"after the registration, index_put casts float32 values to self's float16 "
                        f"(extern kernel inputs: {', '.join(dtypes)})")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def after_register(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        table = wrapped.__globals__["lowerings"]  # the table this registration fills
        before = {op: table.get(op) for op in index_put_ops()}
        result = wrapped(*args, **kwargs)
        replaced = [op for op, lowering in before.items() if table.get(op) is not lowering]
        repair_entries(table, replaced, patcher if table is vars(module).get("lowerings") else None)
        return result

    patcher.wrap_path(module, REGISTER, after_register)
    # registered before npu_fixes was armed: the fallbacks it made are in the table now
    registered = [op for op in index_put_ops() if op in module.FALLBACK_LIST]
    repair_entries(module.lowerings, registered, patcher)


FIX = Fix(
    name="index-put-dtype",
    about=About(
        symptom=(
            "CANN rejects `index_put` with values of another dtype (`aclnnIndexPutImpl` EZ1001); an "
            "`index_put_` on a graph input can be overwritten by a later kernel"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da"}),
        fixed_in="e1863287d",
        workaround="cast the values to the destination's dtype in the model code",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
