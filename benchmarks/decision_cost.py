"""What npu_fixes' decisions cost a process when the backend loads, cold and warm, side by side.

For each torch_npu given, fresh interpreters host-load its backend (``npu_fixes.tools.host``) in
three ways, one after another in each round: npu_fixes off (``NPU_FIXES=0``); armed with an empty
verdict cache (cold: every fix probed, as the first process of an install); armed with the
cache that a cold run filled (warm: every later process, rank and compile worker). Each run
reports the whole load and the time spent inside npu_fixes' import callbacks (the decisions:
probes or cached verdicts, and installing the repairs). Prints the median of ``--rounds``
rounds per way and the decisions' share.

    python benchmarks/decision_cost.py NAME=PATH [NAME=PATH ...] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: One measured process: arm, time the registry's import callbacks, host-load, report.
PROGRAM = """
import json, os, sys, time
import torch
import npu_fixes
from npu_fixes.tools import host
spent = [0.0]
registry = npu_fixes.registry()
watcher = registry._watcher
if watcher is not None:
    decide = watcher.callback
    def timed(module):
        start = time.perf_counter()
        try:
            return decide(module)
        finally:
            spent[0] += time.perf_counter() - start
    watcher.callback = timed
start = time.perf_counter()
host.load(sys.argv[1])
load = time.perf_counter() - start
states = [r.state.value for r in registry.records.values()]
print(json.dumps({"load": load, "decisions": spent[0], "applied": states.count("applied")}))
"""


def measure(location: str, env: dict[str, str]) -> dict:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PYTHONPATH=str(REPO), **env)
    proc = subprocess.run([sys.executable, "-c", PROGRAM, location], capture_output=True, text=True, env=env,
                          check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"median of {args.rounds} rounds; ms")
    print(f"{'torch_npu':>14} {'way':>5} {'applied':>8} {'load':>8} {'decisions':>10}")
    for spec in args.backends:
        name, _, location = spec.partition("=")
        with tempfile.TemporaryDirectory() as warm_cache:
            measure(location, {"NPU_FIXES_CACHE_DIR": warm_cache})  # fills the warm cache
            runs: dict[str, list[dict]] = {"off": [], "cold": [], "warm": []}
            for _ in range(args.rounds):
                with tempfile.TemporaryDirectory() as cold_cache:
                    runs["off"].append(measure(location, {"NPU_FIXES": "0"}))
                    runs["cold"].append(measure(location, {"NPU_FIXES_CACHE_DIR": cold_cache}))
                    runs["warm"].append(measure(location, {"NPU_FIXES_CACHE_DIR": warm_cache}))
        for way, results in runs.items():
            load = statistics.median(r["load"] for r in results) * 1e3
            decisions = statistics.median(r["decisions"] for r in results) * 1e3
            print(f"{name:>14} {way:>5} {results[0]['applied']:8d} {load:8.0f} {decisions:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
