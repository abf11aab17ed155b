"""What one fix is (:class:`Fix`), what its probe found (:class:`Probe`), and what became
of it in this interpreter (:class:`FixRecord`, :class:`State`)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

from .versions import TESTED_WINDOWS

if TYPE_CHECKING:
    from .catalogue import About
    from .patcher import Patcher


class State(str, enum.Enum):
    """What happened to one fix in this interpreter."""

    PENDING = "pending"  # target module not imported yet
    APPLIED = "applied"  # probe found the defect; target wrapped; probed again: gone
    NOT_NEEDED = "not-needed"  # probe: fixed upstream; target untouched
    OUT_OF_WINDOW = "out-of-window"  # version outside the fix's window
    ABSENT = "absent"  # module or attribute missing
    DISABLED = "disabled"  # turned off by the environment
    FAILED = "failed"  # probe or install raised, or the repair did not take; target untouched
    UNDONE = "undone"  # restored by npu_fixes.undo()
    REPLACED = "replaced"  # was applied, but its target has been replaced since: not repaired
    UPGRADE_NEEDED = "upgrade-needed"  # probe found a defect no run-time repair can fix; guard on
    GUARDED = "guarded"  # probe found a defect no run-time repair and no torch_npu fixes; guard on


@dataclasses.dataclass(frozen=True)
class Probe:
    """Outcome of a behavioural probe: is the defect present, and why we think so."""

    defective: bool
    detail: str


class TargetMissing(LookupError):
    """A fix's target attribute does not exist in the loaded module."""


@dataclasses.dataclass(frozen=True)
class Fix:
    """One runtime repair.

    ``probe(module)`` inspects the live target module and reports whether it shows the
    defect. ``install(module, patcher)`` wraps the targets through ``patcher`` so that
    the corrected rule is used. ``signatures`` maps a target to the exact parameter
    names it must have; a mismatch means upstream changed the code and we keep out.
    ``provides`` names attributes the fix adds to the module where they are missing (so,
    unlike targets, they need not exist). A *guard* (``repairable=False``) stands for a
    defect that no run-time repair can fix: where its probe finds the defect, its
    ``install`` (if any) only makes the symptom a clear error, and the state is
    ``upgrade-needed`` with the probe's detail (upstream commit, workaround), or ``guarded``
    where the guard is installed and no torch_npu fixes the defect (:attr:`present_state`). ``about`` is
    the fix's catalogue entry (symptom, states, upstream fix, workaround); ``old_names``,
    names it had before, still taken by ``NPU_FIXES_DISABLE``.
    """

    name: str
    module: str
    targets: tuple[str, ...]
    probe: Callable[[ModuleType], Probe]
    install: Callable[[ModuleType, Patcher], None] | None
    about: About
    torch_window: SpecifierSet = TESTED_WINDOWS["torch"]
    torch_npu_window: SpecifierSet = TESTED_WINDOWS["torch_npu"]
    signatures: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    provides: tuple[str, ...] = ()
    repairable: bool = True
    old_names: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """``repair``; ``guard`` (no repair, the symptom made a clear error); ``report`` (no
        repair, nothing installed: the audit and status say an upgrade is needed)."""
        if self.repairable:
            return "repair"
        return "guard" if self.install is not None else "report"

    @property
    def present_state(self) -> State:
        """The state of this fix where its probe finds the defect."""
        from .catalogue import NOT_FIXED

        if self.repairable:
            return State.APPLIED
        if self.install is not None and self.about.fixed_in == NOT_FIXED:
            return State.GUARDED
        return State.UPGRADE_NEEDED

    @property
    def patched(self) -> tuple[str, ...]:
        """Dotted names (in ``module``) of what the fix replaces or adds."""
        return self.targets + self.provides

    def locate(self, module: ModuleType) -> None:
        """Check every target in ``module``; raise TargetMissing or TypeError (signature)."""
        for dotted in self.targets:
            owner, attr = resolve_owner(module, dotted)
            expected = self.signatures.get(dotted)
            if expected is not None:
                check_signature(dotted, getattr(owner, attr), expected)


def resolve_owner(module: ModuleType, dotted: str) -> tuple[Any, str]:
    """Return ``(owner, attr)`` for ``dotted`` inside ``module``."""
    *path, attr = dotted.split(".")
    owner: Any = module
    for part in path:
        if not hasattr(owner, part):
            raise TargetMissing(f"{module.__name__}.{dotted}: no attribute {part!r}")
        owner = getattr(owner, part)
    try:
        inspect.getattr_static(owner, attr)
    except AttributeError:
        raise TargetMissing(f"{module.__name__}.{dotted}: no attribute {attr!r}") from None
    return owner, attr


def check_signature(dotted: str, func: Any, expected: tuple[str, ...]) -> None:
    """Raise TypeError unless ``func``'s parameters (``self`` aside) are exactly ``expected``."""
    params = tuple(p for p in inspect.signature(func).parameters if p != "self")
    if params != expected:
        raise TypeError(
            f"{dotted} has parameters ({', '.join(params)}); expected "
            f"({', '.join(expected)}): upstream changed it, left untouched"
        )


@dataclasses.dataclass
class FixRecord:
    """The state of one fix in this interpreter (what ``npu_fixes.status()`` returns)."""

    name: str
    state: State
    target: str
    detail: str = ""
    torch_version: str | None = None
    torch_npu_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        return data


def one_line(exc: BaseException) -> str:
    """``Type: message``, cut at the message's first line break."""
    text = f"{type(exc).__name__}: {exc}".splitlines()
    return text[0] if text else type(exc).__name__
