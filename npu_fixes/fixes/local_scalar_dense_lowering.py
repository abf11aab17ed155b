"""local-scalar-dense-lowering: ``aten._local_scalar_dense`` keeps Inductor's own lowering.

- **Defect**: the backend's registration turns every lowering that is neither generated
  nor a decomposition into a generic eager fallback, ``_local_scalar_dense`` (what
  ``.item()`` traces to) included. A fallback kernel cannot return a symbolic scalar, so
  with ``torch._dynamo.config.capture_scalar_outputs=True`` a graph that uses a float
  ``.item()`` stops: ``LoweringException: AssertionError: FallbackKernel output type
  <class 'torch.SymFloat'> is not supported`` (e.g. ``torch.clamp(y, max=x.max().item())``).
- **Where**: ``lowering._register_npu_inductor_fallbacks`` (the ``_local_scalar_dense``
  entry it leaves in Inductor's ``lowerings`` table).
- **Affected**: torch_npu >=2.13.0.dev0,<2.15 whose registration replaces that lowering
  (probe: the live registration on a scratch table, as for control-deps-lowering); every
  public commit of the 2.13 branch up to bafc50684.
- **Fix**: after each registration, the ``_local_scalar_dense`` entry it replaced gets back
  the lowering it had before; where the backend registered before npu_fixes was armed,
  Inductor's own lowering is put back. Every other entry stays as registered.
- **Upstream**: fixed in the published torch-npu 2.13.0 wheel (no public commit); remove
  once unsupported.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .control_deps_lowering import REGISTER, keep_through_registration, registration_probe


def scalar_op() -> Any:
    import torch

    return torch.ops.aten._local_scalar_dense.default


def probe(module: types.ModuleType) -> Probe:
    return registration_probe(module, scalar_op(), "_local_scalar_dense's",
                              "a float .item() captured in a graph stops its lowering")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    keep_through_registration(module, patcher, scalar_op(), "_local_scalar_dense")


FIX = Fix(
    name="local-scalar-dense-lowering",
    module="torch_npu._inductor.triton_experimental.lowering",
    targets=(REGISTER,),
    probe=probe,
    install=install,
    signatures={REGISTER: ()},
)
