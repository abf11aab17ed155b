"""int32-address-wrap (guard): kernels over more than 2^31 elements address with int32.

- **Defect**: the backend's activation maps Triton's ``tl.int64`` to ``tl.int32`` in
  Inductor's type table (the NPU vector unit has no native int64), and the kernel class
  takes its index dtype from that table. A kernel whose elements Inductor counts past
  2^31 (``select_index_dtype()`` says int64: e.g. 32 x 2048 x 65536 logits) is then
  emitted with int32 indexes and numels: its addresses wrap negative past 2^31 (a device
  fault, or wrong data), with no error at compile time.
- **Where**: ``codegen.triton.NPUTritonKernel`` (``dtype_to_str``, read for the index
  dtype; ``codegen_kernel``, where the guard sits).
- **Probe**: does the kernel class, under the backend's int64-to-int32 table, name int32 for
  ``torch.int64``?
- **Fix**: none at run time (the widening the published wheel does touches about fifteen
  places of the codegen). Guard: where the probe finds the defect, ``codegen_kernel``
  raises :class:`Int32AddressWrap` for a kernel whose index dtype should be int64 but is
  not, naming the kernel's element count and the upgrade; every other kernel is generated
  unchanged. Values of int64 tensors past 2^31 are the guard int64-past-int32's.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "NPUTritonKernel.codegen_kernel"
UPGRADE = ("upgrade to the torch-npu 2.13.0 wheel, or split the tensor so that no kernel "
           "addresses more than 2^31 elements")


class Int32AddressWrap(RuntimeError):
    """A kernel needs 64-bit addresses on a build that emits 32-bit ones."""


def wide_elements(kernel: Any) -> str | None:
    """The element count of ``kernel`` where Inductor selects int64 indexes for it but the
    kernel's index dtype is not ``tl.int64``; None otherwise."""
    import torch

    if kernel.features.select_index_dtype() != torch.int64 or kernel.index_dtype == "tl.int64":
        return None
    return str(kernel.features.numel * kernel.features.reduction_numel)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        elements = wide_elements(instance)
        if elements is not None:
            raise Int32AddressWrap(
                f"a kernel over {elements} elements needs 64-bit addresses, and this "
                f"torch_npu emits {instance.index_dtype} ones: they would wrap ({UPGRADE})")
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, guard)


@contextmanager
def demoted_int64() -> Iterator[None]:
    """Inductor's Triton type table as the backend's activation leaves it: ``tl.int64``
    mapped to ``tl.int32`` (restored afterwards)."""
    from torch._inductor import utils

    table = utils._triton_type_mapping
    had, saved = "tl.int64" in table, table.get("tl.int64")
    table["tl.int64"] = "tl.int32"
    try:
        yield
    finally:
        if had:
            table["tl.int64"] = saved
        else:
            del table["tl.int64"]


def probe(module: types.ModuleType) -> Probe:
    """The dtype the live kernel class names for ``torch.int64`` (its index dtype for a
    kernel past 2^31 elements) under the backend's int64-to-int32 table."""
    import torch

    with demoted_int64():
        named = module.NPUTritonKernel.dtype_to_str(object.__new__(module.NPUTritonKernel), torch.int64)
    if named != "tl.int64":
        return Probe(True, f"NPUTritonKernel names {named} for torch.int64 under the backend's type table: "
                           f"kernels past 2^31 elements are refused ({UPGRADE})")
    return Probe(False, "NPUTritonKernel names tl.int64 for torch.int64")


FIX = Fix(
    name="int32-address-wrap",
    about=About(
        symptom=(
            "a kernel over more than 2^31 elements is emitted with int32 indexes: its addresses wrap (a "
            "device fault or wrong data)"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="keep every tensor under 2^31 elements (split the batch or the vocabulary)",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    repairable=False,
)
