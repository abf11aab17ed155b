"""Which torch_npu code the sweep runs at each backend: every ``torch_npu`` module loaded after
samples ran through it as the sweep's workers run them (host-loaded, kernels in Triton's
interpreter, as built), each with the digest of its file, compared across the backends given.
Two backends whose loaded modules are the same files run the same code in the sweep, so each
sample's outcome is the same at both (the corpus is seeded).

Usage: python scripts/sweep_code_digest.py NAME=PATH NAME=PATH ... [--samples ID,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Samples that reach the loader's decompositions, the backend's lowerings, codegen, launchers
#: and the fallbacks: generated programs, reductions, a backward, dynamic shapes, fallback ops.
SAMPLES = ("gen:5", "gen:42", "gen:7", "opinfo:sum:-:int64:fwd:static:0",
           "opinfo:nn.functional.gelu:-:float32:bwd:static:0", "opinfo:amax:-:float32:fwd:dynamic:1",
           "opinfo:nn.functional.embedding_bag:-:float32:fwd:static:0",
           "opinfo:native_layer_norm:-:bfloat16:bwd:static:0", "opinfo:index_put:-:float32:fwd:static:0",
           "opinfo:sort:-:float32:fwd:static:0", "opinfo:diagonal_scatter:-:float32:fwd:static:0",
           "opinfo:nn.functional.dropout:-:float32:fwd:static:0")


def loaded(location: str, samples: list[str]) -> dict[str, str]:
    """Module name -> file digest of the torch_npu modules loaded after ``samples`` ran
    through the backend at ``location`` (in a fresh interpreter)."""
    code = f"""
import hashlib, json, sys
from npu_fixes.tools import accuracy, corpus, interpret, sweep
accuracy.configure(None)
codegen = accuracy.load_interpreted({location!r}, False)
order = sweep.ProgramOrder()
with interpret.cpu_device(codegen, order) as launches:
    for sample_id in {samples!r}:
        sweep.run_sample(corpus.sample(sample_id), launches, order)
        del launches[:]
print(json.dumps({{name: hashlib.sha256(open(m.__file__, "rb").read()).hexdigest()[:16]
                  for name, m in sorted(sys.modules.items())
                  if name.startswith("torch_npu") and getattr(m, "__file__", None)}}))
"""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", NPU_FIXES="0")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=900)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{location}: no result within 900 s (choose other --samples)") from None
    if proc.returncode != 0:
        raise SystemExit(f"{location}: exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="+", help="NAME=PATH: an install, a source tree or a .whl")
    parser.add_argument("--samples", default=",".join(SAMPLES), help="comma-separated sample ids")
    args = parser.parse_args(argv)
    if not all("=" in b for b in args.backends):
        parser.error("each backend is NAME=PATH")
    found = {name: loaded(path, args.samples.split(",")) for name, path in
             (b.split("=", 1) for b in args.backends)}
    first, *others = found
    for name in others:
        names = set(found[first]) | set(found[name])
        differ = sorted(m for m in names if found[first].get(m) != found[name].get(m))
        print(f"{name} against {first}: {len(names)} modules loaded, "
              f"{len(differ)} differ{': ' + ', '.join(differ) if differ else ''}")
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
