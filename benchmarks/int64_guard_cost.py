"""What the guard int64-past-int32 costs a launch, measured side by side on a CUDA GPU.

The kernel of ``tests/gpu/runtime_defects.py`` (an int64 in/out buffer, an int64 input and a
mask, compiled for ``*i32``) launched through boundary-downcast's wrapper (``wrap_launcher``),
without and with the guard's layer (``checking`` with a ``BoundsWatch``), in two ways: the same
int64 input at every launch (as one step's labels or ids feed many kernels: checked once, then
looked up), and a new check at every launch (the input written in place before each launch, in
both variants, so that each launch's input is new to the watch: one min/max and a non-blocking
copy of it). Each variant runs ``--launches`` launches back to back, the device synchronised
once at the end, median of ``--repeats`` such runs; the variants alternate, so that all see the
same machine. Prints microseconds per launch and the ratios for each size.

    python benchmarks/int64_guard_cost.py [--launches 2000] [--repeats 7]

This measures a CUDA GPU, not an NPU: on Ascend a launch's host cost differs, and how much of a
training step the guard takes depends on how many new int64 inputs a step has.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from npu_fixes.fixes.boundary_downcast import wrap_launcher  # noqa: E402
from npu_fixes.fixes.int64_past_int32 import BoundsWatch, checked_arguments, checking  # noqa: E402
from npu_fixes.fixes.shared.narrowing import boundary_plan  # noqa: E402
from tests.gpu import runtime_defects as rd  # noqa: E402

SHAPES = ((4, 96), (256, 1024), (4096, 1024))


def variants(shape: tuple[int, int]) -> dict:
    io, in0, cond = rd._inputs("cuda", shape)
    launcher = rd.compiled_launcher(io, in0)
    wrapped = wrap_launcher(rd.DOWNCAST_MODULE, launcher, rd.DOWNCAST_ARGS, rd.MUTATED)
    plan = boundary_plan(rd.DOWNCAST_MODULE._DTYPE_DOWNCAST_MAP, launcher._npu_def_args, rd.DOWNCAST_ARGS,
                         rd.MUTATED)
    watch = BoundsWatch()
    guarded = checking(wrapped, launcher._npu_def_args, checked_arguments(plan), "halve_where_kernel",
                       weakref.WeakSet(), watch)  # every input checked: none allocated by a compiled graph
    out = torch.empty_like(io)
    args = (io, in0, cond, out, io.numel())

    def fresh(launch):
        def run():
            in0.add_(0)  # a new version: the watch checks it again
            launch(*args)
        return run

    return {"without": lambda: wrapped(*args), "guard, same input": lambda: guarded(*args),
            "without, input written": fresh(wrapped), "guard, new check": fresh(guarded)}, watch


def seconds(launch, launches: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        launch()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured", file=sys.stderr)
        return 2
    print(f"{platform.node()}: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{args.launches} launches x {args.repeats} repeats")
    print(f"{'shape':>12} {'without':>8} {'guard':>8} {'ratio':>6}   {'written':>8} {'guard':>8} {'ratio':>6}"
          "   (us/launch; left: the same input, right: every launch a new check)")
    for shape in SHAPES:
        runs, watch = variants(shape)
        for launch in runs.values():  # warm-up: compile, allocator
            seconds(launch, 20)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, launch in runs.items():
                times[name].append(seconds(launch, args.launches) / args.launches * 1e6)
            watch.settle()
        same, guard, written, checked = (statistics.median(times[name]) for name in runs)
        print(f"{'x'.join(map(str, shape)):>12} {same:8.1f} {guard:8.1f} {guard / same:6.2f}   "
              f"{written:8.1f} {checked:8.1f} {checked / written:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
