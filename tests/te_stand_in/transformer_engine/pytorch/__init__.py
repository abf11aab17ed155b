"""``transformer_engine.pytorch`` without ``parallel_cross_entropy``: the layer classes Megatron
subclasses at import, each refusing to be built."""

import torch


class Unavailable(torch.nn.Module):
    """A Transformer Engine class the stand-in does not have: building one raises."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"{type(self).__name__}: not in the Transformer Engine stand-in")


class Linear(Unavailable):
    pass


class LayerNormLinear(Unavailable):
    pass


class LayerNorm(Unavailable):
    pass


class RMSNorm(Unavailable):
    pass


class DotProductAttention(Unavailable):
    pass


class GroupedLinear(Unavailable):
    pass


from . import distributed, ops  # noqa: E402, F401  (read as attributes by Megatron at import)
