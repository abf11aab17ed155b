"""Programs of tests/test_host.py."""

from __future__ import annotations

import sys

from tests.programs import host_load, main, standalone_host


def report(location: str) -> dict:
    """What the host load of ``location`` gives: version, backend, modules, errors, the bare
    parent package, the device and triton-ascend language stand-ins, and whether bytecode writing is back as it was."""
    loaded = host_load(location)
    backend = standalone_host().BACKEND
    return {
        "version": loaded.version,
        "has_backend": loaded.has_backend,
        "modules": sorted(loaded.modules),
        "errors": loaded.errors,
        "bare_parent": sys.modules["torch_npu"].__file__ is None,
        "device_stand_in": ("stand-in" in (sys.modules.get(backend + ".device").__doc__ or "")
                            if loaded.has_backend else None),
        "language_stand_in": "stand-in" in (getattr(sys.modules["triton.language.extra"], "cann", None).__doc__
                                            or "") if loaded.has_backend else None,
        "version_error": loaded.version_error,
        "dont_write_bytecode": sys.dont_write_bytecode,
    }


if __name__ == "__main__":
    main(globals())
