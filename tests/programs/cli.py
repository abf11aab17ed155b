"""Programs of tests/test_cli.py: ``npu-fixes ARGV`` in a fresh interpreter, after an
optional setup program (of any module here), and test_cli's setup programs."""

from __future__ import annotations

import importlib
import sys

from tests.programs import main


def run(argv: list[str], setup: str | None = None) -> None:
    """Run ``setup`` ("module:program" of tests.programs) first, then the console script;
    exits with its status."""
    if setup:
        module, program = setup.split(":")
        getattr(importlib.import_module(f"tests.programs.{module}"), program)()
    from npu_fixes.tools.cli import main as cli_main

    sys.argv = ["npu-fixes", *argv]
    raise SystemExit(cli_main())


def sabotaged_gate() -> None:
    """Setup: rng-capture-gate's install is sabotaged (its table gating gates nothing and
    its lowering wrapper returns the lowering unchanged), so its repair does not take."""
    from npu_fixes.fixes import rng_capture_gate

    rng_capture_gate.FIX.install.__globals__["gate_table"] = lambda *a, **k: []
    rng_capture_gate.FIX.install.__globals__["gated"] = lambda op, low: low


def exits(module):
    """A probe that raises SystemExit."""
    raise SystemExit(7)


def exiting_probe() -> None:
    """Setup: launch-grid's probe raises SystemExit."""
    from npu_fixes.fixes import launch_grid

    object.__setattr__(launch_grid.FIX, "probe", exits)


if __name__ == "__main__":
    main(globals())
