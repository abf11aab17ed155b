"""Programs of tests/fixes/test_te_parallel_ce_megatron.py: Megatron-core's own loss call on gloo ranks.

The program runs with ``tests/te_stand_in`` first on the path. It imports npu_fixes, then
Megatron-core (which imports the stand-in Transformer Engine and binds ``parallel_cross_entropy``
at that moment), then forks ``world`` ranks. Each rank builds Megatron's GPT on the CPU for every
tensor-parallel size asked, feeds its vocabulary slice of one set of logits to the model's own
``compute_language_model_loss`` (what ``GPTModel.forward`` calls with ``labels``) and reports the
largest differences, per case, from Megatron's unfused ``vocab_parallel_cross_entropy`` on the
same slices (fp32, exact up to rounding).
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

from tests.programs import main

SEQ, BATCH, VOCAB = 6, 3, 256  # VOCAB divides by every TP size used


def _model(impl: str, tp: int):  # noqa: ANN202
    import torch
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=1, hidden_size=16, num_attention_heads=4, tensor_model_parallel_size=tp,
        use_cpu_initialization=True, pipeline_dtype=torch.float32,
        cross_entropy_loss_fusion=True, cross_entropy_fusion_impl=impl,
    )
    spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False)
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=VOCAB, max_sequence_length=SEQ)


def _case(impl: str, tp: int, dtype: str, ignored: bool, cg_capturable: bool = False) -> dict:
    """One call of ``compute_language_model_loss`` on this rank's slice (or, ``cg_capturable``,
    of Megatron's ``te_parallel_cross_entropy`` wrapper with ``is_cg_capturable=True``, as full
    iteration CUDA graphs call it, on the labels ``compute_language_model_loss`` makes); its loss
    and logits gradient against the unfused reference on the same slice."""
    import torch
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    group = parallel_state.get_tensor_model_parallel_group()
    rank = group.rank()
    model = _model(impl, tp)
    gen = torch.Generator().manual_seed(tp)  # the same logits, labels and loss gradient on every rank
    full = 3 * torch.randn(SEQ, BATCH, VOCAB, generator=gen)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)  # Megatron's [b, s]
    if ignored:
        labels[torch.rand(BATCH, SEQ, generator=gen) < 0.3] = -100
    grad_out = torch.randn(BATCH, SEQ, generator=gen)
    width = VOCAB // tp
    part = full[..., rank * width:(rank + 1) * width].to(getattr(torch, dtype))
    logits = part.clone().requires_grad_(True)
    if cg_capturable:
        from megatron.core.extensions.transformer_engine import te_parallel_cross_entropy

        sb = labels.t().contiguous()
        loss = te_parallel_cross_entropy(logits, torch.as_strided(sb, sb.size(), (sb.size(1), 1)), group, True).t()
    else:
        loss = model.compute_language_model_loss(labels, logits)
    loss.backward(grad_out)
    ref_logits = part.float().requires_grad_(True)
    keep = labels.t() != -100
    ref = vocab_parallel_cross_entropy(ref_logits, labels.t().clamp(min=0).contiguous()).t() * keep.t()
    ref.backward(grad_out)
    return {
        "shape": list(loss.shape), "dtype": str(logits.grad.dtype),
        "loss_err": (loss.float() - ref).abs().max().item(),
        "grad_err": (logits.grad.float() - ref_logits.grad).abs().max().item(),
        "grad_max": ref_logits.grad.abs().max().item(),
        "ignored": int((~keep).sum()), "ignored_loss_max": loss.t()[~keep].abs().max().item() if ignored else 0.0,
        "ignored_grad_max": logits.grad.permute(2, 0, 1)[:, ~keep].abs().max().item() if ignored else 0.0,
        "group_ranks": torch.distributed.get_process_group_ranks(group),
    }


def _rank(rank: int, world: int, port: int, tps: list[int], out: str) -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    cases = {}
    for tp in tps:
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
        cases[f"tp{tp}-te-fp32"] = _case("te", tp, "float32", ignored=False)
        cases[f"tp{tp}-te-bf16"] = _case("te", tp, "bfloat16", ignored=False)
        cases[f"tp{tp}-te-ignored"] = _case("te", tp, "float32", ignored=True)
        cases[f"tp{tp}-te-cg-capturable"] = _case("te", tp, "float32", ignored=False, cg_capturable=True)
        cases[f"tp{tp}-native-fp32"] = _case("native", tp, "float32", ignored=False)
        parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    Path(out, f"{rank}.json").write_text(json.dumps(cases))


def compare(world: int, tps: list[int]) -> dict:
    """Every case of every rank, with what Megatron bound and how it calls it."""
    import npu_fixes  # noqa: I001  (before Megatron imports Transformer Engine)
    import torch.multiprocessing as mp
    from megatron.core.extensions import transformer_engine as te_ext
    from megatron.core.utils import get_te_version

    from npu_fixes.ops import parallel_cross_entropy

    state = {r.name: r.state.value for r in npu_fixes.status()}["te-parallel-ce"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.start_processes(_rank, args=(world, port, tps, out), nprocs=world, join=True, start_method="fork")
        ranks = [json.loads(Path(out, f"{r}.json").read_text()) for r in range(world)]
    return {"state": state, "te_version": str(get_te_version()),
            "bound_is_ours": te_ext.parallel_cross_entropy is parallel_cross_entropy,
            "seven_arguments": te_ext._TE_SUPPORTS_CG_CAPTURABLE, "ranks": ranks}


if __name__ == "__main__":
    main(globals())
