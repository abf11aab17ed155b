"""Programs of tests/fixes/test_triton36_launcher.py: kernels compiled through a state's
backend, their launchers built for a Triton of the 3.6 generation (this machine's, as it
is) or of the 3.2 generation, run in Triton's interpreter, compared with eager."""

from __future__ import annotations

import inspect
import os

from tests.programs import host_load, innermost, interpreted, main, with_npu_fixes

NAME = "triton36-launcher"


def _programs() -> dict:
    """label -> (function, input shape): a pointwise kernel (XBLOCK), a reduction (XBLOCK,
    R0_BLOCK), and an OUTER sum that the backend splits across cores (a partial and a
    combine kernel)."""
    return {"pointwise": (lambda x: x * 2 + 1, (64, 32)), "sum": (lambda x: x.sum(1), (64, 32)),
            "outer-sum": (lambda x: x.sum(0), (4096, 8))}


def run_all(codegen, runtime: str, labels=("pointwise", "sum")) -> dict:
    """Each program of ``labels``: equal to eager, or the error."""
    import torch

    out = {}
    for label, (fn, shape) in _programs().items():
        if label not in labels:
            continue
        torch.manual_seed(0)
        x = torch.randn(shape)
        run = interpreted(codegen, fn, x, runtime=runtime)
        out[label] = run if "error" in run else {"equal": bool(torch.allclose(run["result"], fn(x)))}
    return out


def on_triton36(location: str) -> dict:
    """Without and with npu_fixes: the programs with launchers built for this machine's
    Triton (3.6), and the parameters of the launchers that the live ``make_launcher`` builds
    for the fix's stand-in kernel (or the error), and for it with hooks on its class (past
    the hooks, what the launcher takes)."""
    loaded = host_load(location)
    codegen, heuristics = loaded.modules["codegen.triton"], loaded.modules["npu_triton_heuristics"]
    from npu_fixes.fixes.triton36_launcher import launcher_parameters
    from npu_fixes.tools import interpret

    def battery() -> dict:
        try:
            parameters = launcher_parameters(heuristics)
        except AttributeError as exc:
            parameters = innermost(exc)
        return {"programs": run_all(codegen, "3.6"), "parameters": parameters,
                "with_class_hooks": launcher_parameters(heuristics, hooks_on_class=True)}

    interpret.activate(codegen)
    return with_npu_fixes(NAME, heuristics, battery)


def on_triton32(location: str) -> dict:
    """With a Triton of the 3.2 generation stood in (``AttrsDescriptor`` in
    ``triton.compiler.compiler``, which the probe tells the generations by): the fix's state
    after ``npu_fixes.apply()``, whether ``make_launcher`` is still the very object it was,
    and the programs with launchers built for 3.2."""
    import triton.compiler.compiler as compiler

    loaded = host_load(location)
    codegen, heuristics = loaded.modules["codegen.triton"], loaded.modules["npu_triton_heuristics"]
    from npu_fixes.tools import interpret

    compiler.AttrsDescriptor = interpret.AttrsDescriptor
    interpret.activate(codegen)
    target = inspect.getattr_static(heuristics.NPUTritonCompileResult, "make_launcher")
    del os.environ["NPU_FIXES"]
    import npu_fixes

    npu_fixes.apply()
    return {"state": {r.name: r.state.value for r in npu_fixes.status()}[NAME],
            "same": inspect.getattr_static(heuristics.NPUTritonCompileResult, "make_launcher") is target,
            "programs": run_all(codegen, "3.2")}


def combine(location: str) -> dict:
    """The OUTER sum with launchers built for this machine's Triton (3.6), without and with
    npu_fixes (triton36-combine-attrs' probe and state)."""
    codegen = host_load(location).modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    return with_npu_fixes("triton36-combine-attrs", codegen, lambda: run_all(codegen, "3.6", ("outer-sum",)))


if __name__ == "__main__":
    main(globals())
