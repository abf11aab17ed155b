"""scalar-reduction-grid: an unsplit reduction with no free x node launches one program.

- **Defect**: ``make_launcher`` gives an ``xnumel``-derived grid only to one-node Grid1D
  pointwise kernels; a reduction whose x axis is fully folded (zero x nodes: a loss mean,
  a norm) falls through to ``grid_0 = <vector core count>``. Every core then reduces the
  whole input and stores the one result: 40-48x redundant work, and a wrong result where
  the kernel reads back what it writes (BertForPreTraining's final loss).
- **Where**: ``npu_triton_heuristics.NPUTritonCompileResult.make_launcher`` (the grid choice
  is inline there in the pre-fix code).
- **Probe**: does the launcher for a zero-node Grid1D reduction (``R0_BLOCK``, no rsplit
  partial) launch more than one program? (build a launcher from a recording stand-in binary
  with 48 cores and launch it once).
- **Fix**: while the launcher of a kernel that :func:`launches_one_program` accepts is
  built, ``make_launcher`` runs as a private copy that reads a vector core count of 1, so
  its fall-through branch generates ``grid_0 = 1``: the same launcher code the fixed state
  generates. Nothing runs per launch: the returned launcher is the plain generated
  function. Pointwise kernels, kernels with x nodes, Grid2D/3D, rsplit partials (which need
  one program per core) and the A5 dispatch-recipe path (its grid does not use the core
  count) are left alone. The module's own core count is not touched.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import call_rebound
from ..shim.stand_in_kernel import CORE_COUNT, PROBE_CORES
from .shared.launcher import NODES_KEY, TARGET, launched_grid

PARTIAL_KEY = "npu_rsplit_partial"


def launches_one_program(inductor_meta: Mapping[str, Any], arg_names: list[str]) -> bool:
    """Whether a kernel is an unsplit scalar reduction, which must run as one program.

    Grid1D (the default), zero free x nodes (a missing count reads as zero, as the
    launcher's own default has it), an ``R0_BLOCK`` argument, and not the partial half of
    a cross-core split: that half is marked by ``npu_rsplit_partial`` or, without the
    mark, by a ``ws_ptr`` workspace argument.
    """
    names = set(arg_names)
    partial = inductor_meta.get(PARTIAL_KEY, "ws_ptr" in names)
    return (
        inductor_meta.get(NODES_KEY, 0) == 0
        and inductor_meta.get("grid_type", "Grid1D") == "Grid1D"
        and "R0_BLOCK" in names
        and not partial
    )


def _one_core() -> int:
    """The core count the launcher of a :func:`launches_one_program` kernel is built with."""
    return 1


def kernel_arg_names(result: Any) -> list[str]:
    """The compiled kernel's argument names (none where the binary does not say)."""
    fn = getattr(getattr(result.kernel, "src", None), "fn", None)
    return list(getattr(fn, "arg_names", ()))


def build_launcher(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """wrapt wrapper of ``make_launcher``: build an unsplit scalar reduction's launcher
    with a core count of 1; any other kernel's launcher is built unchanged."""
    if not launches_one_program(instance.inductor_meta, kernel_arg_names(instance)):
        return wrapped(*args, **kwargs)
    return call_rebound("scalar-reduction-grid", wrapped, {CORE_COUNT: _one_core}, args, kwargs)


def probe(module: types.ModuleType) -> Probe:
    """Launch a full reduction to one value (Grid1D, zero x nodes, XBLOCK=1, R0_BLOCK=64)
    and look at the grid it asks for."""
    grids = launched_grid(module, {"grid_type": "Grid1D", NODES_KEY: 0}, 1, 1)
    seen = "unsplit scalar reduction (Grid1D, 0 x nodes, R0_BLOCK)"
    if grids != [1]:
        return Probe(True, f"{seen} launched {grids} programs on {PROBE_CORES} cores")
    return Probe(False, f"{seen} launches 1 program")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, build_launcher)


FIX = Fix(
    name="scalar-reduction-grid",
    about=About(
        symptom=(
            "a reduction with no free x node (loss means, norms) launched on every vector core: wrong if it "
            "reads back what it writes, else 40-48x redundant work"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
