"""The corpus's training-step family: the code an LLM or BERT training step is made of.

Each program is written as training code writes it (Hugging Face transformers' and
Megatron-core's loss, masking, rotary embedding, routing and metric lines), at sizes that
reach the thresholds where the backend's kernels change form (a reduction split across cores,
a reduction tree promoted to tiles, an int64 value past int32) without materialising what a
smaller shape shows with the same kernel: 2 x 1023 tokens where a vocabulary of 32 stands for
32k to 152k, 2^15 labels, 2^14 flat offsets into a 152064 vocabulary. Sample ids are
``train:<name>``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TrainingProgram:
    """``source`` defines ``program(...)``; ``inputs`` are the statements that build ``args``;
    ``backward``: the gradients of its floating inputs are compared too."""

    source: str
    inputs: tuple[str, ...]
    backward: bool = False
    dynamic: bool = False


_ROPE_INPUTS = ("torch.manual_seed(0)", "x = torch.randn(2, 8, 2, 16)", "angles = torch.randn(8, 1, 8)",
                "args = (x, angles.cos(), angles.sin())")
_LOGITS = ("torch.manual_seed(0)", "logits = torch.randn(2, 1024, 32)",
           "labels = torch.randint(0, 32, (2, 1024))", "labels[:, :5] = -100", "args = (logits, labels)")
_LABELS = ("torch.manual_seed(0)", "labels = torch.randint(0, 50, (8, 4096))",
           "labels[torch.rand(8, 4096) < 0.3] = -100", "args = (labels,)")

_INTERLEAVED_ROPE = ("def program(x, cos, sin):\n"
                     "    x1, x2 = x[..., ::2], x[..., 1::2]\n"
                     "    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)\n")
_SHIFTED_CROSS_ENTROPY = (
    "def program(logits, labels):\n"
    "    vocab = logits.shape[-1]\n"
    "    return torch.nn.functional.cross_entropy(logits[..., :-1, :].reshape(-1, vocab),\n"
    "                                             labels[..., 1:].reshape(-1), ignore_index=-100)\n")
_TOKEN_COUNT = "def program(labels):\n    return (labels[..., 1:] != -100).sum()\n"

PROGRAMS = {
    # rotary embedding, GPT-J / LLaMA-reference style: rotate interleaved pairs
    "rope-interleaved": TrainingProgram(_INTERLEAVED_ROPE, _ROPE_INPUTS, backward=True),
    "rope-interleaved-dynamic": TrainingProgram(_INTERLEAVED_ROPE, _ROPE_INPUTS, backward=True, dynamic=True),
    # rotary embedding, GPT-NeoX / HF LLaMA style: rotate halves
    "rope-halves": TrainingProgram(
        "def program(x, cos, sin):\n"
        "    x1, x2 = x[..., :8], x[..., 8:]\n"
        "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)\n",
        _ROPE_INPUTS, backward=True),
    # causal-LM loss: shift so that tokens < n predict n
    "shifted-cross-entropy": TrainingProgram(_SHIFTED_CROSS_ENTROPY, _LOGITS),
    "shifted-cross-entropy-backward": TrainingProgram(_SHIFTED_CROSS_ENTROPY, _LOGITS, backward=True),
    "shifted-cross-entropy-dynamic": TrainingProgram(_SHIFTED_CROSS_ENTROPY, _LOGITS, backward=True,
                                                     dynamic=True),
    "label-smoothing-cross-entropy": TrainingProgram(
        "def program(logits, labels):\n"
        "    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),\n"
        "                                             ignore_index=-100, label_smoothing=0.1)\n",
        ("torch.manual_seed(0)", "logits = torch.randn(4, 128, 64)",
         "labels = torch.randint(0, 64, (4, 128))", "labels[:, :3] = -100", "args = (logits, labels)"),
        backward=True),
    # the number of tokens a loss is averaged over (Megatron's loss mask sum)
    "token-count": TrainingProgram(
        _TOKEN_COUNT, _LABELS),
    "token-count-dynamic": TrainingProgram(
        _TOKEN_COUNT, _LABELS, dynamic=True),
    # where each token's label sits in flat [tokens, vocabulary] logits: past 2^31
    "label-offsets": TrainingProgram(
        "def program(labels):\n"
        "    return torch.arange(labels.shape[0])[:, None] * 152064 + labels[:, None]\n",
        ("torch.manual_seed(0)", "args = (torch.randint(0, 152064, (16384,)),)")),
    # next-token accuracy over the tokens that count
    "argmax-accuracy": TrainingProgram(
        "def program(logits, labels):\n"
        "    counted = labels != -100\n"
        "    right = (logits.argmax(-1) == labels) & counted\n"
        "    return right.sum() / counted.sum()\n",
        ("torch.manual_seed(0)", "logits = torch.randn(4, 512, 64)",
         "labels = torch.randint(0, 64, (4, 512))", "labels[:, :7] = -100", "args = (logits, labels)")),
    # causal self-attention scores
    "causal-attention": TrainingProgram(
        "def program(q, k, v):\n"
        "    scores = q @ k.transpose(-1, -2) / 4.0\n"
        "    causal = torch.ones(scores.shape[-1], scores.shape[-1], dtype=torch.bool).triu(1)\n"
        "    return scores.masked_fill(causal, float('-inf')).softmax(-1) @ v\n",
        ("torch.manual_seed(0)", "args = tuple(torch.randn(1, 2, 64, 16) for _ in range(3))"), backward=True),
    # mixture-of-experts top-2 routing: weights and tokens per expert
    "moe-routing": TrainingProgram(
        "def program(router_logits):\n"
        "    weights, experts = router_logits.softmax(-1).topk(2, dim=-1)\n"
        "    weights = weights / weights.sum(-1, keepdim=True)\n"
        "    counts = torch.nn.functional.one_hot(experts, 8).sum((0, 1))\n"
        "    return weights, counts\n",
        ("torch.manual_seed(0)", "args = (torch.randn(4096, 8),)")),
    # token embedding lookup and its gradient into the table
    "embedding-backward": TrainingProgram(
        "def program(weight, ids):\n    return torch.nn.functional.embedding(ids, weight) * 2.0\n",
        ("torch.manual_seed(0)", "args = (torch.randn(1000, 64), torch.randint(0, 1000, (4, 256)))"),
        backward=True),
}
