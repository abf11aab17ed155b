"""partial-view-fold (report): partial second views of an x tree left unfolded; needs an upgrade.

- **Defect**: the wheel corrected three things in the linearize pass at once. An x tree read
  through a second view that re-decomposes only part of the basis (BigBird: the basis
  ``[48 x 16, 4096]``, the other view ``64 x 64`` inside the 4096) keeps the second view's
  nodes as tile axes of their own: only a second view covering the whole tree is folded onto
  the basis. A composite index spanning two trees (``x3 + 64*y0``) can become a mapping key,
  which the kernel header then emits as the target of an assignment. Constants emitted before
  a tree is split into several slots keep their singleton shape at the old rank. Symptoms are
  guessed from the code (uncontiguous accesses, a kernel that does not build, a rank
  mismatch); none was reproduced on CPU: the BigBird-style programs of the rsplit battery
  emit the same kernels as the wheel.
- **Where**: ``codegen.triton.NPUTritonScheduling._apply_linearize`` and the fold it calls,
  ``_fold_dual_decomp`` (the wheel: ``_fold_redundant_range_tree_decomposition``).
- **Probe**: the live fold on a stand-in x tree of 262144 with the basis
  ``x1 (64) * x0 (4096)`` and a second view ``x3 (64) * x2 (64)`` of x0's span; defective
  when x2 and x3 stay unmapped. The other two corrections came in the same code and are not
  probed separately.
- **Fix**: none at run time (guard only; no install). The corrections sit inside
  ``_apply_linearize``, one of the largest methods of the backend; only porting the wheel's
  code would make them. The state is reported as ``upgrade-needed``.
"""

from __future__ import annotations

import types

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe

TARGET = "NPUTritonScheduling._apply_linearize"
#: The fold's name before and in the wheel.
FOLDS = ("_fold_redundant_range_tree_decomposition", "_fold_dual_decomp")
UPGRADE = "upgrade torch_npu to the published 2.13.0 wheel or later (no public commit has the fix)"
SYMPTOMS = ("partial alternate views not folded, composite mapping keys emitted as assignment targets, "
            "constants kept at the pre-split rank")


def fold_partial_view(module: types.ModuleType) -> tuple[str, dict[str, str]] | None:
    """The live fold's name and the mapping it gives the stand-in tree's second view (x2,
    x3 inside x0's 4096); None where the class has no fold of alternate views."""
    import sympy
    import torch
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    cls = module.NPUTritonScheduling
    name = next((n for n in FOLDS if hasattr(cls, n)), None)
    if name is None:
        return None
    NS = types.SimpleNamespace
    nodes = [NS(name=n, divisor=sympy.Integer(d), length=sympy.Integer(length))
             for n, d, length in (("x0", 1, 4096), ("x1", 4096, 64), ("x2", 1, 64), ("x3", 64, 64))]
    tree = NS(nodes={n.name: n for n in nodes}, numel=sympy.Integer(262144), is_reduction=False, prefix="x")
    basis = ([sympy.Symbol("x1"), sympy.Symbol("x0")], [64, 4096])
    mapping: dict = {}
    graph = GraphLowering(torch.fx.symbolic_trace(torch.nn.Identity()))
    with V.set_graph_handler(graph):
        getattr(cls, name)(object.__new__(cls), NS(), tree, basis, mapping, {})
    return name, {str(k): str(v) for k, v in mapping.items()}


def probe(module: types.ModuleType) -> Probe:
    """Run the live fold on the stand-in tree: is the second view of x0's span folded?"""
    folded = fold_partial_view(module)
    if folded is None:
        return Probe(False, "the backend has no fold of alternate views: partial-view-fold not judged")
    name, mapping = folded
    if {"x2", "x3"} <= mapping.keys():
        return Probe(False, f"{name} folds a second view of part of the basis onto it: {mapping}")
    return Probe(True, f"{name} leaves a second view of part of the basis (x3 * 64 + x2 inside x0's 4096) "
                       f"as tile axes of their own; with it: {SYMPTOMS} (detected from the live fold on "
                       f"CPU, not reproduced; no run-time repair): {UPGRADE}")


FIX = Fix(
    name="partial-view-fold",
    old_names=("linearize-misc",),
    about=About(
        symptom=(
            "partial alternate views not folded, composite keys as assignment targets, constants at the rank "
            "before a split (symptoms guessed from the code, none reproduced)"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=None,
    repairable=False,
)
