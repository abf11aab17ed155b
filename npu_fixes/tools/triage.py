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

    def __post_init__(self) -> None:
        from .sweep import FAILING

        if self.kind not in ("defect", "harness") or self.outcome not in FAILING or not self.verdict:
            raise ValueError(f"failure class {self.name}: kind must be defect or harness, outcome one of "
                             f"{', '.join(sorted(FAILING))}, and the verdict said")


#: None open: every class the sweep has found so far is repaired (its samples pass with npu_fixes).
CLASSES: tuple[FailureClass, ...] = ()


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
