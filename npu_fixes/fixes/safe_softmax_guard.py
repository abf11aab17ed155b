"""safe-softmax-guard: attention over a row whose every key is masked gives NaN, not zeros.

- **Defect**: the wheels' loader replaces the decomposition of ``aten._safe_softmax`` (what
  scaled dot-product attention with a mask uses) by plain ``_softmax``, dropping the guard
  that makes a row of nothing but ``-inf`` come out as zeros, on the ground that masks never
  mask a whole row. They do where a query position may attend to nothing (a padded query
  under a key padding mask, a custom mask): such a row becomes ``0/0 = NaN`` and spreads into
  the loss and the gradients, with no error.
- **Where**: ``decomposition._override_safe_softmax_decomp`` (the published wheels; the
  public commits keep Inductor's ``_safe_softmax``).
- **Probe**: the decomposition the live function installs, run with Inductor's tables put
  back after, on a row of ``-inf``: zeros, as eager gives, or NaN?
- **Fix**: after the function runs (and at once where it ran before npu_fixes was armed), its
  entry is wrapped, in Inductor's table and in the copy Inductor keeps: rows that are ``-inf``
  throughout come out as zeros; every other row is the entry's own softmax.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.loader_decompositions import installed, wrap_installed

TARGET = "_override_safe_softmax_decomp"


def _op() -> Any:
    import torch

    return torch.ops.aten._safe_softmax.default


def guarded(softmax: Callable[..., Any]) -> Callable[..., Any]:
    """``softmax`` (``x, dim, dtype=None``) with rows of nothing but ``-inf`` set to zeros, as
    ``aten._safe_softmax`` gives them."""
    import torch

    def safe_softmax(x: Any, dim: int, dtype: Any = None) -> Any:
        out = softmax(x, dim, dtype)
        masked = (x == float("-inf")).all(dim=dim, keepdim=True)
        return torch.where(masked, torch.zeros_like(out), out)

    return safe_softmax


def install(module: types.ModuleType, patcher: Patcher) -> None:
    wrap_installed(module, patcher, TARGET, _op(), guarded)


def probe(module: types.ModuleType) -> Probe:
    import torch

    softmax = installed(module, TARGET, _op()) if hasattr(module, TARGET) else None
    if softmax is None:
        return Probe(False, "the loader keeps Inductor's _safe_softmax")
    rows = torch.tensor([[float("-inf")] * 4, [0.0, 1.0, float("-inf"), 2.0]])
    got = softmax(rows, -1)
    if torch.isnan(got[0]).any():
        return Probe(True, f"the loader's _safe_softmax gives {got[0].tolist()} for a row of -inf, eager "
                           "zeros: attention over a fully masked row is NaN")
    return Probe(False, "the loader's _safe_softmax gives zeros for a row of -inf, as eager does")


FIX = Fix(
    name="safe-softmax-guard",
    about=About(
        symptom="attention with a mask that masks every key of a row (a padded query) gives NaN, which "
                "spreads into the loss and gradients; eager gives zeros",
        present=frozenset({"2.13.0", "2.14.0"}),
        fixed_in=NOT_FIXED,
        workaround="keep at least one key unmasked in every row of an attention mask",
        absent=EVERY_COMMIT,
    ),
    module="torch_npu._inductor.decomposition",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
