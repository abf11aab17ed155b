"""nonlinearize-grid (guard): with ``codegen_linearize=False`` reductions compute only
their first rows; the guard refuses the setting.

- **Defect**: with the non-default ``torch_npu._inductor.triton_experimental.config
  .codegen_linearize=False`` a kernel computes one tile of ``XBLOCK`` rows per program
  (``xoffset = pid * XBLOCK``), but the launcher still gives a Grid1D reduction the grid of
  the linearized code: one program (or one per vector core). Only the first tiles are
  computed, the other rows of the output stay uninitialised, with no error.
- **Where**: ``npu_triton_heuristics.NPUTritonCompileResult.make_launcher`` (the grid
  choice) and the codegen, which does not tell the launcher which kind of kernel it made.
- **Probe**: does the launcher, for a Grid1D reduction marked non-linearized
  (``npu_linearize=False``, xnumel 64, ``XBLOCK=8``), launch other than 8 programs?
- **Fix**: none at run time: the codegen of these states does not mark the kernel, so the
  launcher cannot tell the two kinds apart. Guard: where the probe finds the defect,
  ``make_launcher`` raises :class:`NonlinearizedGridUnsupported` while the setting the
  backend's codegen runs with is off, naming the setting and the upgrade; with the setting
  on (the default) every launcher is built unchanged.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.launcher import NODES_KEY, TARGET, launched_grid

SETTING = "torch_npu._inductor.triton_experimental.config.codegen_linearize"
#: What the codegen module copies the setting into when it is imported.
CODEGEN_COPY = "triton_codegen_linearize"
UPGRADE = "set it to True (the default) or upgrade to the torch-npu 2.13.0 wheel"
#: The probe's kernel: 64 rows in tiles of 8.
XNUMEL, XBLOCK = 64, 8


class NonlinearizedGridUnsupported(RuntimeError):
    """A kernel was generated with ``codegen_linearize=False`` on a build whose launcher
    would run too few programs for it."""


def linearize_in_force(module: types.ModuleType) -> bool:
    """The setting the backend's codegen runs with: its own copy where the codegen module is
    loaded, else the config's."""
    package = module.__name__.rpartition(".")[0]
    codegen = sys.modules.get(f"{package}.codegen.triton")
    if codegen is not None and hasattr(codegen, CODEGEN_COPY):
        return bool(getattr(codegen, CODEGEN_COPY))
    return bool(getattr(module.ncfg, "codegen_linearize", True))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if not linearize_in_force(module):
            raise NonlinearizedGridUnsupported(
                f"{SETTING}=False: this torch_npu launches too few programs for a reduction "
                f"so made (rows past the first tiles left uninitialised); {UPGRADE}")
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, guard)


def probe(module: types.ModuleType) -> Probe:
    """Launch a Grid1D reduction marked non-linearized (64 rows, ``XBLOCK=8``): does the
    live launcher run one program per tile?"""
    meta = {"grid_type": "Grid1D", NODES_KEY: 0, "npu_linearize": False}
    grids = launched_grid(module, meta, XBLOCK, XNUMEL)
    seen = f"non-linearized Grid1D reduction of {XNUMEL} rows, XBLOCK={XBLOCK}"
    if grids != [XNUMEL // XBLOCK]:
        return Probe(True, f"{seen} launched {grids} programs, not {XNUMEL // XBLOCK}: "
                           f"{SETTING}=False is refused ({UPGRADE})")
    return Probe(False, f"{seen} launches {grids} programs")


FIX = Fix(
    name="nonlinearize-grid",
    about=About(
        symptom=(
            "with `codegen_linearize=False` a Grid1D reduction computes only its first `XBLOCK` rows; the "
            "rest stays uninitialised, no error"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="keep `torch_npu._inductor.triton_experimental.config.codegen_linearize` on (the default)",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
    repairable=False,
)
