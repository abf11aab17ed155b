"""``npu-fixes ARGV`` in a fresh interpreter, after an optional setup program."""

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


if __name__ == "__main__":
    main(globals())
