"""rng-capture-gate: graphs with a Bernoulli fallback are never NPU-graph captured.

- **Defect**: training dropout reaches the ``aten.bernoulli`` eager fallback, which takes
  its seed/offset on the host; capturing it fails with "Cannot call
  NPUGeneratorImpl::philox_engine_inputs during NPU graph capture" (DeBERTa, DeBERTa-v2
  MaskedLM/QA).
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the Bernoulli entries it
  leaves in Inductor's ``lowerings`` table).
- **Probe**: does the registered Bernoulli lowering fail to set
  ``V.graph.disable_cudagraphs_reason``? (register into a scratch table, lower
  ``bernoulli_.float`` in a stand-in graph, look at the reason).
- **Fix**: after registration, each of the five Bernoulli overloads' lowering first sets
  ``disable_cudagraphs_reason`` (only if none is set) and then runs unchanged: the whole
  graph skips capture, Inductor/Triton compilation goes on, and the eager RNG sequence is
  kept (partitioning only the RNG op out would run it extra times during warm-up/record).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, MutableMapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

REGISTER = "_register_npu_inductor_fallbacks"
OVERLOADS = (
    ("bernoulli", "default"),
    ("bernoulli", "out"),
    ("bernoulli", "p"),
    ("bernoulli_", "Tensor"),
    ("bernoulli_", "float"),
)
_GATED = "_npu_fixes_rng_gate"


def bernoulli_ops() -> list[Any]:
    """The five Bernoulli OpOverloads whose fallback cannot be captured."""
    import torch

    return [getattr(getattr(torch.ops.aten, packet), overload) for packet, overload in OVERLOADS]


def capture_reason(op: Any) -> str:
    return (
        f"{op} runs as an eager fallback that takes its RNG seed/offset on the host, "
        "which NPU graph capture cannot record (npu_fixes rng-capture-gate)"
    )


def gated(op: Any, lowering: Callable[..., Any]) -> Callable[..., Any]:
    """``lowering`` that first marks the graph being lowered as not capturable."""
    if getattr(lowering, _GATED, None) is True:
        return lowering
    reason = capture_reason(op)

    def gated_lowering(*args: Any, **kwargs: Any) -> Any:
        from torch._inductor.virtualized import V

        if V.graph.disable_cudagraphs_reason is None:
            V.graph.disable_cudagraphs_reason = reason
        return lowering(*args, **kwargs)

    setattr(gated_lowering, _GATED, True)
    gated_lowering.__wrapped__ = lowering  # type: ignore[attr-defined]
    return gated_lowering


def gate_table(
    table: MutableMapping[Any, Callable[..., Any]], patcher: Patcher | None = None
) -> list[Any]:
    """Gate the Bernoulli entries present in a lowering table; return the ops gated.

    With a ``patcher`` the replaced entries are restored by ``npu_fixes.undo()``.
    """
    done = []
    for op in bernoulli_ops():
        lowering = table.get(op)
        if lowering is None or getattr(lowering, _GATED, None) is True:
            continue
        if patcher is None:
            table[op] = gated(op, lowering)
        else:
            patcher.set_item(table, op, gated(op, lowering))
        done.append(op)
    return done


class _StandInGraph:
    disable_cudagraphs_reason: str | None = None


def probe(module: types.ModuleType) -> Probe:
    """Run the live registration on a scoped scratch table (fallback creation recorded, not
    run; the module's own table and lists untouched), then lower ``bernoulli_.float`` in a
    stand-in graph and see if a reason gets set."""
    from torch._inductor.virtualized import V

    op = bernoulli_ops()[-1]

    def sentinel(*args: Any, **kwargs: Any) -> str:
        return "lowered"

    scratch = {op: sentinel}
    overrides: dict[str, Any] = {"lowerings": scratch, "make_fallback": lambda *a, **k: None,
                                 "FALLBACK_LIST": []}
    if hasattr(module, "EXPLICIT_FALLBACK_LIST"):  # only some states have it
        overrides["EXPLICIT_FALLBACK_LIST"] = []
    with_globals(inspect.getattr_static(module, REGISTER), overrides)()
    graph = _StandInGraph()
    with V.set_graph_handler(graph):  # type: ignore[arg-type]
        result = scratch[op]()
    if result != "lowered":
        raise RuntimeError(f"registered {op} lowering changed the lowering's result")
    if graph.disable_cudagraphs_reason is None:
        return Probe(True, f"lowering {op} leaves disable_cudagraphs_reason unset: capture fails")
    return Probe(False, f"lowering {op} disables graph capture: {graph.disable_cudagraphs_reason}")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def after_register(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        table = wrapped.__globals__["lowerings"]  # the table this registration filled
        gate_table(table, patcher if table is vars(module).get("lowerings") else None)
        return result

    patcher.wrap_path(module, REGISTER, after_register)
    if module.FALLBACK_LIST:  # the backend is already active: gate what it registered
        gate_table(module.lowerings, patcher)


FIX = Fix(
    name="rng-capture-gate",
    about=About(
        symptom=(
            "`Cannot call NPUGeneratorImpl::philox_engine_inputs during NPU graph capture` for dropout under "
            "NPU graphs (DeBERTa, DeBERTa-v2)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="compile without NPU graphs (not `mode='reduce-overhead'`)",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
