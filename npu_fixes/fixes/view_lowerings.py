"""view-lowerings: ``diagonal``, ``as_strided`` and their scatters keep Inductor's lowerings.

- **Defect**: the backend's registration turns every lowering that is neither generated nor a
  decomposition into a generic eager fallback, Inductor's view lowerings of ``diagonal`` and
  ``as_strided`` and its lowerings of ``diagonal_scatter`` and ``as_strided_scatter``
  included. A fallback's output is a buffer of its own, not a view: a write into the view
  (``y.diagonal().add_(s)``, ``y.fill_diagonal_(v)``, ``y.as_strided(...).zero_()``, also on a
  graph input) lands in a buffer nobody reads, and the compiled code returns ``y`` without it,
  with no error. The NPU runs the same wrapper code.
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the four entries it leaves in
  Inductor's ``lowerings`` table).
- **Probe**: does the registration replace any of the four lowerings? (the live registration
  on a scratch table, as for control-deps-lowering).
- **Fix**: after each registration, the four entries it replaced get back the lowerings they
  had before; where the backend registered before npu_fixes was armed, Inductor's own are put
  back. Every other entry stays as registered.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.registration import REGISTER, keep_through_registration, registration_probe

#: The aten ops whose Inductor lowerings are kept, by the name of that lowering.
LOWERINGS = ("diagonal", "as_strided", "diagonal_scatter", "as_strided_scatter")


def view_ops() -> dict[Any, str]:
    """Each op's ``default`` overload -> the name of Inductor's lowering of it."""
    import torch

    return {getattr(torch.ops.aten, name).default: name for name in LOWERINGS}


def probe(module: types.ModuleType) -> Probe:
    found = [registration_probe(module, op, f"{name}'s", "a write into the view is dropped")
             for op, name in view_ops().items()]
    defective = [p.detail for p in found if p.defective]
    if defective:
        return Probe(True, "; ".join(defective))
    return Probe(False, "; ".join(p.detail for p in found))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    keep_through_registration(module, patcher, view_ops())


FIX = Fix(
    name="view-lowerings",
    about=About(
        symptom=(
            "a write into a `diagonal` or `as_strided` view is silently dropped (`y.diagonal().add_(s)`, "
            "`fill_diagonal_`, `y.as_strided(...).zero_()`): the compiled code returns `y` without it"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="make such writes outside the compiled region",
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
