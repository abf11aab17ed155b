"""Programs of tests/fixes/test_float64_as_float32.py: float64 programs compiled through a
state's backend, kernels run in Triton's interpreter, compared with eager, as built and with
npu_fixes, with the warnings they raise."""

from __future__ import annotations

from tests.programs import against_eager, interpreted_with_npu_fixes, main

NAME = "float64-as-float32"
#: Unix timestamps in seconds (2026-12-07, a quarter second apart).
TIMESTAMPS = [1796601600.0, 1796601600.25, 1796601600.5, 1796601600.75]


def _minutes_since(t):
    return (t - 1796601000.0) / 60.0


def _scaled(t):
    return t * 0.5 + 1.0


def run_all(codegen) -> dict:
    """Each program's largest difference from eager and the float64 warnings' messages."""
    import warnings

    import torch

    def judge(actual, expected):
        return (actual - expected).abs().max().item()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = against_eager(codegen, {
            "timestamps": (_minutes_since, (torch.tensor(TIMESTAMPS, dtype=torch.float64),)),
            "float32": (_scaled, (torch.tensor([1.5, 2.25, -3.0]),)),
        }, judge)
    out["warnings"] = [str(w.message) for w in caught if w.category.__name__ == "Float64AsFloat32Warning"]
    return out


def warned(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
