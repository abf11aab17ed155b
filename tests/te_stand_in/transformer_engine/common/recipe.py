"""``transformer_engine.common.recipe``: the FP8 recipe Megatron subclasses at import."""

from ..pytorch import Unavailable


class DelayedScaling(Unavailable):
    """FP8 delayed scaling: not in the stand-in."""
