"""The classes of failure ``npu-fixes sweep`` has found with npu_fixes applied, each with its
verdict: what a failing sample is, so that a new one stands out as unexplained.

A class matches a sample's record by its outcome and patterns on the error (``detail``, where
the sweep also writes what it checked of the sample: :data:`EQUAL_WITH_PRECISION_CASTS`) and
on the source of the kernel that failed. Classes that npu_fixes repairs are not here: their
samples pass with npu_fixes (the sweep shows them failing only as built).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .outcomes import FAILING

KINDS = ("defect", "pytorch", "harness", "guarded")
#: What the sweep adds to the detail of a wrong bfloat16 sample that equals eager once
#: Inductor rounds each bfloat16 step as eager does.
EQUAL_WITH_PRECISION_CASTS = "equals eager with torch._inductor.config.emulate_precision_casts = True"


@dataclasses.dataclass(frozen=True)
class FailureClass:
    name: str
    #: ``defect`` (the backend's: a device fails too), ``pytorch`` (PyTorch's own Inductor
    #: computes the same without torch_npu), ``harness`` (this CPU harness only) or ``guarded``
    #: (npu_fixes' own clear error, in place of a silent wrong result).
    kind: str
    outcome: str
    #: Regex on the record's ``detail``; on the failing kernel's source (``""``: any).
    detail: str
    kernel: str
    verdict: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.outcome not in FAILING or not self.verdict:
            raise ValueError(f"failure class {self.name}: kind must be one of {', '.join(KINDS)}, "
                             f"outcome one of {', '.join(sorted(FAILING))}, and the verdict said")


CLASSES: tuple[FailureClass, ...] = (
    FailureClass(
        "inductor-bfloat16-upcast",
        "pytorch",
        "wrong",
        re.escape(EQUAL_WITH_PRECISION_CASTS) + "$",
        "",
        "PyTorch Inductor's own numerics, not the backend's: by default Inductor computes bfloat16 "
        "intermediates in float32 where eager rounds each step, and the sweep found the sample equal to "
        "eager with emulate_precision_casts = True (the workaround). Seen: linalg.matrix_norm (ord=inf) "
        "backward NaN, the max's gradient comparing a float32 sum recomputed in the backward with the "
        "saved bfloat16 maximum, finding no equal element and dividing by zero; stock Inductor on the "
        "CPU, without torch_npu, gives the same NaN. Not repaired by npu_fixes",
    ),
    FailureClass(
        "index-put-onto-itself",
        "pytorch",
        "run-time-error",
        "some elements of the input tensor and the written-to tensor refer to a single memory location",
        "",
        "PyTorch Inductor's own, loud (an error, no wrong value): two equal constants merged into one "
        "buffer (index_reduce mean's count, ones.index_put_(index, ones, accumulate=True), where self and "
        "source have one shape) reach a fallback index_put_ as both the target and the values, which "
        "eager refuses; stock Inductor on the CPU meets the same error where it falls back too (under "
        "torch.use_deterministic_algorithms(True)), and the backend's bulk fallback registration makes "
        "every index_put_ a fallback. Whether the NPU's index_put_ refuses it too was not run. Not "
        "repaired by npu_fixes",
    ),
)


def own_errors() -> tuple[str, ...]:
    """The names of the errors npu_fixes raises in compiled code in place of a wrong result:
    the exception classes its fix modules define (a guard's, or a repair's refusal)."""
    import importlib
    import inspect

    from ..fixes import MODULES

    names = set()
    for name in MODULES:
        module = importlib.import_module(f"npu_fixes.fixes.{name}")
        names |= {obj.__name__ for obj in vars(module).values() if inspect.isclass(obj)
                  and issubclass(obj, Exception) and obj.__module__ == module.__name__
                  and not obj.__name__.startswith("_")}  # a probe's own signal
    return tuple(sorted(names))


GUARDED_VERDICT = (
    "guarded: npu_fixes stopped the {stage} with its own clear error (it names the kernel or setting and "
    "the workaround) where the backend as built would compute a wrong value or fault; the sample's values "
    "are beyond what this torch_npu computes right"
)
#: npu_fixes' own errors, stopping a compile or a launch.
CLASSES += tuple(
    FailureClass(f"npu-fixes-guard-{stage}", "guarded", outcome, rf"^({'|'.join(own_errors())}): ", "",
                 GUARDED_VERDICT.format(stage=stage))
    for stage, outcome in (("compile", "compile-error"), ("launch", "run-time-error"))
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
