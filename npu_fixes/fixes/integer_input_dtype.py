"""integer-input-dtype: ``erf`` and dropout's backward of integer or bool tensors come back as
integers where eager gives floats.

- **Defect**: two of the loader's decomposition overrides keep an integer input's dtype.
  ``_override_gelu_decomp`` (bafc50684 and the published wheels) installs an ``erf`` computed
  in float32 and cast back to the input's dtype: for an integer or bool input eager returns
  float32, and the cast truncates every value, which lies in (-1, 1), to 0
  (``torch.erf(torch.arange(4))`` compiled gives ``[0, 0, 0, 0]``). ``_override_native_dropout_decomp``
  (every state) answers ``native_dropout_backward`` with a scale of 1 or 0 by
  ``grad_output.clone()`` or ``zeros_like(grad_output)``, where eager multiplies by the float
  scale and gives float32 for an integer gradient. No error either way.
- **Where**: those two functions of ``torch_npu/_inductor/decomposition.py``.
- **Probe**: each live function run with Inductor's decomposition tables put back as they were
  after: do the entries it installs give eager's dtype for an int64 input?
- **Fix**: after each function runs (and at once where it ran before npu_fixes was armed), the
  entries it installed are wrapped, in Inductor's table and in the copy Inductor keeps: an
  integer or bool first argument is converted to the default floating dtype first, so the
  decomposition computes what eager computes. Floating inputs go straight to it.
- **Left alone**: with a scale of 1 the dropout override returns the gradient without applying
  the mask; dropout with ``p = 0`` makes an all-true mask, so only a mask given by hand meets it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.loader_decompositions import installed, wrap_installed

#: Each override -> the aten op whose decomposition it installs, by name.
OVERRIDES = {"_override_gelu_decomp": "erf", "_override_native_dropout_decomp": "native_dropout_backward"}


def _op(name: str) -> Any:
    import torch

    return getattr(torch.ops.aten, name).default


def integer_samples() -> dict[str, tuple[tuple, Callable[..., Any]]]:
    """Op name -> (int64 arguments, eager) for the probe."""
    import torch

    grad = torch.arange(4)
    return {"erf": ((grad,), torch.erf),
            "native_dropout_backward": ((grad, torch.ones(4, dtype=torch.bool), 0.0),
                                        torch.ops.aten.native_dropout_backward)}


def floating_input(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """``decomposition`` taking an integer or bool first argument as the default floating
    dtype, as eager's type promotion does."""
    import torch

    def floating(a: Any, *args: Any, **kwargs: Any) -> Any:
        if not (a.is_floating_point() or a.is_complex()):
            a = a.to(torch.get_default_dtype())
        return decomposition(a, *args, **kwargs)

    return floating


def install(module: types.ModuleType, patcher: Patcher) -> None:
    for override, name in OVERRIDES.items():
        if hasattr(module, override):
            wrap_installed(module, patcher, override, _op(name), floating_input)


def probe(module: types.ModuleType) -> Probe:
    samples, wrong = integer_samples(), []
    for override, name in OVERRIDES.items():
        decomposition = installed(module, override, _op(name)) if hasattr(module, override) else None
        if decomposition is None:
            continue
        args, eager = samples[name]
        got, want = decomposition(*args).dtype, eager(*args).dtype
        if got != want:
            wrong.append(f"{name} gives {got} for an int64 input, eager {want}")
    if wrong:
        return Probe(True, f"the loader's decompositions keep an integer input's dtype: {'; '.join(wrong)}")
    return Probe(False, "the loader's erf and dropout-backward decompositions give eager's dtype for int64")


FIX = Fix(
    name="integer-input-dtype",
    about=About(
        symptom="`torch.erf` of an integer or bool tensor in compiled code comes back as integers "
                "(`torch.erf(torch.arange(4))` gives zeros), dropout's backward of an integer tensor "
                "keeps its dtype; no error",
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="convert such inputs to a floating dtype first (`torch.erf(x.float())`)",
    ),
    module="torch_npu._inductor.decomposition",
    targets=tuple(OVERRIDES),
    probe=probe,
    install=install,
)
