"""Small, randomly initialised models for ``npu-fixes accuracy`` (no downloads).

The Hugging Face models use ``transformers`` (the ``accuracy`` extra) with tiny configs;
``BERT_pytorch`` is a BERT of our own in the style of the TorchBench model of that name
(masked-LM and next-sentence heads). Each entry builds ``(model, inputs)`` on a device;
``model(**inputs)`` returns a dict with the scalar ``"loss"`` and the prediction tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BATCH, SEQ, VOCAB = 2, 16, 128


def _tokens(device: Any, generator: Any) -> Any:
    import torch

    return torch.randint(5, VOCAB, (BATCH, SEQ), device=device, generator=generator)


def _tagging(device: Any, seed: int, tags: int, shape: tuple[int, int] = (BATCH, SEQ),
             lowest: int = 5) -> dict[str, Any]:
    """A tagger's inputs: ``words`` (ids from ``lowest`` up) and a ``target`` tag per word."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return {"words": torch.randint(lowest, VOCAB, shape, device=device, generator=gen),
            "target": torch.randint(0, tags, shape, device=device, generator=gen)}


def _mlm_labels(ids: Any, generator: Any) -> Any:
    import torch

    keep = torch.rand(ids.shape, device=ids.device, generator=generator) < 0.3
    return torch.where(keep, ids, torch.full_like(ids, -100))


def _adapted(model: Any, keys: tuple[str, ...]) -> Any:
    """A module returning ``{"loss", *keys}`` from a transformers model's output."""
    import torch

    class HuggingFaceAdapter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, **inputs: Any) -> dict[str, Any]:
            out = self.model(**inputs)
            return {"loss": out.loss, **{k: getattr(out, k) for k in keys}}

    return HuggingFaceAdapter()


def _hf(config_name: str, model_name: str, task: str, **config: Any) -> Callable[[Any, int], tuple]:
    def build(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
        import torch
        import transformers

        torch.manual_seed(seed)
        cfg = getattr(transformers, config_name)(vocab_size=VOCAB, **config)
        model = getattr(transformers, model_name)(cfg).to(device)
        gen = torch.Generator(device=device).manual_seed(seed)
        ids = _tokens(device, gen)
        inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if task == "mlm":
            inputs["labels"] = _mlm_labels(ids, gen)
            keys: tuple[str, ...] = ("logits",)
        else:
            inputs["start_positions"] = torch.randint(0, SEQ, (BATCH,), device=device, generator=gen)
            inputs["end_positions"] = torch.randint(0, SEQ, (BATCH,), device=device, generator=gen)
            keys = ("start_logits", "end_logits")
        return _adapted(model, keys), inputs

    return build


_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64)


def _bert_pytorch(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A BERT with token, segment and learned position embeddings, post-norm encoder
    layers, and the masked-LM and next-sentence heads of BERT pre-training."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, heads, layers = 32, 2, 2

    class BertPytorch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token = nn.Embedding(VOCAB, hidden, padding_idx=0)
            self.segment = nn.Embedding(3, hidden, padding_idx=0)
            self.position = nn.Parameter(torch.randn(1, SEQ, hidden) * 0.02)
            self.dropout = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.1,
                                               activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.mlm = nn.Linear(hidden, VOCAB)
            self.nsp = nn.Linear(hidden, 2)

        def forward(self, input_ids: Any, segment_ids: Any, mlm_labels: Any, nsp_labels: Any) -> dict:
            x = self.dropout(self.token(input_ids) + self.segment(segment_ids) + self.position)
            x = self.encoder(x)
            mlm_logits = torch.log_softmax(self.mlm(x), dim=-1)
            nsp_logits = torch.log_softmax(self.nsp(x[:, 0]), dim=-1)
            loss = nn.functional.nll_loss(mlm_logits.transpose(1, 2), mlm_labels, ignore_index=-100)
            loss = loss + nn.functional.nll_loss(nsp_logits, nsp_labels)
            return {"loss": loss, "mlm_logits": mlm_logits, "nsp_logits": nsp_logits}

    model = BertPytorch().to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    ids = _tokens(device, gen)
    inputs = {
        "input_ids": ids,
        "segment_ids": torch.randint(1, 3, (BATCH, SEQ), device=device, generator=gen),
        "mlm_labels": _mlm_labels(ids, gen),
        "nsp_labels": torch.randint(0, 2, (BATCH,), device=device, generator=gen),
    }
    return model, inputs


def _fastnlp_seq_len(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A tagger in the style of TorchBench's fastNLP_Bert: from ``seq_len =
    words.ne(0).sum(-1)`` of its padded batch (4 sentences of 474 words, as in the reports)
    it returns, next to its loss, how many words each sentence has beyond the shortest."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, words, hidden, tags = 4, 474, 16, 8

    class SeqLenTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden, padding_idx=0)
            self.tagger = nn.Linear(hidden, tags)

        def forward(self, words: Any, target: Any) -> dict:
            mask = words.ne(0)
            seq_len = mask.sum(-1)
            logits = self.tagger(self.embed(words) * mask[..., None])
            loss = nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1))
            return {"loss": loss, "logits": logits, "beyond_shortest": seq_len - seq_len.min()}

    return SeqLenTagger().to(device), _tagging(device, seed, tags, (batch, words), lowest=1)


