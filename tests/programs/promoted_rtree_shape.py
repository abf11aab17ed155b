"""Programs of tests/fixes/test_promoted_rtree_shape.py: reductions whose free nodes the
backend promotes to slots of their own, with a load that does not use every node, compiled
through a state's backend, kernels run in Triton's interpreter with the backend's launcher
grid, compared with eager; with each masked load whose pointer is narrower than its mask."""

from __future__ import annotations

import ast
import re

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "promoted-rtree-shape"
#: The mask of a promoted reduction node (``r0_2mask``), not of a flat tree (``r0_mask``).
_NODE_MASK = re.compile(r"^(r\d+_\d+)mask$")


def _programs() -> dict:
    """label -> (function, input shapes)."""
    def per_head_weighted(x, w):  # a per-position weight inside a per-head sum
        return (x.view(4, 16, 8, 64).permute(0, 2, 1, 3) * w).reshape(32, 1024).sum(-1)

    def over_batch(a, b):  # b broadcast over the batch: b's address has no batch node
        return (a.view(4, 128, 32) * b[None]).sum(dim=(0, 1))

    return {
        "per-head-weighted": (per_head_weighted, [(4 * 16 * 8 * 64,), (64,)]),
        "over-batch": (over_batch, [(512, 32), (128, 32)]),
        "over-batch-wide": (lambda a, b: (a.view(4, 64, 1024) * b[None]).sum(dim=(0, 1)), [(256, 1024), (64, 1024)]),
        # control: every load uses both promoted nodes
        "per-row-permuted": (lambda x: x.view(16, 4, 256).transpose(1, 2).reshape(16, 1024).sum(-1), [(16384,)]),
    }


def masked_loads(source: str) -> list[dict]:
    """Each ``tl.load`` with a mask in ``source``: its text (normalised) and whether its
    pointer leaves out a promoted node its mask names (a bar under a block's mask)."""
    out = []
    for line in source.splitlines():
        if "tl.load(" not in line:
            continue
        for call in ast.walk(ast.parse(line.strip())):
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.load" and len(call.args) > 1):
                continue
            masked = {m[1] for n in ast.walk(call.args[1]) if isinstance(n, ast.Name)
                      for m in [_NODE_MASK.match(n.id)] if m}
            address = call.args[0].right if isinstance(call.args[0], ast.BinOp) else call.args[0]
            broadcast = isinstance(address, ast.Call) and ast.unparse(address.func) == "tl.broadcast_to"
            names = {n.id for n in ast.walk(address) if isinstance(n, ast.Name)}
            out.append({"load": ast.unparse(call), "bar": bool(masked - names) and not broadcast})
    return out


def run_all(codegen) -> dict:
    """Each program: equal to eager and its kernels' masked loads, or the error."""
    import torch

    out = {}
    for label, (fn, shapes) in _programs().items():
        torch.manual_seed(0)
        args = [torch.randn(s) for s in shapes]
        run = interpreted(codegen, fn, *args)
        out[label] = run if "error" in run else {
            "equal": bool(torch.allclose(run["result"], fn(*args), rtol=1e-4, atol=1e-4)),
            "loads": [load for launch in run["launches"] for load in masked_loads(launch.source)]}
    return out


def battery(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
