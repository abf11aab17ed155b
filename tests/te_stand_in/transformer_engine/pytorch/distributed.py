"""``transformer_engine.pytorch.distributed``: what Megatron imports or subclasses from it."""

from . import Unavailable


class CudaRNGStatesTracker(Unavailable):
    pass


def activation_recompute_forward(*args, **kwargs):
    raise NotImplementedError("activation_recompute_forward: not in the Transformer Engine stand-in")
