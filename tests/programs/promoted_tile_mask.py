"""Programs of tests/fixes/test_promoted_tile_mask.py: reductions over several dimensions with a
load of an outer dimension alone (a per-channel weight or bias inside the sum), compiled with
``dynamic=True`` through a state's backend, kernels run in Triton's interpreter with the
backend's launcher grid, compared with eager; with each load of their kernels and whether it
leaves out the mask of a tiled node its address names."""

from __future__ import annotations

import ast
import re

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "promoted-tile-mask"
#: The loop header the promoted rewrite writes for a tiled node: ``for r0_2inner in range(``.
_TILE_LOOP = re.compile(r"^\s*for (r\d+_\d+)inner in range\(", re.M)


def _programs() -> dict:
    """label -> (function, input shapes)."""
    def weighted_sum(x, w):  # a per-channel weight inside a sum over channels and positions
        return (x * w[:, None]).sum((1, 2))

    def biased_mean(x, b):  # a per-channel bias inside a mean
        return (x + b[:, None]).mean((1, 2))

    return {
        "weighted-sum": (weighted_sum, [(2, 37, 101), (37,)]),
        "biased-mean": (biased_mean, [(3, 45, 67), (45,)]),
        # control: every load uses every node of the tree
        "plain-sum": (lambda x: (x * x).sum((1, 2)), [(2, 37, 101)]),
    }


def loads(source: str) -> list[dict]:
    """Each ``tl.load`` of a kernel's ``source``: its text (normalised) and whether its address
    names a tiled node of the kernel while its mask lacks that node's mask (``untiled``)."""
    tiled = set(_TILE_LOOP.findall(source))
    out = []
    for line in source.splitlines():
        if "tl.load(" not in line:
            continue
        for call in ast.walk(ast.parse(line.strip())):
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.load" and call.args):
                continue
            mask = call.args[1] if len(call.args) > 1 else next(
                (k.value for k in call.keywords if k.arg == "mask"), None)
            address = {n.id for n in ast.walk(call.args[0]) if isinstance(n, ast.Name)}
            masks = set() if mask is None else {n.id for n in ast.walk(mask) if isinstance(n, ast.Name)}
            out.append({"load": ast.unparse(call),
                        "untiled": any(node in address and f"{node}mask" not in masks for node in tiled)})
    return out


def run_all(codegen) -> dict:
    """Each program: ``equal`` (True or False against eager, or the error) and its kernels'
    loads."""
    import torch

    out = {}
    for label, (fn, shapes) in _programs().items():
        torch.manual_seed(0)
        args = [torch.randn(s) for s in shapes]
        run = interpreted(codegen, fn, *args, dynamic=True)
        if "error" in run:
            out[label] = {"equal": run["error"], "loads": []}
            continue
        out[label] = {"equal": bool(torch.allclose(run["result"], fn(*args), rtol=1e-4, atol=1e-4)),
                      "loads": [load for launch in run["launches"] for load in loads(launch.source)]}
    return out


def battery(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
