"""The catalogue entry every fix carries (:class:`About`) and the upstream states it speaks of.

The states are the code our users run: self-builds of the 2.13 branch at the public commits of
:data:`COMMITS` (their ``triton_experimental`` folder in the published 2.13.0 wheel) and the
published wheels of :data:`WHEELS`. Documentation, ``npu-fixes list`` and the tests read the
presence of each defect from here; nothing else states it.
"""

from __future__ import annotations

import dataclasses

#: Public commits of Ascend/pytorch whose backend folder our users build, with their dates.
COMMITS = {
    "8bfbb9ed1": "2026-07-23",
    "95c9094da": "2026-08-10",
    "f8802037a": "2026-08-13",
    "5ff81d9c5": "2026-08-14",
    "bafc50684": "2026-08-20",
}
#: Published torch-npu wheels with the backend (their folders are byte-identical).
WHEELS = ("2.13.0", "2.14.0")
STATES = (*COMMITS, *WHEELS)
EVERY_COMMIT = frozenset(COMMITS)
EVERYWHERE = frozenset(STATES)
#: ``fixed_in`` of a defect that no published state has fixed.
NOT_FIXED = "not fixed"
#: ``fixed_in`` of a defect that only the published wheels fixed (their source commit is not public).
WHEEL = "the 2.13.0 wheel"


@dataclasses.dataclass(frozen=True)
class About:
    """What users see, where the defect is, where upstream fixed it and what to do without us.

    ``present``: the states of :data:`STATES` that have the defect; ``absent``: those that lack
    the code the fix targets (neither defective nor fixed). ``fixed_in``: the commit that fixed
    it, :data:`WHEEL` or :data:`NOT_FIXED`.
    """

    symptom: str
    present: frozenset[str]
    fixed_in: str
    workaround: str
    absent: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = (self.present | self.absent) - EVERYWHERE
        if unknown:
            raise ValueError(f"unknown states {sorted(unknown)}: choose from {', '.join(STATES)}")
        if self.present & self.absent:
            raise ValueError(f"states both present and absent: {sorted(self.present & self.absent)}")
        if not (self.symptom and self.fixed_in and self.workaround):
            raise ValueError("symptom, fixed_in and workaround must all be given")
        in_wheels = bool(self.present & set(WHEELS))
        if in_wheels != (self.fixed_in == NOT_FIXED):
            raise ValueError(f"fixed_in {self.fixed_in!r} but present in the wheels: {in_wheels}")

    def at(self, state: str) -> str:
        """``present``, ``absent`` or ``not present`` at ``state``."""
        if state in self.present:
            return "present"
        return "absent" if state in self.absent else "not present"
