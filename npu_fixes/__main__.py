"""``python -m npu_fixes``: the same as the ``npu-fixes`` command."""

from .cli import main

raise SystemExit(main())
