"""Programs of tests/fixes/test_min2_propagate_nan.py: min reductions compiled through a
state's backend, kernels run in Triton's interpreter with the backend's launcher grid and
built to Triton IR by the host Triton frontend, compared with eager."""

from __future__ import annotations

import inspect
import os
import re
from unittest import mock

import triton.language as tl
from torch._inductor.runtime import triton_helpers

from tests.programs import host_load, innermost, main
from tests.programs.rank_mismatch import triton_ir

NAME = "min2-propagate-nan"
#: label -> (function, shape): each reduces through ``triton_helpers.min2``. Row 1 holds a NaN.
PROGRAMS = {
    "amin": (lambda x: x.amin(-1), (4, 64)),
    "amin-0": (lambda x: x.amin(0), (64, 4)),
    "amin-all": (lambda x: x.amin(), (8, 16)),
    "amin-looped": (lambda x: x.amin(-1), (2, 8192)),
    "amin-relu": (lambda x: (x.amin(-1) + 1).relu(), (4, 64)),
}
IR_OPS = re.compile(r"arith\.(?:minnumf|minimumf)")


def kernel(in_ptr0, out_ptr0):
    """Four rows of eight reduced by the ``min2`` that generated kernels call. (The host
    Triton frontend cannot build the backend's own kernels: their grouped program loop is
    triton-ascend's.)"""
    rows = tl.arange(0, 4)
    x = tl.load(in_ptr0 + rows[:, None] * 8 + tl.arange(0, 8)[None, :])
    tl.store(out_ptr0 + rows, triton_helpers.min2(x, 1))


def helper_ir() -> list[str] | str:
    """The min ops of :func:`kernel`'s Triton IR, or why it does not build."""
    try:
        return sorted(IR_OPS.findall(triton_ir("@triton.jit\n" + inspect.getsource(kernel))))
    except Exception as exc:  # noqa: BLE001 - recorded
        return f"build fails: {innermost(exc)}"


def _input(shape):
    import torch

    torch.manual_seed(0)
    x = torch.randn(shape)
    x.view(-1)[shape[-1] + 5] = float("nan")
    return x


def run_all(codegen) -> dict:
    """Each program compiled and run on the interpreter device: equal to eager (NaN where
    eager has NaN), whether a NaN came out, how many kernels call ``min2``; or the error."""
    import torch

    from npu_fixes.tools import interpret

    out = {}
    for label, (fn, shape) in PROGRAMS.items():
        x = _input(shape)
        want = fn(x)
        with interpret.cpu_device(codegen) as launches:
            try:
                got = torch.compile(fn)(x)
            except Exception as exc:  # noqa: BLE001 - recorded
                out[label] = {"error": innermost(exc)}
                continue
        out[label] = {"equal": bool(torch.allclose(got, want, equal_nan=True)), "nan": bool(got.isnan().any()),
                      "min2_calls": sum("triton_helpers.min2(" in launch.source for launch in launches)}
    return out


def amin(location: str) -> dict:
    """The probe; the programs without npu_fixes; then with ``npu_fixes.apply()``: the
    fix's state, the probe and the programs again."""
    loaded = host_load(location)
    codegen, helpers = loaded.modules["codegen.triton"], loaded.modules["npu_triton_helpers"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    import npu_fixes

    fix = npu_fixes.registry().fixes[NAME]
    first = fix.probe(helpers)
    result = {"probe_before": [first.defective, first.detail], "before": run_all(codegen),
              "ir_before": helper_ir()}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["probe_after"] = fix.probe(helpers).defective
    result["after"] = run_all(codegen)
    result["ir_after"] = helper_ir()
    result["undone"] = npu_fixes.undo() > 0 and fix.probe(helpers).defective
    return result


def worker_error(exc: Exception) -> str:
    """A worker's failure in short: its last error and the kernel line it points at."""
    lines = str(exc).splitlines()
    pointed = [lines[i - 1].strip() for i, line in enumerate(lines) if i and line.strip() == "^"]
    last = [line.split("Last error: ")[-1] for line in lines if "Last error: " in line]
    return " ".join(last[-1:] + pointed[-1:]) or innermost(exc)


def in_workers(location: str) -> dict:
    """``amin-relu`` compiled with Inductor's pool of compile workers (two, started as
    Inductor starts them: fresh interpreters of this environment, see
    ``compile_worker_site``), npu_fixes applied in this process. Each kernel is built by a
    worker's frontend first, then again here for the interpreter, and run. Returns what
    the workers built (their process, the ``min2`` their helpers module held, the min ops of
    the IR), whether the result equals eager, or the error."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.async_compile import AsyncCompile
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    from npu_fixes.tools import interpret
    from tests.programs.compile_worker_site import WORKER_STATE

    codegen = host_load(location).modules["codegen.triton"]
    interpret.activate(codegen)
    del os.environ["NPU_FIXES"]
    import npu_fixes

    npu_fixes.apply()
    os.environ[WORKER_STATE] = location  # read by this environment's workers at their start
    builds = []
    precompile = CachingAutotuner.precompile

    def build_here_again(self, warm_cache_only=False, reload_kernel=None, **kwargs):
        if self.compile_results and reload_kernel is not None:  # a worker's frontend build
            builds.extend({"pid": r.kernel.pid, "min2": r.kernel.min2, "ops": r.kernel.ops}
                          for r in self.compile_results)
            again = reload_kernel()
            self.compile_results, self.configs, self.fn = [], again.configs, again.fn
        return precompile(self, warm_cache_only, reload_kernel, **kwargs)

    fn, shape = PROGRAMS["amin-relu"]
    x = _input(shape)
    result = {"parent": os.getpid()}
    with interpret.cpu_device(codegen), inductor_config.patch(compile_threads=2), \
            mock.patch.object(CachingAutotuner, "precompile", build_here_again):
        AsyncCompile.wait_pool_ready(timeout=300)
        try:
            result["equal"] = bool(torch.allclose(torch.compile(fn)(x), fn(x), equal_nan=True))
        except Exception as exc:  # noqa: BLE001 - recorded
            result["error"] = worker_error(exc)
    result["builds"] = builds
    return result


if __name__ == "__main__":
    main(globals())
