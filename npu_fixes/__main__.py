"""``python -m npu_fixes``: the same as the ``npu-fixes`` command."""

from .tools.cli import main

raise SystemExit(main())
