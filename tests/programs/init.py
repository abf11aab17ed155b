"""Programs of tests/test_init.py."""

from __future__ import annotations

import sys

from tests.programs import main


def lazy_import(heavy: list[str]) -> dict:
    """After ``import npu_fixes``: which of ``heavy`` are imported, whether it is armed,
    and the fixes' states."""
    import npu_fixes

    return {"heavy": [m for m in heavy if m in sys.modules],
            "armed": npu_fixes.registry()._armed,
            "states": sorted({r.state.value for r in npu_fixes.status()})}


def imports_added() -> list[str]:
    """The modules that ``import npu_fixes`` adds to sys.modules."""
    before = set(sys.modules)
    import npu_fixes  # noqa: F401

    return sorted(set(sys.modules) - before)


if __name__ == "__main__":
    main(globals())
