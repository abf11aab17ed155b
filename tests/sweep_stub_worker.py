"""A stand-in for the sweep's worker process (``npu_fixes.tools.sweep``), driven by its
sample ids: ``ok-N`` answers pass, ``noise-N`` prints a line that is no result first,
``crash`` exits with a message, ``hang`` sleeps (its process id written to the file
``PID_FILE`` names, if set), ``refuse`` exits at once (before any result) when it is the first
id, ``env`` passes with ``NPU_FIXES`` as it finds it. Like the real worker, it ends when the
sweep that started it is gone."""

from __future__ import annotations

import json
import os
import sys
import time

from npu_fixes.tools.sweep import end_with_the_sweep

#: Where ``hang`` writes its process id, if set.
PID_FILE = "SWEEP_STUB_PID_FILE"


def main(spec_path: str) -> None:
    end_with_the_sweep()
    with open(spec_path) as f:
        ids = json.load(f)["ids"]
    if ids[0] == "refuse":
        sys.exit("cannot load the backend here")
    for sample_id in ids:
        if sample_id == "crash":
            print("Segmentation fault in the kernel", file=sys.stderr, flush=True)
            sys.exit(139)
        if sample_id == "hang":
            if os.environ.get(PID_FILE):
                with open(os.environ[PID_FILE], "w") as f:
                    f.write(str(os.getpid()))
            time.sleep(60)
        if sample_id.startswith("noise"):
            print("a native library says hello", flush=True)
        record = {"id": sample_id, "outcome": "pass", "kernels": 1}
        if sample_id == "env":
            record["detail"] = os.environ.get("NPU_FIXES", "unset")
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
