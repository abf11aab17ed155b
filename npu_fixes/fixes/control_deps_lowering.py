"""control-deps-lowering: ``control_deps`` keeps Inductor's own lowering.

- **Defect**: the backend's registration turns every lowering that is neither generated
  nor a decomposition into a generic eager fallback, ``control_deps`` included. That
  higher-order op carries a ``Subgraph`` argument which only its own lowering understands,
  so compilation stops with ``LoweringException: AttributeError: 'Subgraph' object has no
  attribute 'dtype'`` (``target: control_deps``). PyTorch 2.13 inserts ``control_deps``
  whenever ``torch._inductor.config.fallback_random`` is on and a graph holds two or more
  random ops (BERT/DeBERTa training graphs with dropout under an accuracy harness), and
  distributed overlap passes insert it too.
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the ``control_deps`` entry it
  leaves in Inductor's ``lowerings`` table).
- **Probe**: does the registration replace the ``control_deps`` lowering? (run the live
  registration on a scratch table that holds a stand-in ``control_deps`` lowering, fallback
  creation recorded, not run; see whether the stand-in survives).
- **Fix**: after each registration, the ``control_deps`` entry it replaced gets back the
  lowering it had before; where the backend registered before npu_fixes was armed, the
  entry gets Inductor's own ``control_deps`` lowering again. Every other entry is left
  as registered. The registration's own records of the fallback (its ``FALLBACK_LIST``
  entry, and ``control_deps`` in Inductor's ``needs_realized_inputs``, a realization
  hint) stay: neither changes how ``control_deps`` is lowered.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.registration import (
    INDUCTOR_LOWERING,
    REGISTER,
    keep_through_registration,
    registration_probe,
)


def control_deps_op() -> Any:
    """The ``control_deps`` higher-order op, or None where this torch has none."""
    try:
        from torch._inductor.fx_passes.control_dependencies import control_deps
    except ImportError:
        return None
    return control_deps


def probe(module: types.ModuleType) -> Probe:
    op = control_deps_op()
    if op is None:
        return Probe(False, "this torch has no control_deps op: nothing to replace")
    return registration_probe(module, op, "control_deps'", "lowering it fails on its Subgraph argument")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    keep_through_registration(module, patcher, {control_deps_op(): INDUCTOR_LOWERING})


FIX = Fix(
    name="control-deps-lowering",
    about=About(
        symptom=(
            "`LoweringException: AttributeError: 'Subgraph' object has no attribute 'dtype'` (target "
            "`control_deps`: `fallback_random=True` and two or more random ops)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="`torch._inductor.config.fallback_random = False`",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
