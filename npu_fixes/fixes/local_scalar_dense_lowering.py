"""local-scalar-dense-lowering: ``aten._local_scalar_dense`` keeps Inductor's own lowering.

- **Defect**: the backend's registration turns every lowering that is neither generated
  nor a decomposition into a generic eager fallback, ``_local_scalar_dense`` (what
  ``.item()`` traces to) included. A fallback kernel cannot return a symbolic scalar, so
  with ``torch._dynamo.config.capture_scalar_outputs=True`` a graph that uses a float
  ``.item()`` stops: ``LoweringException: AssertionError: FallbackKernel output type
  <class 'torch.SymFloat'> is not supported`` (e.g. ``torch.clamp(y, max=x.max().item())``).
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the ``_local_scalar_dense``
  entry it leaves in Inductor's ``lowerings`` table).
- **Probe**: does the registration replace that lowering? (the live registration on a
  scratch table, as for control-deps-lowering).
- **Fix**: after each registration, the ``_local_scalar_dense`` entry it replaced gets back
  the lowering it had before; where the backend registered before npu_fixes was armed,
  Inductor's own lowering is put back. Every other entry stays as registered.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.registration import REGISTER, keep_through_registration, registration_probe


def scalar_op() -> Any:
    import torch

    return torch.ops.aten._local_scalar_dense.default


def probe(module: types.ModuleType) -> Probe:
    return registration_probe(module, scalar_op(), "_local_scalar_dense's",
                              "a float .item() captured in a graph stops its lowering")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    keep_through_registration(module, patcher, {scalar_op(): "_local_scalar_dense"})


FIX = Fix(
    name="local-scalar-dense-lowering",
    about=About(
        symptom=(
            "`LoweringException: AssertionError: FallbackKernel output type <class 'torch.SymFloat'> is not "
            "supported` (captured scalar outputs: a float `.item()` used in the graph)"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround=(
            "`torch._dynamo.config.capture_scalar_outputs = False` (the default: the graph breaks at "
            "`.item()`)"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