def _batchnorm_tagger(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """Token classification through a ``BatchNorm1d``: training updates its running
    statistics and its int64 counter ``num_batches_tracked`` (one element, read and
    written by the same kernel)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, tags = 16, 8

    class BatchNormTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.norm = nn.BatchNorm1d(hidden)
            self.tagger = nn.Linear(hidden, tags)

        def forward(self, words: Any, target: Any) -> dict:
            h = self.norm(self.embed(words).transpose(1, 2)).transpose(1, 2).relu()
            logits = self.tagger(h)
            return {"loss": nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1)),
                    "logits": logits}

    return BatchNormTagger().to(device), _tagging(device, seed, tags)


def _position_gain_tagger(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A tagger with a bias-free ``LayerNorm`` followed by a learned gain per position and
    feature, shared by every sentence of the batch (4 sentences of 512 words). The norm
    weight's gradient sums over sentences and positions a product with that gain: a sum
    over two reduction ranges that cannot be flattened into one."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, words, hidden, tags = 4, 512, 32, 8

    class PositionGainTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.norm = nn.LayerNorm(hidden, bias=False)
            self.gain = nn.Parameter(1 + 0.1 * torch.randn(words, hidden))
            self.tagger = nn.Linear(hidden, tags)

        def forward(self, words: Any, target: Any) -> dict:
            logits = self.tagger(self.norm(self.embed(words)) * self.gain)
            return {"loss": nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1)),
                    "logits": logits}

    return PositionGainTagger().to(device), _tagging(device, seed, tags, (batch, words), lowest=0)


def _running_loss_tagger(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A tagger that keeps, as buffers, how many steps it took and the sum of its losses:
    counters updated in place, one element each (a kernel that reads what it writes)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, tags = 16, 8

    class RunningLossTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.tagger = nn.Linear(hidden, tags)
            self.register_buffer("steps", torch.zeros(()))
            self.register_buffer("loss_sum", torch.zeros(()))

        def forward(self, words: Any, target: Any) -> dict:
            logits = self.tagger(self.embed(words))
            loss = nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1))
            self.steps.add_(1)
            self.loss_sum.add_(loss.detach())
            return {"loss": loss, "logits": logits}

    return RunningLossTagger().to(device), _tagging(device, seed, tags)


def _length_classifier(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A sentence classifier that reads its words' max-pooled features and its length, the
    number of words that are not padding (``words.ne(0).sum(-1)``, as fastNLP_Bert counts
    them), over 4 sentences of 4096 words: an int64 sum per sentence that the backend splits
    across cores."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, classes, words = 16, 8, 4096

    class LengthClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden, padding_idx=0)
            self.classifier = nn.Linear(hidden + 1, classes)

        def forward(self, words: Any, target: Any) -> dict:
            seq_len = words.ne(0).sum(-1)
            pooled = self.embed(words).amax(1)
            features = torch.cat([pooled, seq_len[:, None].float() / words.shape[1]], -1)
            logits = self.classifier(features)
            return {"loss": nn.functional.cross_entropy(logits, target), "seq_len": seq_len, "logits": logits}

    gen = torch.Generator(device=device).manual_seed(seed)
    ids = torch.randint(5, VOCAB, (4, words), device=device, generator=gen)
    lengths = torch.randint(words // 2, words, (4, 1), device=device, generator=gen)
    ids[torch.arange(words, device=device) >= lengths] = 0  # padding after each sentence's end
    target = torch.randint(0, classes, (4,), device=device, generator=gen)
    return LengthClassifier().to(device), {"words": ids, "target": target}


def _mask_dropout_tagger(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A tagger whose dropout draws its keep-mask in place with ``bernoulli_``, as the
    DeBERTa models of the reports did (the TorchBench-era ``transformers`` one), rather than
    through ``nn.Dropout``."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, tags, drop = 16, 8, 0.1

    class MaskDropoutTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.tagger = nn.Linear(hidden, tags)

        def forward(self, words: Any, target: Any) -> dict:
            h = self.proj(self.embed(words)).tanh()
            if self.training:
                keep = torch.empty_like(h).bernoulli_(1 - drop)
                h = h * keep / (1 - drop)
            logits = self.tagger(h)
            return {"loss": nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1)),
                    "logits": logits}

    return MaskDropoutTagger().to(device), _tagging(device, seed, tags)


def _min_pool_classifier(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A sentence classifier that pools its words' features by their minimum and maximum
    (an ``amin`` and an ``amax`` reduction over the sentence), trained to one-hot targets
    by squared error."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    hidden, classes = 16, 4

    class MinPoolClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.head = nn.Linear(2 * hidden, classes)

        def forward(self, words: Any, target: Any) -> dict:
            h = self.embed(words)
            logits = self.head(torch.cat([h.amin(1), h.amax(1)], dim=-1))
            wanted = nn.functional.one_hot(target[:, 0], classes).to(logits.dtype)
            return {"loss": nn.functional.mse_loss(logits, wanted), "logits": logits}

    return MinPoolClassifier().to(device), _tagging(device, seed, classes)


def _distilbert_long(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """DistilBERT masked-LM (one layer, width 32, dropout off) over 4 sentences of 512
    tokens: the reports' batch and sequence shape, at which the backward sums over the batch
    and the sequence as two views of one reduction."""
    import torch
    import transformers

    torch.manual_seed(seed)
    batch, seq = 4, 512
    cfg = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                        max_position_embeddings=seq, dropout=0.0, attention_dropout=0.0)
    model = transformers.DistilBertForMaskedLM(cfg).to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    ids = torch.randint(5, VOCAB, (batch, seq), device=device, generator=gen)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": _mlm_labels(ids, gen)}
    return _adapted(model, ("logits",)), inputs


def _feature_major_tagger(device: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """A tagger at BERT-base width (768 features) over 4 sentences of 512 words whose dense
    layer is computed feature-major (``weight @ x.T``, one column per word, as a 1x1
    convolution over the words lays it out), then turned back to one row per word and given
    its bias, expanded over batch and words before the matmul. The backward copies the
    2048 x 768 gradient transposed for the weight's matmul, then sums it over the 2048 words
    for the bias: one OUTER reduction kernel with a pointwise output fused in before the
    sum, as in hf_Bert's backward."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, words, hidden, tags = 4, 512, 768, 8

    class FeatureMajorTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.encode = nn.Linear(hidden, hidden)
            self.dense = nn.Linear(hidden, hidden)
            self.tagger = nn.Linear(hidden, tags)

        def forward(self, words: Any, target: Any) -> dict:
            x = self.encode(self.embed(words)).tanh()
            bias = self.dense.bias.expand(x.shape)
            feature_major = self.dense.weight @ x.reshape(-1, hidden).t()
            logits = self.tagger(feature_major.t().reshape(x.shape) + bias)
            return {"loss": nn.functional.cross_entropy(logits.reshape(-1, tags), target.reshape(-1)),
                    "logits": logits}

    return FeatureMajorTagger().to(device), _tagging(device, seed, tags, (batch, words), lowest=0)


#: Model name -> builder ``(device, seed) -> (model, inputs)``, in the reports' order.
MODELS: dict[str, Callable[[Any, int], tuple[Any, dict[str, Any]]]] = {
    "BERT_pytorch": _bert_pytorch,
    "BertForMaskedLM": _hf("BertConfig", "BertForMaskedLM", "mlm", **_SMALL),
    "DistilBertForMaskedLM": _hf("DistilBertConfig", "DistilBertForMaskedLM", "mlm", dim=32, n_layers=2,
                                 n_heads=2, hidden_dim=64, max_position_embeddings=64),
    "AlbertForMaskedLM": _hf("AlbertConfig", "AlbertForMaskedLM", "mlm", embedding_size=16, **_SMALL),
    "AlbertForQuestionAnswering": _hf("AlbertConfig", "AlbertForQuestionAnswering", "qa",
                                      embedding_size=16, **_SMALL),
    "DebertaForMaskedLM": _hf("DebertaConfig", "DebertaForMaskedLM", "mlm", relative_attention=True,
                              pos_att_type=["p2c", "c2p"], **_SMALL),
    "DebertaForQuestionAnswering": _hf("DebertaConfig", "DebertaForQuestionAnswering", "qa",
                                       relative_attention=True, pos_att_type=["p2c", "c2p"], **_SMALL),
    "DebertaV2ForMaskedLM": _hf("DebertaV2Config", "DebertaV2ForMaskedLM", "mlm", relative_attention=True,
                                pos_att_type=["p2c", "c2p"], position_buckets=32, **_SMALL),
    "DebertaV2ForQuestionAnswering": _hf("DebertaV2Config", "DebertaV2ForQuestionAnswering", "qa",
                                         relative_attention=True, pos_att_type=["p2c", "c2p"],
                                         position_buckets=32, **_SMALL),
    "MobileBertForQuestionAnswering": _hf("MobileBertConfig", "MobileBertForQuestionAnswering", "qa",
                                          hidden_size=32, embedding_size=16, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=32, true_hidden_size=16,
                                          intra_bottleneck_size=16, num_feedforward_networks=2,
                                          max_position_embeddings=64),
    "fastNLP_seq_len": _fastnlp_seq_len,
    "BatchNormTagger": _batchnorm_tagger,
    "PositionGainTagger": _position_gain_tagger,
    "RunningLossTagger": _running_loss_tagger,
    "LengthClassifier": _length_classifier,
    "MaskDropoutTagger": _mask_dropout_tagger,
    "MinPoolClassifier": _min_pool_classifier,
    "DistilBertForMaskedLM_4x512": _distilbert_long,
    "FeatureMajorTagger": _feature_major_tagger,
    "RobertaForQuestionAnswering": _hf("RobertaConfig", "RobertaForQuestionAnswering", "qa",
                                       **{**_SMALL, "max_position_embeddings": SEQ + 4}),
}
