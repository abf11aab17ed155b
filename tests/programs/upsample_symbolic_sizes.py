"""Programs of tests/fixes/test_upsample_symbolic_sizes.py: nearest and bilinear upsampling
under ``dynamic=True`` (OpInfo samples of the sweep's corpus) compiled through a state's
backend, kernels run in Triton's interpreter, judged against eager as ``npu-fixes sweep``
judges them; and a model's step whose input size changes (automatic dynamic shapes)."""

from __future__ import annotations

from tests.programs import interpreted_with_npu_fixes, judged_by_the_sweep, main

NAME = "upsample-symbolic-sizes"
SAMPLES = (
    "opinfo:nn.functional.interpolate:nearest:float32:fwd:dynamic:0",  # a size given
    "opinfo:nn.functional.interpolate:nearest:bfloat16:bwd:dynamic:4",  # recompute_scale_factor=True
    "opinfo:nn.functional.upsample_nearest:-:float32:bwd:dynamic:1",
    "opinfo:nn.functional.interpolate:bilinear:float32:bwd:dynamic:0",
    "opinfo:nn.functional.interpolate:nearest:float32:bwd:dynamic:2",  # controls: pass as built
    "opinfo:nn.functional.interpolate:bilinear:float32:bwd:static:0",
)


def run_all(codegen) -> dict:
    """Sample id -> the sweep's outcome and its detail; ``model``: a small decoder's training
    step compiled with default settings on two input sizes (the second compiles with symbolic
    sizes): its outcome, as the sweep words an error."""
    from npu_fixes.tools import interpret, sweep

    out = judged_by_the_sweep(codegen, SAMPLES)
    with interpret.cpu_device(codegen, sweep.ProgramOrder()):
        out["model"] = _decoder_steps()
    return out


def _decoder_steps() -> list:
    """Upsampling decoder (nearest, then bilinear to the input's size), two steps at
    different sizes, compiled and eager from the same weights: ``["equal", ""]`` where loss
    and gradients agree, else the outcome and the first line of the error."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from npu_fixes.tools import sweep

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 3, 1))

    def step(model, x):
        small = F.interpolate(model(x), scale_factor=0.5, mode="nearest", recompute_scale_factor=True)
        back = F.interpolate(small, size=x.shape[-2:], mode="bilinear", align_corners=False)
        loss = (back - x).square().mean()
        return [loss, *torch.autograd.grad(loss, list(model.parameters()))]

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: step(net, x))
    try:
        for size in (8, 12):
            x = torch.randn(2, 3, size, size + 2)
            why, _ = sweep.difference(step(net, x), compiled(x))
            if why is not None:
                return ["wrong", why]
    except Exception as exc:  # noqa: BLE001 - the outcome
        return ["compile-error", sweep._error_text(sweep._innermost(exc))]
    finally:
        torch._dynamo.reset()
    return ["equal", ""]


def upsample(location: str) -> dict:
    """The samples and the model through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
