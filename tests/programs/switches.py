"""Programs of tests/test_switches.py."""

from __future__ import annotations

import sys

from tests.programs import main


def master_off_imports() -> dict:
    """After ``import npu_fixes``: which heavy modules are imported, and the fixes' states."""
    import npu_fixes

    loaded = sorted(m for m in ("wrapt", "unittest.mock", "asyncio", "torch") if m in sys.modules)
    return {"loaded": loaded, "states": sorted({r.state.value for r in npu_fixes.status()})}


def switched_on_again() -> list[str]:
    """te-parallel-ce's state at import, then after ``NPU_FIXES=1`` and ``apply()``."""
    import os

    import npu_fixes

    first = {r.name: r.state.value for r in npu_fixes.status()}
    os.environ["NPU_FIXES"] = "1"
    npu_fixes.apply()
    return [first["te-parallel-ce"], {r.name: r.state.value for r in npu_fixes.status()}["te-parallel-ce"]]


if __name__ == "__main__":
    main(globals())
