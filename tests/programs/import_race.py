"""Programs of tests/test_import_race.py: threads importing the backend package and its
submodules at the same time, with npu_fixes armed."""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.programs import main

PACKAGE = "torch_npu._inductor.triton_experimental"
#: The stand-in backend: a package whose ``__init__`` imports its submodules slowly (as the
#: real one does, through its lowering and codegen), and the modules that hold fix targets.
STAND_IN = {
    "torch_npu/__init__.py": "",
    "torch_npu/_inductor/__init__.py": "",
    "torch_npu/_inductor/triton_experimental/__init__.py":
        "import time\ntime.sleep(0.05)\nfrom . import config\ntime.sleep(0.05)\nfrom . import lowering\n",
    "torch_npu/_inductor/triton_experimental/config.py": "import time\ntime.sleep(0.02)\n",
    "torch_npu/_inductor/triton_experimental/lowering.py": "from . import config\n",
    "torch_npu/_inductor/triton_experimental/overrides.py": "from . import config\n",
    "torch_npu/_inductor/triton_experimental/npu_triton_heuristics.py": "import json\n",
    "torch_npu/_inductor/triton_experimental/codegen/__init__.py": "",
    "torch_npu/_inductor/triton_experimental/codegen/triton.py": "from .. import config\n",
}
#: What the threads import: the package and the modules that hold fix targets.
NAMES = (PACKAGE, *(f"{PACKAGE}.{m}" for m in ("lowering", "overrides", "npu_triton_heuristics",
                                                 "codegen.triton")))


def write_stand_in(root: Path) -> None:
    for rel, text in STAND_IN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def forget_stand_in() -> None:
    for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
        del sys.modules[name]


def race(threads: int, rounds: int, timeout: float, arm: bool, site_dir: str | None = None) -> dict:
    """``rounds`` rounds of ``threads`` threads, each importing one of ``NAMES`` (every
    order of them in turn, staggered by a few ms) into a fresh stand-in backend, with
    npu_fixes armed (``arm``: by ``import npu_fixes``, or where ``site_dir`` is given by
    its autoload ``.pth`` there, a first-round thread importing torch) or not. Returns the
    rounds that did not finish within ``timeout`` seconds (their threads are left behind as
    daemons), the rounds run and the import errors seen (importlib's detected lock cycles
    apart: ``cycles``)."""
    import importlib

    if site_dir:
        import site

        site.addsitedir(site_dir)
    elif arm:
        import npu_fixes  # noqa: F401  (arms the import hooks)

    root = Path(tempfile.mkdtemp(prefix="npu-fixes-race-"))
    write_stand_in(root)
    sys.path.insert(0, str(root))
    orders = itertools.cycle(itertools.permutations(NAMES, threads))
    hung, errors, cycles = [], [], []
    for index in range(rounds):
        forget_stand_in()
        importlib.invalidate_caches()
        order = (("torch",) if site_dir and index == 0 else ()) + next(orders)
        start = threading.Barrier(len(order))

        def run(name: str, delay: float, start: threading.Barrier = start) -> None:
            start.wait()
            time.sleep(delay)
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - recorded, the round goes on
                # importlib's own lock-cycle detection: a thread that imports a submodule
                # holds its lock while it imports the package, whose code imports that
                # submodule in another thread. CPython raises it with or without npu_fixes.
                seen = cycles if type(exc).__name__ == "_DeadlockError" else errors
                seen.append(f"{name}: {type(exc).__name__}: {exc}")

        workers = [threading.Thread(target=run, args=(name, 0.01 * i), daemon=True)
                   for i, name in enumerate(order)]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if any(worker.is_alive() for worker in workers):
            hung.append({"round": index, "order": list(order)})
            break  # the import lock stays taken: nothing more can import
    return {"rounds": index + 1, "hung": hung, "errors": errors, "cycles": len(cycles),
            "armed": "npu_fixes" in sys.modules and sys.modules["npu_fixes"].registry()._armed}


def race_and_exit(**kwargs) -> None:
    """:func:`race`, its result printed, then exit at once: a deadlocked thread would keep
    the interpreter from ever shutting down."""
    import json

    print(json.dumps(race(**kwargs)), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(globals())
