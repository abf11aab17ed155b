"""erf-integer-dtype: ``torch.erf`` of an integer or bool tensor comes back as integers.

- **Defect**: the loader's gelu override (``decomposition._override_gelu_decomp``) also
  replaces Inductor's decomposition of ``aten.erf`` by one computed in float32 and cast back
  to the input's dtype. For a floating input that is the input's own dtype; for an integer or
  bool one eager returns float32 (the default dtype), and the cast back truncates every value
  of ``erf``, which lies in (-1, 1), to 0 (``torch.erf(torch.arange(4))`` compiled gives
  ``[0, 0, 0, 0]``, eager ``[0., 0.8427, 0.9953, 1.]``), with no error.
- **Where**: ``decomposition._override_gelu_decomp`` of ``torch_npu/_inductor`` (bafc50684
  and the published wheels; earlier states keep Inductor's ``erf``).
- **Probe**: the live function run with Inductor's decomposition table put back as it was
  after: what dtype does the ``erf`` it installs give for an int64 input?
- **Fix**: after the function runs (and at once where it ran before npu_fixes was armed), the
  ``erf`` entry it installed is wrapped, in Inductor's table and in the copy Inductor keeps:
  an integer or bool input is converted to the default floating dtype first, so the
  decomposition's float32 path gives eager's dtype and values. Floating inputs go straight
  to it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "_override_gelu_decomp"


def _erf_op() -> Any:
    import torch

    return torch.ops.aten.erf.default


def floating_input(erf: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``erf`` taking an integer or bool input as the default floating dtype, as eager does."""
    import torch

    def erf_of(a: Any) -> Any:
        if not (a.is_floating_point() or a.is_complex()):
            a = a.to(torch.get_default_dtype())
        return erf(a)

    erf_of.__wrapped__ = erf  # type: ignore[attr-defined]
    return erf_of


def installed_erf(module: types.ModuleType) -> Any:
    """The ``erf`` decomposition the live function installs; Inductor's table is put back
    as it was."""
    from torch._inductor.decomposition import decompositions

    before = dict(decompositions)
    try:
        getattr(module, TARGET)()
        return decompositions.get(_erf_op())
    finally:
        decompositions.clear()
        decompositions.update(before)


def _wrap_loader_erf(module: types.ModuleType, patcher: Patcher) -> None:
    """The loader's ``erf`` entry wrapped by :func:`floating_input`, in Inductor's table and in
    the copy of it Inductor keeps (``fast_random_decomps``) where that is made already."""
    from torch._inductor import decomposition

    entry = decomposition.decompositions.get(_erf_op())
    if getattr(entry, "__module__", None) != module.__name__:  # not the loader's, or wrapped already
        return
    fixed = floating_input(entry)
    patcher.set_item(decomposition.decompositions, _erf_op(), fixed)
    copies = getattr(decomposition, "fast_random_decomps", None)
    if copies is not None and copies.cache_info().currsize:
        patcher.set_item(copies(), _erf_op(), fixed)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def override(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        _wrap_loader_erf(module, patcher)
        return result

    patcher.wrap_path(module, TARGET, override)
    _wrap_loader_erf(module, patcher)  # the loader ran before npu_fixes was armed


def probe(module: types.ModuleType) -> Probe:
    import torch

    erf = installed_erf(module)
    if erf is None:
        return Probe(False, "the gelu override installs no erf decomposition")
    got = erf(torch.arange(4)).dtype
    want = torch.erf(torch.arange(4)).dtype
    if got != want:
        return Probe(True, f"the erf decomposition the gelu override installs gives {got} for an int64 "
                           f"input, eager {want}: every value truncated to an integer")
    return Probe(False, f"the erf decomposition gives {got} for an int64 input, as eager does")


FIX = Fix(
    name="erf-integer-dtype",
    about=About(
        symptom="`torch.erf` of an integer or bool tensor in compiled code comes back as integers "
                "(`torch.erf(torch.arange(4))` gives zeros), with no error",
        present=frozenset({"bafc50684", "2.13.0", "2.14.0"}),
        fixed_in=NOT_FIXED,
        workaround="convert the input to a floating dtype first (`torch.erf(x.float())`)",
    ),
    module="torch_npu._inductor.decomposition",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
