"""Programs of tests/test_autoload.py."""

from __future__ import annotations

import sys

from tests.programs import main


def add_site_twice(site_dir: str) -> dict:
    """Run the .pth files of ``site_dir`` twice (a .pth may be executed twice); returns the
    autoload finders then in sys.meta_path and whether npu_fixes and wrapt were imported."""
    import site

    site.addsitedir(site_dir)
    site.addsitedir(site_dir)
    finders = [f for f in sys.meta_path if getattr(f, "_npu_fixes_autoload", False)]
    return {"finders": len(finders), "npu_fixes": "npu_fixes" in sys.modules, "wrapt": "wrapt" in sys.modules}


def arms_on_import_torch(site_dir: str) -> dict:
    """Other imports leave the autoload alone; ``import torch`` arms npu_fixes and makes
    the finder inert."""
    before = add_site_twice(site_dir)
    import json  # noqa: F401  (other imports leave it alone)

    mid = "npu_fixes" in sys.modules
    import torch  # noqa: F401

    import npu_fixes

    after = {"mid": mid, "npu_fixes": "npu_fixes" in sys.modules, "armed": npu_fixes.registry()._armed,
             "inert": [f.done for f in sys.meta_path if getattr(f, "_npu_fixes_autoload", False)]}
    return {"before": before, "after": after}


def tracer_fired(site_dir: str) -> dict:
    """Whether another .pth's wrapt post-import hook on torch fired at ``import torch``."""
    before = add_site_twice(site_dir)
    import torch  # noqa: F401

    return {"before": before, "after": getattr(sys, "tracer_fired", False)}


def npu_fixes_after_torch(site_dir: str) -> dict:
    """Whether npu_fixes is imported once torch is."""
    before = add_site_twice(site_dir)
    import torch  # noqa: F401

    return {"before": before, "after": "npu_fixes" in sys.modules}


def without_npu_fixes(site_dir: str) -> dict:
    """npu_fixes not importable (uninstalled, .pth left behind): torch's version once it is
    imported."""
    sys.modules["npu_fixes"] = None
    before = add_site_twice(site_dir)
    import torch

    return {"before": before, "after": torch.__version__}


def example_sitecustomize() -> list[bool]:
    """Whether npu_fixes is imported after ``import sitecustomize`` and after ``import torch``."""
    import sitecustomize  # noqa: F401

    before = "npu_fixes" in sys.modules
    import torch  # noqa: F401

    return [before, "npu_fixes" in sys.modules]


if __name__ == "__main__":
    main(globals())
