"""Capture, on CPU, the kernels a genuine state generates for a graph, with their launches,
for replay on a GPU (``tests/gpu/genuine_kernel_race.py``).

RunningLossTagger's step counter (``steps.add_(1)`` on a one-element buffer) compiled
through the backend of a self-build at 95c9094da as built: each launch's kernel source, the
grid its launcher computed, its constants, and its arguments (for a pointer: which buffer,
dtype and the contents at the launch; two pointers to one buffer share its index).

    python -m tests.gpu.capture_kernels --torch-npu .cache/site-genuine-95c9094da \\
        --out tests/gpu/genuine_kernels.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def capture(location: str) -> list[dict]:
    """The launches of ``steps.add_(1)`` compiled through the backend at ``location``."""
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    from npu_fixes.tools import host, interpret

    codegen = host.load(location).module("codegen.triton")
    interpret.activate(codegen)
    import torch

    records = []
    original = interpret.InterpretedBinary.run

    def record(self, grid_0, grid_1, grid_2, stream, function, metadata, launch_metadata, enter, exit_,
               *args):
        fn = self.fn
        names = self.argument_names(len(args))
        buffers, arguments = [], []
        for name, arg in zip(names, args, strict=True):
            if hasattr(arg, "data_ptr"):
                ptrs = [b.data_ptr() for b in buffers]
                if arg.data_ptr() not in ptrs:
                    buffers.append(arg)
                    ptrs.append(arg.data_ptr())
                arguments.append({"name": name, "buffer": ptrs.index(arg.data_ptr())})
            else:
                arguments.append({"name": name, "value": arg})
        records.append({
            "kernel": fn.__name__, "source": fn.src, "grid": [int(grid_0), int(grid_1), int(grid_2)],
            "constants": {n: self.constants[n] for i, n in enumerate(fn.arg_names) if i in fn.constexprs},
            "arguments": arguments,
            "buffers": [{"dtype": str(b.dtype).removeprefix("torch."), "contents": b.flatten().tolist()}
                        for b in buffers],
        })
        return original(self, grid_0, grid_1, grid_2, stream, function, metadata, launch_metadata, enter,
                        exit_, *args)

    interpret.InterpretedBinary.run = record
    steps = torch.zeros(())
    with interpret.cpu_device(codegen):
        torch.compile(lambda steps: steps.add_(1))(steps)
    return [{**r, "result_in_interpreter": float(steps)} for r in records]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-npu", required=True, help="a genuine state's site (as built: NPU_FIXES=0)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if os.environ.get("NPU_FIXES") != "0":
        print("run with NPU_FIXES=0: the kernels as the state builds them", file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        json.dump({"torch_npu": os.path.basename(os.path.normpath(args.torch_npu)),
                   "launches": capture(args.torch_npu)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
