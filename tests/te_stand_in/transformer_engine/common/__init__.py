"""``transformer_engine.common``: only ``recipe``."""

from . import recipe  # noqa: F401
