"""``transformer_engine.pytorch.fp8``: FP8 is never enabled."""


class FP8GlobalStateManager:
    @staticmethod
    def is_fp8_enabled() -> bool:
        return False


def fp8_autocast(*args, **kwargs):
    raise NotImplementedError("fp8_autocast: not in the Transformer Engine stand-in")
