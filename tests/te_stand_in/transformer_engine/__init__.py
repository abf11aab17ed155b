"""A stand-in for Transformer Engine on NPU: a version, the names Megatron-core reads when it
imports, and no ``parallel_cross_entropy`` (what npu_fixes' ``te-parallel-ce`` provides).

Megatron-core (0.16 and 0.19 checked) treats an importable ``transformer_engine`` as installed:
it reads ``__version__`` to choose its call of ``parallel_cross_entropy`` (seven arguments from
2.7.0, five before) and subclasses or imports a few names at import time. Each of those here
raises ``NotImplementedError`` when used, so a model that reaches one fails loudly; the GPT
built from Megatron's local layer spec reaches none. ``TE_STAND_IN_VERSION`` sets the version
(default 2.9.0).
"""

import os

__version__ = os.environ.get("TE_STAND_IN_VERSION", "2.9.0")

from . import common  # noqa: E402, F401  (Megatron reads te.common.recipe at import)
