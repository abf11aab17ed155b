"""Programs of tests/test_verdicts.py."""

from __future__ import annotations

import importlib

from tests.programs import main


def decided(location: str, setup: str | None = None) -> dict:
    """Host-load the torch_npu at ``location`` with npu_fixes armed, after the program ``setup``
    ("module:program" of tests.programs) where given; the states and how many probes ran while
    the backend loaded, then the states and the probes ``npu_fixes.status()`` ran."""
    import npu_fixes
    from npu_fixes.shim.registry import Registry
    from npu_fixes.tools import host

    if setup:
        module, program = setup.split(":")
        getattr(importlib.import_module(f"tests.programs.{module}"), program)()
    probed: list[str] = []
    real = Registry._probe

    def counted(self, fix, module):
        probed.append(fix.name)
        return real(self, fix, module)

    Registry._probe = counted
    host.load(location)
    registry = npu_fixes.registry()
    at_load = {name: rec.state.value for name, rec in registry.records.items()}
    probes_at_load = len(probed)
    states = {r.name: [r.state.value, r.detail] for r in npu_fixes.status()}
    return {"at_load": at_load, "probes_at_load": probes_at_load, "status": states,
            "probes_by_status": probed[probes_at_load:]}


def store_many(key: str, name: str, times: int) -> None:
    """Add a verdict named ``name`` under ``key`` ``times`` times (one of many writers at once)."""
    from npu_fixes.shim import verdicts
    from npu_fixes.shim.fix import Probe

    for i in range(times):
        verdicts.store(key, {name: Probe(True, f"{name} {i}")})


if __name__ == "__main__":
    main(globals())
