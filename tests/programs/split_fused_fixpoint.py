"""Programs of tests/fixes/test_split_fused_fixpoint.py: reshape and permute chains compiled
through a state's backend, kernels run in Triton's interpreter with the backend's launcher
grid, compared with eager; with the addresses of every load and store the kernels emit."""

from __future__ import annotations

import re

from tests.programs import interpreted, interpreted_with_npu_fixes, main

NAME = "split-fused-fixpoint"
_ACCESS = re.compile(r"tl\.(?:load|store)\(\w+ \+ \((?P<address>[^;]*?)\), ")


def _programs() -> dict:
    """label -> (function, input shapes)."""
    return {
        # one flat axis read at two granularities: pointwise, the split leaves a residue
        "permuted-reshape-t": (lambda x: x.view(4, 4, 4, 8).permute(0, 2, 1, 3).reshape(16, 32).t().reshape(-1) * 2,
                               [(512,)]),
        "blocks-unfolded": (lambda x: x.view(4, 4, 4, 4, 4, 64).permute(0, 1, 3, 2, 4, 5).reshape(4, 256, 64) + 1,
                            [(4, 16, 16, 64)]),
        # controls: pointwise without a residue, and reductions over such chains (their
        # indexes keep upstream's one round)
        "pixel-shuffle": (lambda x: __import__("torch").nn.functional.pixel_shuffle(x, 2) + 1, [(2, 16, 32, 32)]),
        "blocks-unfolded-sum": (lambda x: x.view(4, 4, 4, 4, 4, 64).permute(0, 1, 3, 2, 4, 5).reshape(4, 256, 64).sum(1),
                                [(4, 16, 16, 64)]),
        "permuted-row-sum": (lambda x: x.view(16, 4, 256).transpose(1, 2).reshape(16, 1024).sum(-1), [(16384,)]),
        "permuted-column-sum": (lambda x: x.view(16, 4, 256).transpose(1, 2).reshape(16, 1024).sum(0), [(16384,)]),
    }


def addresses(launches) -> list[str]:
    """The address of every load and store in the launched kernels' sources, in order."""
    return [m["address"] for launch in launches for m in _ACCESS.finditer(launch.source)]


def run_all(codegen) -> dict:
    """Each program: equal to eager and the addresses, or the error."""
    import torch

    out = {}
    for label, (fn, shapes) in _programs().items():
        torch.manual_seed(0)
        args = [torch.randn(s) for s in shapes]
        run = interpreted(codegen, fn, *args)
        out[label] = run if "error" in run else {
            "equal": bool(torch.allclose(run["result"], fn(*args), rtol=1e-4, atol=1e-4)),
            "addresses": addresses(run["launches"])}
    return out


def battery(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
