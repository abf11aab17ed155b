"""Programs of tests/fixes/test_widened_load_inner_axis.py: selects under a condition on the
kernel's inner axis, compiled through a state's backend, kernels run in Triton's
interpreter, compared with eager; a select under no condition as the control."""

from __future__ import annotations

from tests.programs import (
    interpreted,
    interpreted_with_npu_fixes,
    judged_by_the_sweep,
    main,
    step_equals_eager,
)

NAME = "widened-load-inner-axis"
PAD_SAMPLE = "opinfo:nn.functional.pad:circular:float32:bwd:static:3"


def _circular_conv_step(codegen) -> bool | str:
    """A training step of two circular-padded ``Conv1d`` over a length of 6 compiled: True
    where its loss and gradients equal eager's, False where not, else the error."""
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, padding=1, padding_mode="circular"), torch.nn.Tanh(),
                               torch.nn.Conv1d(4, 2, 3, padding=1, padding_mode="circular"))
    x = torch.randn(3, 4, 6)

    def step(model) -> list:
        model.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return [loss.detach(), *(p.grad.clone() for p in model.parameters())]

    return step_equals_eager(codegen, step, conv, atol=1e-6)


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, False where not, else the error; the
    control also says whether its select was widened."""
    import torch

    torch.manual_seed(0)
    programs = {
        # rows of 4, element 1 placed at column 3 (a select loaded where x0 >= 3); views of
        # longer buffers keep the widened lanes inside them (widened-load-tail's defect apart)
        "slice-backward-of-a-select": (
            lambda g: torch.ops.aten.slice_backward(g[:, 1:2], [16, 4], 1, 3, 4, 1) + g,
            (torch.randn(17, 4)[:16],)),
        "select-times": (lambda x, y: x[:, 1:2] * y, (torch.randn(34, 4)[:33], torch.randn(33, 4))),
    }
    out = {}
    for label, (fn, args) in programs.items():
        run = interpreted(codegen, fn, *args)
        out[label] = run["error"] if "error" in run else bool(torch.allclose(run["result"], fn(*args), atol=1e-6))
        if label == "select-times" and "launches" in run:
            out["select-times-widened"] = any("_es_full" in launch.source for launch in run["launches"])
    out["circular-conv-training"] = _circular_conv_step(codegen)
    out["pad-circular-backward"] = judged_by_the_sweep(codegen, [PAD_SAMPLE])[PAD_SAMPLE]
    return out


def loads(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
