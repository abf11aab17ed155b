"""Programs of tests/test_switches.py."""

from __future__ import annotations

import sys

from tests.programs import backend_states, host_load, main, probes_now


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


def switched_at_run_time(location: str) -> dict:
    """Host-load ``location`` with npu_fixes armed, then the issue's sequence: NPU_FIXES=0
    set at run time and status(); NPU_FIXES=1 and apply(); undo(). After each step the
    backend fixes' states and, for the fixes applied at first, whether the live probe sees
    the defect on what the targets now hold (False while the repair is in place)."""
    import os

    import npu_fixes

    loaded = host_load(location)
    steps = {"import": backend_states()}
    applied = sorted(n for n, s in steps["import"].items() if s == "applied")
    steps["defective_at_import"] = probes_now(applied)
    os.environ["NPU_FIXES"] = "0"
    steps["switched_off"] = backend_states()
    os.environ["NPU_FIXES"] = "1"
    npu_fixes.apply()
    steps["applied_again"] = backend_states()
    steps["defective_applied_again"] = probes_now(applied)
    npu_fixes.undo()
    steps["undone"] = backend_states()
    steps["defective_undone"] = probes_now(applied)
    steps["applied"] = applied
    steps["loaded_version"] = loaded.version
    return steps


if __name__ == "__main__":
    main(globals())
