"""Start-up cost of npu_fixes, measured side by side in one run.

1. An interpreter that never imports torch: ``python -c pass`` with the autoload ``.pth``
   present vs absent (budget: median at most +1 ms).
2. ``import torch`` with npu_fixes armed (through the ``.pth``, and by ``import npu_fixes``
   first) vs ``import torch`` alone (budget: at most +3 %).

Runs alternate between the variants so that drift hits both alike. The ``.pth`` is
written into this environment's site-packages for the duration and removed afterwards
(left as found if autoload was already enabled).

Usage: python benchmarks/startup.py [--runs 300] [--torch-runs 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from npu_fixes.shim import autoload as _autoload


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compare(variants: dict[str, tuple[list[str], bool]], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall time (s) per variant; each variant is (command, .pth enabled)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, (cmd, with_pth) in variants.items():
            if with_pth:
                _autoload.enable()
            else:
                _autoload.disable()
            samples[name].append(timed(cmd, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--torch-runs", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    py = sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_FIXES")}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    was_enabled = _autoload.is_enabled()
    try:
        bare = compare({"no .pth": ([py, "-c", "pass"], False),
                        "autoload .pth": ([py, "-c", "pass"], True)}, args.runs, env)
        torch = compare({"import torch": ([py, "-c", "import torch"], False),
                         "import torch (.pth armed)": ([py, "-c", "import torch"], True),
                         "import npu_fixes, torch": ([py, "-c", "import npu_fixes, torch"], False)},
                        args.torch_runs, env)
    finally:
        (_autoload.enable if was_enabled else _autoload.disable)()

    lines = [
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}",
        f"interpreter start, {args.runs} alternating runs each (median):",
        f"  without .pth       {bare['no .pth'] * 1e3:8.2f} ms",
        f"  with autoload .pth {bare['autoload .pth'] * 1e3:8.2f} ms",
        f"  difference         {(bare['autoload .pth'] - bare['no .pth']) * 1e3:+8.2f} ms   (budget +1 ms)",
        f"import torch, {args.torch_runs} alternating runs each (median):",
    ]
    base = torch["import torch"]
    for name, value in torch.items():
        lines.append(f"  {name:28s} {value * 1e3:8.1f} ms   ratio {value / base:.3f}")
    lines.append("  budget: ratio at most 1.030")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
