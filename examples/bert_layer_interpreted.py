"""One training step of a BERT layer through a torch_npu backend's own code, on CPU.

The backend of the torch_npu at ``--torch-npu`` (an install, a source tree or a wheel) is
host-loaded and compiles the layer's forward and backward; its kernels run in Triton's
interpreter over the grids its launcher computes (``npu_fixes.tools.interpret``). The
gradients of every parameter and of the input are compared with eager. ``--without-fixes``
leaves npu_fixes off, so the same run shows what the backend itself computes.

At the real width (hidden 768, 2,048 tokens) one run takes about ten minutes on two cores::

    python examples/bert_layer_interpreted.py --torch-npu .cache/site-genuine-bafc50684 --without-fixes
    python examples/bert_layer_interpreted.py --torch-npu .cache/site-genuine-bafc50684

It prints one JSON line: the fixes applied, the kernels launched (and how many were split
across the vector cores) and, per tensor whose gradient differs from eager by more than
1e-3 of its largest value, that relative difference.
"""

from __future__ import annotations

import argparse
import json
import os
import time

TOLERANCE = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-npu", required=True, help="torch_npu install, source tree or wheel")
    parser.add_argument("--without-fixes", action="store_true", help="leave npu_fixes off")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()

    os.environ["NPU_FIXES"] = "0"  # armed below, after the load, unless --without-fixes
    import torch
    from transformers import BertConfig  # before the host load: it looks for torch_npu's spec
    from transformers.models.bert.modeling_bert import BertLayer

    import npu_fixes
    from npu_fixes.tools import host, interpret

    codegen = host.load(args.torch_npu).modules["codegen.triton"]
    interpret.activate(codegen)
    if not args.without_fixes:
        del os.environ["NPU_FIXES"]
        npu_fixes.apply()
    applied = sorted(r.name for r in npu_fixes.status() if r.state.value == "applied")

    config = BertConfig(hidden_size=args.hidden, num_attention_heads=max(1, args.hidden // 64),
                        intermediate_size=4 * args.hidden, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    layer = BertLayer(config)
    x = torch.randn(args.batch, args.seq, args.hidden, requires_grad=True)

    def gradients(module: torch.nn.Module) -> dict[str, torch.Tensor]:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = module(x)
        (out[0] if isinstance(out, tuple) else out).pow(2).mean().backward()
        return {**{n: p.grad.clone() for n, p in layer.named_parameters()}, "input": x.grad.clone()}

    eager = gradients(layer)
    start = time.perf_counter()
    with interpret.cpu_device(codegen) as launches:
        compiled = gradients(torch.compile(layer))
    differing = {}
    for name, want in eager.items():
        error = ((compiled[name] - want).abs().max() / want.abs().max().clamp_min(1e-12)).item()
        if not error <= TOLERANCE:  # NaN counts as differing
            differing[name] = round(error, 4)
    split = sum("ws_ptr" in launch.arguments for launch in launches)  # a partial kernel's workspace
    seconds = round(time.perf_counter() - start, 1)
    print(json.dumps({"torch_npu": args.torch_npu, "fixes_applied": applied, "kernels": len(launches),
                      "split": split, "seconds": seconds, "differing": differing}))


if __name__ == "__main__":
    main()
