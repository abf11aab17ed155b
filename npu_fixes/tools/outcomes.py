"""The outcomes of a sample of ``npu-fixes sweep`` (:mod:`.sweep`), which its failure classes
(:mod:`.triage`) name."""

OUTCOMES = (
    "pass",
    "no-kernel",
    "wrong",
    "out-of-bounds",
    "compile-error",
    "run-time-error",
    "harness-limit",
    "skipped",
)
#: Outcomes that are silent on a device: a wrong value, read or written where nothing is.
SILENT = frozenset({"wrong", "out-of-bounds"})
#: Outcomes that fail (``no-kernel`` and ``skipped`` judge nothing, ``harness-limit`` names why).
FAILING = frozenset({"wrong", "out-of-bounds", "compile-error", "run-time-error"})
