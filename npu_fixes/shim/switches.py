"""One parser for every ``NPU_FIXES*`` environment switch (standard library only).

Boolean switches take ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``
(any case, surrounding blanks ignored); unset or empty means the switch's default. Any
other value gives one warning on logger ``npu_fixes`` naming the switch and the words it
takes, and the default applies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

MASTER = "NPU_FIXES"  # default on: everything
DISABLE = "NPU_FIXES_DISABLE"  # comma-separated fix names, or "all"
CE_FORCE_TRITON = "NPU_FIXES_CE_FORCE_TRITON"  # unset: the router decides

_warned: set[tuple[str, str]] = set()


def flag(name: str, default: bool | None, environ: Mapping[str, str] | None = None) -> bool | None:
    """The boolean value of switch ``name``, or ``default`` when unset, empty or not a
    switch word (then with one warning per name and value)."""
    raw = (os.environ if environ is None else environ).get(name)
    word = (raw or "").strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    if word and (name, raw) not in _warned:
        _warned.add((name, raw))
        logging.getLogger("npu_fixes").warning(
            "%s=%r is not a switch value (on: %s; off: %s); using the default (%s)",
            name, raw, "/".join(TRUE_WORDS), "/".join(FALSE_WORDS),
            "unset" if default is None else ("on" if default else "off"))
    return default


def master_on(environ: Mapping[str, str] | None = None) -> bool:
    """``NPU_FIXES``: False turns every fix off."""
    return bool(flag(MASTER, True, environ))


ALL = "all"  # the NPU_FIXES_DISABLE word for every fix


def disabled(valid: Iterable[str], environ: Mapping[str, str] | None = None,
             renamed: Mapping[str, str] | None = None) -> tuple[set[str], list[str], dict[str, str]]:
    """``NPU_FIXES_DISABLE``: (the valid names it turns off, the unknown names it gives, the
    old names it gives -> their new names). ``renamed``: old name -> new name; names and
    ``all`` are taken in any case."""
    valid, renamed = set(valid), dict(renamed or {})
    raw = (os.environ if environ is None else environ).get(DISABLE, "")
    names = {n.strip().lower() for n in raw.split(",") if n.strip()}
    old = {n: renamed[n] for n in sorted(names) if n in renamed}
    names = (names - set(old)) | set(old.values())
    unknown = sorted(names - valid - {ALL})
    return (valid if ALL in names else names & valid), unknown, old
