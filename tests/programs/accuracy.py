"""Programs of tests/test_accuracy.py (and the setup programs of its ``npu-fixes
accuracy`` runs)."""

from __future__ import annotations

import sys

from tests.programs import main


def scaled_outputs(gm, factor: float):
    """``gm`` with its floating-point outputs multiplied by ``factor``."""
    import torch

    def run(*args):
        outs = gm(*args)
        return type(outs)(o * factor if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                          for o in outs)
    return run


def off_by_ten_percent(gm, example_inputs):
    """A torch.compile backend whose forward outputs are 10% off."""
    return scaled_outputs(gm, 1.1)


def nan_outputs(gm, example_inputs):
    """A torch.compile backend whose forward outputs are NaN."""
    return scaled_outputs(gm, float("nan"))


def eager_and_wrong() -> list:
    """BERT_pytorch checked against eager and against ``off_by_ten_percent``: both results
    and the failure text of the second."""
    import torch  # noqa: F401

    from npu_fixes.tools import accuracy

    accuracy.configure(None)
    good = accuracy.check_model("BERT_pytorch", "cpu", 2, 0, "eager", None)
    bad = accuracy.check_model("BERT_pytorch", "cpu", 2, 0, off_by_ten_percent, None)
    return [accuracy.result_dict(good), accuracy.result_dict(bad), accuracy.failure_text(bad)]


def nan_backend() -> None:
    """Setup: register ``nan_outputs`` as a torch.compile backend."""
    import torch  # noqa: F401
    from torch._dynamo import register_backend

    register_backend(nan_outputs)


def no_transformers() -> None:
    """Setup: make ``transformers`` unimportable."""
    sys.modules["transformers"] = None


if __name__ == "__main__":
    main(globals())
