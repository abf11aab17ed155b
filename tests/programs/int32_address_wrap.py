"""Programs of tests/fixes/test_int32_address_wrap.py: a sum over more than 2^31 elements
(a stride-0 view: no memory) compiled through a state's backend, its kernel recorded at
the launch and not run (2^31 elements are beyond Triton's interpreter); controls under
2^31 elements run in the interpreter and compared with eager."""

from __future__ import annotations

import os

from tests.programs import host_load, innermost, interpreted, main

NAME = "int32-address-wrap"
WIDE = 2**31 + 64


class NotRun(Exception):
    """Raised at the launch: the kernel was generated, and is not run."""


def wide_sum(codegen) -> dict:
    """``x.expand(2^31 + 64).sum()`` of one int8: the launched kernel's numel argument types
    and whether its source holds the count as a literal; or the compile's error."""
    import torch

    from npu_fixes.tools import interpret

    seen = []

    def record(self, *args):
        seen.append({k: v for k, v in self.signature.items() if k.endswith("numel")})
        seen.append(f"{WIDE}" in self.fn.src)
        raise NotRun("recorded")

    torch._dynamo.reset()
    x = torch.ones(1, dtype=torch.int8).expand(WIDE)
    saved, interpret.InterpretedBinary.run = interpret.InterpretedBinary.run, record
    try:
        with interpret.cpu_device(codegen):
            torch.compile(lambda x: x.sum())(x)
    except Exception as exc:  # noqa: BLE001 - recorded
        error = innermost(exc)
    finally:
        interpret.InterpretedBinary.run = saved
    if seen:
        return {"numels": seen[0], "literal": seen[1]}
    return {"error": error}


def controls(codegen) -> dict:
    """Kernels under 2^31 elements: equal to eager, or the error."""
    import torch

    programs = {"sum": (lambda x: x.sum(), torch.arange(4000.0)),
                "pointwise": (lambda x: x * 2 + 1, torch.arange(4096.0))}
    out = {}
    for label, (fn, x) in programs.items():
        run = interpreted(codegen, fn, x)
        out[label] = run["error"] if "error" in run else bool(torch.equal(run["result"], fn(x)))
    return out


def guard(location: str) -> dict:
    """The probe; the wide sum without npu_fixes; then with ``npu_fixes.apply()``: the
    guard's state, the wide sum, the controls, and the wide sum after ``undo()``."""
    codegen = host_load(location).modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    import npu_fixes

    first = npu_fixes.registry().fixes[NAME].probe(codegen)
    result = {"probe": [first.defective, first.detail], "before": wide_sum(codegen)}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["after"] = wide_sum(codegen)
    result["controls"] = controls(codegen)
    npu_fixes.undo()
    result["undone"] = wide_sum(codegen)
    return result


if __name__ == "__main__":
    main(globals())
