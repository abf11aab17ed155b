"""te-parallel-ce: Transformer Engine builds without ``parallel_cross_entropy`` get ours.

- **Defect**: Transformer Engine on NPU ships no ``transformer_engine.pytorch.parallel_cross_entropy``
  (upstream's is a CUDA Triton kernel), so Megatron's fused vocabulary-parallel cross entropy
  (``--cross-entropy-loss-fusion --cross-entropy-fusion-impl te``) fails with
  ``AttributeError``/``ImportError``.
- **Where**: ``transformer_engine.pytorch`` and its ``cross_entropy`` submodule, which
  Megatron imports the function from.
- **Probe**: is ``parallel_cross_entropy`` missing from ``transformer_engine.pytorch``? (an
  attribute look-up).
- **Fix**: add :func:`npu_fixes.ops.parallel_cross_entropy` (same signature and semantics,
  vocabulary parallelism included) to both modules; where the package has no
  ``cross_entropy`` submodule, a stand-in one holding just the function. A build that has
  its own function is left untouched. ``npu_fixes.undo()`` removes everything added.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from packaging.specifiers import SpecifierSet

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

ATTR = "parallel_cross_entropy"
SUBMODULE = "cross_entropy"


def probe(module: types.ModuleType) -> Probe:
    """Defective when the module has no ``parallel_cross_entropy``."""
    if hasattr(module, ATTR):
        return Probe(False, f"{module.__name__}.{ATTR} exists: Transformer Engine's own is kept")
    return Probe(True, f"{module.__name__} has no {ATTR}: npu_fixes.ops.{ATTR} provided")


def _submodule(package: types.ModuleType) -> types.ModuleType | None:
    """The package's ``cross_entropy`` submodule (imported if need be), or None."""
    name = f"{package.__name__}.{SUBMODULE}"
    if name in sys.modules:
        return sys.modules[name]
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # not a package
        found = False
    return importlib.import_module(name) if found else None


def install(module: types.ModuleType, patcher: Patcher) -> None:
    from ..ops import parallel_cross_entropy

    patcher.add(module, ATTR, parallel_cross_entropy)
    sub = _submodule(module)
    if sub is None:
        name = f"{module.__name__}.{SUBMODULE}"
        sub = types.ModuleType(name, f"npu_fixes stand-in: {name} holding {ATTR} only")
        patcher.set_item(sys.modules, name, sub)
        patcher.add(module, SUBMODULE, sub)
    if not hasattr(sub, ATTR):
        patcher.add(sub, ATTR, parallel_cross_entropy)


FIX = Fix(
    name="te-parallel-ce",
    about=About(
        symptom=(
            "Megatron's `cross_entropy_fusion_impl='te'` fails: Transformer Engine on NPU has no "
            "`parallel_cross_entropy`"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="`cross_entropy_fusion_impl='native'`",
    ),
    module="transformer_engine.pytorch",
    targets=(),
    provides=(ATTR,),
    probe=probe,
    install=install,
    torch_window=SpecifierSet(">=2.4"),
    torch_npu_window=SpecifierSet(""),
)
