"""Programs of tests/fixes/test_expand_reload_recursion.py: a graph with ``expand``
compiled through a state's backend before and after ``importlib.reload`` of its lowering
module, kernels run in Triton's interpreter with the backend's launcher grid, compared with
eager."""

from __future__ import annotations

import importlib
import os

from tests.programs import host_load, innermost, main

NAME = "expand-reload-recursion"


def _broadcast(x, y):
    return x.expand(4, 8) * y + 1


def compiled(codegen) -> dict:
    """The graph compiled afresh: equal to eager, or whether the error is a recursion
    that hit Python's limit."""
    import traceback

    import torch

    from npu_fixes.tools import interpret

    torch._dynamo.reset()
    x, y = torch.randn(1, 8), torch.randn(4, 8)
    with interpret.cpu_device(codegen):
        try:
            return {"equal": bool(torch.allclose(torch.compile(_broadcast)(x, y), _broadcast(x, y)))}
        except Exception as exc:  # noqa: BLE001 - recorded
            return {"recursion": "maximum recursion depth exceeded" in "".join(traceback.format_exception(exc)),
                    "error": innermost(exc)}


def reload(location: str) -> dict:
    """The probe and the graph at the load; ``npu_fixes.apply()``; the lowering module
    reloaded: the fix's state, the probe and the graph; then ``undo()``: the probe and the
    graph again."""
    loaded = host_load(location)
    codegen = loaded.modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    import npu_fixes

    fix = npu_fixes.registry().fixes[NAME]
    first = fix.probe(loaded.modules["lowering"])
    result = {"probe_before": [first.defective, first.detail], "first": compiled(codegen)}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    lowering = importlib.reload(loaded.modules["lowering"])
    result["state_reloaded"] = {r.name: r.state.value for r in npu_fixes.status()}[NAME]
    result["probe_reloaded"] = fix.probe(lowering).defective
    result["reloaded"] = compiled(codegen)
    result["undone"] = npu_fixes.undo() > 0
    result["probe_undone"] = fix.probe(lowering).defective
    result["reloaded_undone"] = compiled(codegen)
    return result


if __name__ == "__main__":
    main(globals())
