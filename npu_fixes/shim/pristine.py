"""Probes leave the process as they found it.

A probe that builds a real ``GraphLowering`` makes Inductor register its default backends
for every device type (``init_backend_registration``, cached once per process), and the
backend code it runs may import more of ``torch_npu``. Either would change what the user's
own code later sees: a plugin that registers its backend only where none is registered
would be skipped. :func:`left_as_found` puts the registries (and the registration cache)
back and forgets the ``torch_npu`` modules the probe imported.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator

COMMON = "torch._inductor.codegen.common"
#: The device registries of ``torch._inductor.codegen.common`` that registration fills.
REGISTRIES = ("device_codegens", "device_op_overrides_dict", "custom_backend_passes",
              "custom_backend_codegen_configs")
PACKAGE = "torch_npu"


def _registries() -> tuple[dict[str, dict], bool]:
    """Copies of the registries and whether the default backends were registered (empty and
    False where Inductor's codegen is not imported)."""
    common = sys.modules.get(COMMON)
    if common is None:
        return dict.fromkeys(REGISTRIES, {}), False
    info = getattr(common.init_backend_registration, "cache_info", None)
    return ({name: dict(getattr(common, name)) for name in REGISTRIES},
            info is None or info().currsize > 0)


@contextlib.contextmanager
def left_as_found(keep: Iterable[str] = ()) -> Iterator[None]:
    """Inside, anything may register or import; after it, the registries hold what they held
    and ``torch_npu`` modules imported inside are gone from ``sys.modules`` (and from their
    package), except the names in ``keep`` (modules whose import npu_fixes acts on)."""
    saved, registered = _registries()
    modules = set(sys.modules)
    try:
        yield
    finally:
        common = sys.modules.get(COMMON)
        if common is not None:
            for name, content in saved.items():
                live = getattr(common, name)
                live.clear()
                live.update(content)
            if not registered:  # registration runs again when Inductor first needs it
                common.init_backend_registration.cache_clear()
        keep = set(keep)
        imported = {n for n in sys.modules.keys() - modules - keep if n.partition(".")[0] == PACKAGE}
        for name in [n for n in sys.modules if n in imported] if imported else ():  # in import order
            module = sys.modules.pop(name)
            parent, _, child = name.rpartition(".")
            if getattr(sys.modules.get(parent), child, None) is module:
                delattr(sys.modules[parent], child)
