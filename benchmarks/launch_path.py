"""What npu_fixes' layers add to a kernel launch's host time, on CPU, side by side per state.

For each torch_npu given, a fresh interpreter host-loads the backend as built (``NPU_FIXES=0``)
and builds, with the live ``NPUTritonCompileResult.make_launcher`` and the live
``_wrap_launcher_with_downcast``, the launcher of a stand-in kernel
``(in_out_ptr0, in_ptr0, out_ptr0, xnumel)`` whose three pointers are int64 narrowed to int32
(as the autotuner builds each launcher, in the launch layout of triton-ascend 3.2, the users'
compiler); its binary's runner only records the grid, so what is timed is the host's path to a
launch. Then npu_fixes is applied to the same loaded code and the
launcher built again: every layer npu_fixes puts there at that state (the grid fixes, the
boundary wrapper's repairs, the int64 guard). The two launchers run ``--launches`` launches in
alternating blocks, ``--rounds`` times, with the same int64 inputs (as one step's index tensors
feed many kernels). Prints the median microseconds per launch of each and the difference.

    python benchmarks/launch_path.py NAME=PATH [NAME=PATH ...] [--launches 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: One state in one process: build both launchers, time them in alternating blocks.
PROGRAM = """
import inspect, json, os, statistics, sys, time
from unittest import mock
import torch
from npu_fixes.shim.scoped import with_globals
from npu_fixes.shim.stand_in_kernel import CORE_COUNT, stand_in_binary, stand_in_result
from npu_fixes.tools import host

location, launches, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
heuristics = host.load(location).module("npu_triton_heuristics")
names = ["in_out_ptr0", "in_ptr0", "out_ptr0", "xnumel", "XBLOCK"]
downcast = dict.fromkeys(names[:3], "*i64")
meta = {"grid_type": "Grid1D", "npu_num_x_nodes": 1, "mutated_arg_names": ["in_out_ptr0"]}

def build():
    result = stand_in_result(heuristics, stand_in_binary(names, [4]), {"XBLOCK": 128}, meta)
    cls = type(result)
    make = with_globals(inspect.getattr_static(cls, "make_launcher"), {CORE_COUNT: lambda: 40})
    with mock.patch("torch._inductor.utils.triton_version_uses_attrs_dict", lambda: False):  # 3.2's layout
        launcher = make.__get__(result, cls)()
    return heuristics._wrap_launcher_with_downcast(launcher, downcast, {"in_out_ptr0"}), result

as_built, result_built = build()
os.environ.pop("NPU_FIXES")
import npu_fixes
npu_fixes.apply()
applied = [r.name for r in npu_fixes.status() if r.state.value in ("applied", "guarded", "upgrade-needed")]
with_fixes, result_fixed = build()
io, inp, out = (torch.arange(384, dtype=torch.int64).reshape(4, 96) for _ in range(3))

def block(launcher):
    start = time.perf_counter()
    for _ in range(launches):
        launcher(io, inp, out, 384, stream=None)
    return (time.perf_counter() - start) / launches * 1e6

times = {"as built": [], "with npu_fixes": []}
for launcher in (as_built, with_fixes):
    block(launcher)
for _ in range(rounds):
    times["as built"].append(block(as_built))
    times["with npu_fixes"].append(block(with_fixes))
grids = [result_built.kernel.run.grids[-1], result_fixed.kernel.run.grids[-1]]
print(json.dumps({k: statistics.median(v) for k, v in times.items()} | {"grids": grids, "applied": applied}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.launches} launches a block, median of {args.rounds} blocks; us per launch")
    print(f"{'torch_npu':>14} {'as built':>9} {'npu_fixes':>10} {'added':>7}  layers applied at this state")
    env = dict(os.environ, NPU_FIXES="0", TORCH_DEVICE_BACKEND_AUTOLOAD="0", NPU_FIXES_VERDICT_CACHE="0",
               PYTHONPATH=str(REPO))
    for spec in args.backends:
        name, _, location = spec.partition("=")
        proc = subprocess.run([sys.executable, "-c", PROGRAM, location, str(args.launches), str(args.rounds)],
                              capture_output=True, text=True, env=env)
        if proc.returncode:
            print(f"{name}: the measuring process failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
            return 1
        res = json.loads(proc.stdout.splitlines()[-1])
        built, fixed = res["as built"], res["with npu_fixes"]
        print(f"{name:>14} {built:9.2f} {fixed:10.2f} {fixed - built:7.2f}  {len(res['applied'])} fixes; "
              f"grid {res['grids'][0]} as built, {res['grids'][1]} with npu_fixes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
