"""rsplit-outer: the cross-core r-axis split only fires on kernels with one live output.

- **Defect**: ``_npu_rsplit_outer_applicable`` looks only at the reduction type, the
  output x size and the reduction size, so a kernel with several live outputs gets the
  partial+combine rewrite: the first output's store lands in a small partial workspace
  (hf_Bert backward: wrong gradients at step 1, NaN loss from step 4).
- **Where**: ``codegen.triton._npu_rsplit_outer_applicable``.
- **Probe**: does the predicate accept an OUTER ``sum`` kernel with two live outputs?
  (hf_Bert sizes, a 2048x768 pointwise store next to a 1x768 reduction store, reduction
  numel 2048, one flat reduction node).
- **Fix**: the split is accepted only if upstream accepts it and the kernel has exactly
  one live output (removed arguments excluded, an in-place buffer counted once), for the
  INNER hint too, as the fixed wheel's own check does. Any doubt rejects the split (the
  kernel then compiles without it). The nested reduction loops that ignore the core's
  ``r0_lo..r0_hi``, named in the same report, are a defect of their own:
  rsplit-nested-range.
"""

from __future__ import annotations

import types
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import TARGET, narrow_predicate, outer_sum_kernel, pointwise_node, predicate_accepts

_REMOVED_PREFIX = "REMOVED"


def split_allowed(upstream: bool, live_outputs: int | None) -> bool:
    """The corrected decision; a ``None`` count means "could not tell" and rejects."""
    return upstream and live_outputs == 1


def _is_removed(arg: Any) -> bool:
    from torch._inductor.codegen.common import RemovedArg

    name = getattr(arg, "inner_name", arg)
    return isinstance(arg, RemovedArg) or (isinstance(name, str) and name.startswith(_REMOVED_PREFIX))


def live_outputs(args: Any) -> int | None:
    """Live output bindings of kernel ``args``: output buffers plus distinct in-place
    buffers, removed entries skipped; None when an entry cannot be understood."""
    count = 0
    for arg in args.output_buffers.values():
        if not _is_removed(arg):
            count += 1
    seen: set[str] = set()
    for arg in args.inplace_buffers.values():
        if _is_removed(arg):
            continue
        inner = getattr(arg, "inner_name", None)
        if not isinstance(inner, str) or not getattr(arg, "other_names", None):
            return None
        if inner not in seen:
            seen.add(inner)
            count += 1
    return count


def kernel_allows_split(kernel: Any) -> bool:
    """Our condition (:func:`split_allowed` with upstream's verdict taken as yes) on a live
    kernel; any error rejects the split."""
    try:
        return split_allowed(True, live_outputs(kernel.args))
    except Exception:  # noqa: BLE001 - in doubt, no split
        return False


# -- probe -------------------------------------------------------------------------------
def probe(module: types.ModuleType) -> Probe:
    """Ask the live predicate about an hf_Bert-sized kernel with one and two live outputs
    (2048x768 pointwise store next to the 1x768 reduction store)."""
    store = (pointwise_node("arg0"),)  # the 2048x768 store, fused beside the reduction
    one = outer_sum_kernel(module, {"buf1": "out_ptr0"}, pointwise=store)
    two = outer_sum_kernel(module, {"buf0": "out_ptr0", "buf1": "out_ptr1"}, pointwise=store)
    if not predicate_accepts(module, one):
        raise RuntimeError(f"{TARGET} rejects the one-output control kernel: probe not valid")
    if predicate_accepts(module, two):
        return Probe(True, f"{TARGET} accepts an OUTER sum kernel with two live outputs")
    return Probe(False, f"{TARGET} rejects an OUTER sum kernel with two live outputs")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    narrow_predicate(module, patcher, kernel_allows_split)


FIX = Fix(
    name="rsplit-outer",
    about=About(
        symptom=(
            "wrong gradients at step 1 and a NaN loss from step 4 (hf_Bert): an OUTER cross-core split "
            "accepted for a kernel with a second live output"
        ),
        present=frozenset({"8bfbb9ed1"}),
        fixed_in="95c9094da",
        workaround="`torch_npu._inductor.triton_experimental.config.rsplit_outer = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel",)},
)
