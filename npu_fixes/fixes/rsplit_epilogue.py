"""rsplit-epilogue: no cross-core split of an OUTER sum whose fused epilogue is not linear.

- **Defect**: with the cross-core r-axis split, the kernel stores each core's partial
  result after the pointwise steps fused behind the reduction, and the combine kernel adds
  the partials. That is right only where those steps are linear in the sum. ``x.sum(0) + b``
  gives ``sum + 40*b``; ``** 2``, ``relu``, casts likewise go wrong; a cast to a narrower
  type even makes the combine read and write past its buffers. No error. The predicate
  checks epilogues only for the INNER hint.
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable``.
- **Probe**: does the predicate accept an OUTER ``sum`` kernel with a fused ``+`` epilogue?
  (hf_Bert sizes, one live output, one flat reduction node, ``buf0 + arg1`` stored).
- **Fix**: for the OUTER hint the split is accepted only if upstream accepts it and every
  other scheduler node of the kernel uses the reduction's result linearly: through ``mul``
  by a value that does not depend on it, ``neg``, ``truediv``/``div`` with it as the
  numerator, and a plain ``store``. Anything else (``add``, casts, ``relu``, masked
  sub-blocks that read it), or a body that cannot be read, rejects; the kernel then
  compiles unsplit. Linear epilogues (``mean``, scaling) keep the split.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import TARGET, narrow_predicate, outer_sum_kernel, pointwise_node, predicate_accepts


def _linear_graph(graph: Any, reduced: set[str]) -> bool:
    """Whether the loop-body FX ``graph`` uses the loads of ``reduced`` buffers only
    linearly (see the module's docstring)."""
    from torch.fx import Node

    tainted: set[Any] = set()
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        args = node.args
        hot = [a for a in args if isinstance(a, Node) and a in tainted]
        if node.op == "call_method" and node.target == "load":
            if args[1] in reduced:
                tainted.add(node)
            continue
        if not hot:
            continue
        if node.op != "call_method":
            return False
        if node.target == "store":
            if len(args) > 4 and args[4] is not None:  # an accumulating store mode
                return False
            continue
        if node.target == "neg" or (node.target == "mul" and len(hot) == 1):
            tainted.add(node)
        elif node.target in ("truediv", "div") and hot == [args[1]]:
            tainted.add(node)
        else:
            return False
    return True


def linear_epilogue(kernel: Any) -> bool:
    """Whether every scheduler node of the kernel besides its reductions uses the
    reductions' results linearly; False when a node cannot be read."""
    try:
        features = kernel.features
        reductions = list(features.reduction_nodes())
        others = [n for n in features.scheduler_nodes() if all(n is not r for r in reductions)]
        if not others:
            return True
        reduced = set().union(*(set(r.get_buffer_names()) for r in reductions))
        for node in others:
            body = node._body
            for block in (body.subblocks or {}).values():  # a masked sub-block reading the result
                loads = [n.args[1] for n in block.graph.nodes if n.op == "call_method" and n.target == "load"]
                if reduced.intersection(loads):
                    return False
            if not _linear_graph(body.root_block.graph, reduced):
                return False
        return True
    except Exception:  # noqa: BLE001 - in doubt, no split
        return False


def kernel_allows_split(module: types.ModuleType, kernel: Any) -> bool:
    """Our condition with upstream's verdict taken as yes: not an OUTER kernel, or one whose
    epilogue is linear; any error rejects."""
    try:
        outer = kernel.features.get_reduction_hint() == module.ReductionHint.OUTER
    except Exception:  # noqa: BLE001
        return False
    return not outer or linear_epilogue(kernel)


def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about an OUTER sum kernel (one live output, one flat node)
    whose epilogue stores ``buf0 + arg1``, after checking it accepts the kernel without it."""
    output = {"buf1": "out_ptr0"}
    if not predicate_accepts(module, outer_sum_kernel(module, output)):
        raise RuntimeError(f"{TARGET} rejects the control kernel without epilogue: probe not valid")
    plus_b = pointwise_node("buf0", "add")
    if predicate_accepts(module, outer_sum_kernel(module, output, pointwise=(plus_b,))):
        return Probe(True, f"{TARGET} splits an OUTER sum with a fused '+ b' epilogue")
    return Probe(False, f"{TARGET} rejects an OUTER sum with a fused '+ b' epilogue")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, lambda kernel: kernel_allows_split(module, kernel))


FIX = Fix(
    name="rsplit-epilogue",
    about=About(
        symptom=(
            "silently wrong results: an OUTER sum followed in its kernel by a non-linear step (`x.sum(0) + b`"
            " gives `sum + 40*b`; `** 2`, `relu`; a cast to float16 stores past its buffer)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
