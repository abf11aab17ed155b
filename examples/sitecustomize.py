"""Example ``sitecustomize.py``: arm npu_fixes in every process that imports torch.

For setups that already manage a ``sitecustomize.py`` instead of using
``npu-fixes autoload enable``. It does not import npu_fixes itself (that waits until
``torch`` starts importing): it runs the same small finder that the ``.pth`` line runs.
"""

import importlib.util
from pathlib import Path


def _arm_npu_fixes() -> None:
    spec = importlib.util.find_spec("npu_fixes")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return
    source = Path(next(iter(spec.submodule_search_locations))) / "shim" / "autoload.py"
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # stdlib-only module
    namespace["arm"]()


_arm_npu_fixes()
