"""launch-grid: a scalar Grid1D kernel launches one program, not one per vector core.

- **Defect**: ``make_launcher`` derives a Grid1D grid from ``xnumel`` only for kernels
  with exactly one free x node; the zero-node scalar kernel (``xnumel=1``) falls through
  to ``grid_0 = <vector core count>``, so 48 programs race on ``in_out_ptr0[0]`` and the
  returned loss is off by 3-6 (DeBERTa-v2, ALBERT, MobileBERT, RoBERTa QA).
- **Where**: ``npu_triton_heuristics.NPUTritonCompileResult.make_launcher`` (the rule is
  inline there in the pre-fix code).
- **Probe**: does the launcher for a zero-node Grid1D kernel with ``xnumel=1`` launch more
  than one program? (build a launcher from a recording stand-in binary with 48 cores and
  launch it once).
- **Fix**: while the launcher is built, a kernel that :func:`clamps_grid` accepts but whose
  metadata says zero x nodes is presented to ``make_launcher`` as a one-node kernel, so
  the existing one-node branch generates the xnumel-derived grid; the caller's
  ``inductor_meta`` object is put back afterwards. Nothing runs per launch: the returned
  launcher is the plain generated function. Grid2D/3D, reductions, missing or larger node
  counts and the A5 dispatch-recipe path (decided before this branch) are left alone.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.stand_in_kernel import (
    PROBE_CORES,
    StandInBinary,
    launched_grids,
    stand_in_binary,
    stand_in_result,
)

TARGET = "NPUTritonCompileResult.make_launcher"
NODES_KEY = "npu_num_x_nodes"


def clamps_grid(npu_num_x_nodes: object, grid_type: str, has_xnumel: bool, is_reduction: bool) -> bool:
    """Whether a kernel's grid comes from ``xnumel`` (see :func:`clamped_programs`).

    Only non-reduction Grid1D kernels with an ``xnumel`` argument and zero or one free x
    node qualify; a missing node count (custom or legacy kernels) does not.
    """
    return (
        npu_num_x_nodes in (0, 1)
        and grid_type == "Grid1D"
        and has_xnumel
        and not is_reduction
    )


def clamped_programs(xnumel: int, xblock: int, cores: int) -> int:
    """Programs launched by a kernel that :func:`clamps_grid` accepts: one per XBLOCK
    tile, at most one per core, and at least one (CANN rejects an empty grid)."""
    return max(1, min(-(-xnumel // xblock), cores))


def presents_one_node(inductor_meta: Mapping[str, Any], arg_names: list[str]) -> bool:
    """Whether the launcher must be built as if the kernel had one x node: the rule
    accepts it, and its metadata says zero (which the pre-fix branch refuses)."""
    nodes = inductor_meta.get(NODES_KEY)
    has_xnumel = "xnumel" in arg_names or "xnumel" in inductor_meta.get("extra_launcher_args", ())
    return nodes == 0 and clamps_grid(
        nodes, inductor_meta.get("grid_type", "Grid1D"), has_xnumel, "R0_BLOCK" in arg_names
    )


def build_launcher(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """wrapt wrapper of ``make_launcher``: build an eligible zero-node kernel's launcher
    with ``npu_num_x_nodes`` shown as 1, then restore the caller's metadata object."""
    meta = instance.inductor_meta
    arg_names = list(getattr(getattr(getattr(instance.kernel, "src", None), "fn", None), "arg_names", ()))
    if not presents_one_node(meta, arg_names):
        return wrapped(*args, **kwargs)
    instance.inductor_meta = {**meta, NODES_KEY: 1}
    try:
        return wrapped(*args, **kwargs)
    finally:
        instance.inductor_meta = meta


def scalar_kernel() -> StandInBinary:
    """A stand-in compiled binary for ``kernel(in_out_ptr0, xnumel, XBLOCK: constexpr)``."""
    return stand_in_binary(["in_out_ptr0", "xnumel", "XBLOCK"], [2])


def probe(module: types.ModuleType) -> Probe:
    """Build the final-loss kernel's launcher (Grid1D, zero x nodes, XBLOCK=1) as the live
    ``make_launcher`` does, with a scoped core count of 48, launch it with ``xnumel=1`` and
    look at the grid it asks for."""
    meta = {"grid_type": "Grid1D", NODES_KEY: 0, "mutated_arg_names": ["in_out_ptr0"]}
    grids = launched_grids(stand_in_result(module, scalar_kernel(), {"XBLOCK": 1}, meta), {"xnumel": 1})
    if grids != [clamped_programs(1, 1, PROBE_CORES)]:
        return Probe(True, f"scalar Grid1D kernel (0 x nodes, xnumel=1) launched {grids} programs")
    return Probe(False, "scalar Grid1D kernel (0 x nodes, xnumel=1) launches 1 program")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, build_launcher)


FIX = Fix(
    name="launch-grid",
    about=About(
        symptom=(
            "the returned loss off by 3-6, a data race: a scalar kernel launched on every vector core "
            "(DeBERTa-v2, ALBERT, MobileBERT, RoBERTa QA)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
