"""``transformer_engine.pytorch.ops``: the two names Megatron's annotations evaluate."""

from . import Unavailable


class Sequential(Unavailable):
    pass


class FusibleOperation(Unavailable):
    pass
