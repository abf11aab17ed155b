"""The classes of failure ``npu-fixes sweep`` has found with npu_fixes applied, each with its
verdict: what a failing sample is, so that a new one stands out as unexplained.

A class matches a sample's record by its outcome and patterns on the error (``detail``)
and on the source of the kernel that failed. Classes that npu_fixes repairs are not here:
their samples pass with npu_fixes (the sweep shows them failing only as built).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any


@dataclasses.dataclass(frozen=True)
class FailureClass:
    name: str
    #: ``defect`` (the backend's: a device fails too) or ``harness`` (this CPU harness only).
    kind: str
    outcome: str
    #: Regex on the record's ``detail``; on the failing kernel's source (``""``: any).
    detail: str
    kernel: str
    verdict: str


CLASSES = (
    FailureClass(
        "int64-expand-overlap",
        "defect",
        "run-time-error",
        r"more than one element of the written-to tensor refers to a single memory location",
        "",
        "open (cause not found yet), loud: returning an expanded int64 tensor (expand, expand_as, "
        "broadcast_to, broadcast_tensors) from a compiled function raises PyTorch's refusal to write "
        "into overlapping memory at run time; float32 passes. Workaround: return .clone() of it",
    ),
    FailureClass(
        "nd-reduction-unmasked-load", "defect", "out-of-bounds", r"OutOfBounds", r"r0_1_blk",
        "open (not repaired yet), silent: a reduction over several axes whose input is a written view "
        "(e.g. slice_scatter into a transposed view, then amax) loads its input with no mask on the split "
        "reduction axes, past the buffer on the last tile; at 95c9094da and later and in both wheels (at "
        "8bfbb9ed1 the same program first stops with 'Unregistered range symbol', which dualview-fold "
        "repairs, and then reads past the buffer as the later states do)"),
    FailureClass(
        "dynamic-r0-index", "defect", "compile-error", r"NameError: name 'r0_index' is not defined", "",
        "at every public commit, loud: a reduction over a view reshaped to sizes passed as arguments "
        "(dynamic=True) stops the compile; the 2.13.0 wheel compiles it. Workaround: compile with "
        "dynamic=False, or upgrade to the published wheel"),
)


def classify(record: dict[str, Any]) -> FailureClass | None:
    """The class of a failing sample's record, or None: unexplained."""
    detail = record.get("detail", "")
    kernels = record.get("kernel_sources", [])
    for cls in CLASSES:
        if (
            record.get("outcome") == cls.outcome
            and re.search(cls.detail, detail)
            and (not cls.kernel or any(re.search(cls.kernel, k) for k in kernels))
        ):
            return cls
    return None
