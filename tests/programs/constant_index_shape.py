"""Programs of tests/fixes/test_constant_index_shape.py."""

from __future__ import annotations

import itertools

from tests.programs import host_load, main, method_before_and_after
from tests.programs.rank_mismatch import generated

TREES = {"x": [("x", 0, False)], "x+r": [("x", 0, False), ("r0_", 1, True)],
         "y+x+r": [("y", 0, False), ("x", 1, False), ("r0_", 2, True)]}
COPY = {"none": None, "(1, 1)": (1, 1), "str": "tmp5"}
MASKS = {"none": None, "axis": ("tmp9", ["x0mask"]), "no-axis": ("tmp8", [])}
# A scalar read by constant index in a reduction, over a long and a short (persistent)
# reduction and a row reduction.
PROGRAMS = {
    "sum-x+x[3]": (lambda x: (x + x[3]).sum(), (4096,)),
    "small-sum-x+x[3]": (lambda x: (x + x[3]).sum(), (64,)),
    "rows-x+x[0,0]": (lambda x: (x + x[0, 0]).sum(dim=1), (4, 512)),
}


class Mask:
    """A load mask: its name and mask variables."""

    def __init__(self, name, mask_vars):
        from torch.utils._ordered_set import OrderedSet

        self.name, self.mask_vars = name, OrderedSet(mask_vars)

    def __str__(self):
        return self.name


def stand_ins(K):
    """Leaf: a subclass of ``K`` (the live NPUTritonKernel) that only skips the index
    preparation and mask filtering, the same at every state; CannedLeaf: one whose base
    ``TritonKernel.indexing`` returns ``canned["result"]``. Returns (Leaf, CannedLeaf, canned)."""
    from torch._inductor.codegen.triton import TritonKernel

    canned = {}

    class Leaf(K):
        def prepare_indexing(self, index):
            return index

        def filter_masks(self, mask_vars):
            pass

    class Canned(TritonKernel):
        def indexing(self, index, **kwargs):
            return canned["result"]

    class CannedLeaf(K, Canned):
        def filter_masks(self, mask_vars):
            pass

    return Leaf, CannedLeaf, canned


def tree(prefix, dim, red):
    """A range tree with what ``indexing`` reads."""
    from types import SimpleNamespace as NS

    return NS(prefix=prefix, tensor_dim=dim, is_reduction=red, var_list=[], nodes={},
              tree_node_mapping={}, is_loop=False, mask_name=lambda: prefix + "mask",
              block_size_str=lambda: prefix.upper() + "BLOCK")


def kernel(cls, trees, load_mask, linearize):
    """A stand-in kernel of ``cls`` over the ``TREES`` case ``trees``."""
    import torch

    k = object.__new__(cls)
    k.range_trees = [tree(*t) for t in TREES[trees]]
    k._load_mask = None if load_mask is None else Mask(*load_mask)
    k.inside_reduction, k.no_x_dim, k.fixed_config, k.is_combo_kernel = True, False, None, False
    k._npu_linearize, k._index_dtype, k.range_tree_nodes = linearize, torch.int32, {}
    return k


def record(k, index, **kwargs):
    """The fields of ``k.indexing(index, **kwargs)``, or the exception it raises."""
    from types import SimpleNamespace as NS

    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    graph = NS(sizevars=SizeVarAllocator())
    try:
        with V.set_graph_handler(graph), V.set_kernel_handler(k):
            r = k.indexing(index, **kwargs)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    return [type(r).__name__, r.index_str, sorted(map(str, r.mask_vars)), r.expand_str,
            list(r.expand_shape) if r.expand_shape is not None else None, str(r.index)]


def battery(mod, classes) -> dict:
    """The live ``NPUTritonKernel.indexing`` over PyTorch's real ``TritonKernel.indexing``
    on Leaf kernels (``classes`` from ``stand_ins``), for constant and Identity indexes x
    kernel rank x copy_shape x override_mask x load mask x linearize; plus symbolic indexes
    over a canned base result (the NPU post-pass on its own). Each case records the fields
    of the result or the exception."""
    from types import SimpleNamespace as NS
    from unittest import mock

    import sympy
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.utils import sympy_index_symbol as isym
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet
    from torch.utils._sympy.functions import Identity

    leaf, canned_leaf, canned = classes
    indexes = {"0": sympy.Integer(0), "7": sympy.Integer(7), "Identity(3)": Identity(sympy.Integer(3))}
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for (t, _), (i, index), (c, copy), ov, (m, mask) in itertools.product(
                    TREES.items(), indexes.items(), COPY.items(), (None, "xmask"), MASKS.items()):
                out[f"lin={lin}|{t}|{i}|copy={c}|override={ov}|mask={m}"] = record(
                    kernel(leaf, t, mask, lin), index, copy_shape=copy, override_mask=ov)
            # canned base results: symbolic indexes, and a base that is already rank one
            x0, r0 = isym("x0"), isym("r0_0")
            for label, base, index in [
                    ("x0", ("x0", ["x0mask"], "[XBLOCK, 1]", False, x0, ("XBLOCK", 1)), x0),
                    ("x0+r0", ("x0 + r0_0", ["x0mask", "r0_mask"], "[XBLOCK, R0_BLOCK]", True,
                               x0 + r0, ("XBLOCK", "R0_BLOCK")), x0 + r0),
                    ("0-rank-one", ("tl.full([1], 0, tl.int32)", [], "[1]", False, sympy.Integer(0), (1,)),
                     sympy.Integer(0))]:
                s, mv, e, h, ix, shape = base
                canned["result"] = mod.IndexingOptions(s, OrderedSet(mv), e, h, ix, expand_shape=shape)
                out[f"lin={lin}|canned|{label}"] = record(kernel(canned_leaf, "x+r", None, lin), index)
                if label == "0-rank-one":  # nothing to change: the very same object comes back
                    k = kernel(canned_leaf, "x+r", None, lin)
                    with V.set_graph_handler(NS(sizevars=SizeVarAllocator())), V.set_kernel_handler(k):
                        out[f"lin={lin}|canned|{label}|same"] = k.indexing(index) is canned["result"]
    return out


def indexing(location: str, genuine: bool) -> dict:
    """Probe, battery, install where the probe says so (as the registry does: a fixed state
    is never patched), probe again, battery again, undo; at a genuine state then the
    kernels of PROGRAMS generated before and after the fix (test_rank_mismatch's harness)."""
    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import constant_index_shape as fix

    K = mod.NPUTritonKernel
    classes = stand_ins(K)
    result = method_before_and_after(fix, mod, K, "indexing", lambda: battery(mod, classes))
    if genuine:
        result["codegen"] = generated(mod, PROGRAMS, fix)
    return result


if __name__ == "__main__":
    main(globals())
