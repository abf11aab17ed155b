"""``transformer_engine.pytorch.router``: imported by Megatron when the version is 2.7.0 or newer."""


def _unavailable(*args, **kwargs):
    raise NotImplementedError("the fused MoE router: not in the Transformer Engine stand-in")


fused_compute_score_for_moe_aux_loss = fused_moe_aux_loss = fused_topk_with_score_function = _unavailable
