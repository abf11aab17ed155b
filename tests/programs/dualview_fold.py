"""Programs of tests/fixes/test_dualview_fold.py."""

from __future__ import annotations

from tests.programs import host_load, main

NAME = "_fold_dualview_reduction_index"


class Node:
    """A range-tree node: name, divisor, length."""

    def __init__(self, name, divisor, length):
        import sympy

        self.name, self.divisor, self.length = name, sympy.Integer(divisor), sympy.Integer(length)

    def symbol(self):
        from torch._inductor.utils import sympy_index_symbol as isym

        return isym(self.name)


class PNode(Node):
    """A node with what ``prepare_indexing`` asks of it."""

    def precomputed_args(self):
        return []

    def codegen(self):
        pass


def kernel(spec, inside=True):
    """A stand-in kernel over ``spec`` (tree prefix -> nodes)."""
    from types import SimpleNamespace as NS

    trees = [NS(is_reduction=name.startswith("r"), nodes={n.name: n for n in nodes})
             for name, nodes in spec.items()]
    return NS(inside_reduction=inside, range_trees=trees)


def cases() -> tuple[dict, dict]:
    """The hf_DistilBert tree spec, and label -> (tree spec, address, inside_reduction)."""
    import sympy
    from torch._inductor.utils import sympy_index_symbol as isym

    bert = {"x": [Node("x0", 1, 768)],
            "r0_": [Node("r0_1", 1, 2048), Node("r0_2", 1, 512), Node("r0_3", 512, 4)]}
    deep = {"r0_": [Node("r0_1", 1, 4096), Node("r0_2", 1, 16), Node("r0_3", 16, 16),
                    Node("r0_4", 256, 16)]}
    two = {"r0_": bert["r0_"], "r1_": [Node("r1_1", 1, 64), Node("r1_2", 1, 8), Node("r1_3", 8, 8)]}
    r1, r2, r3, r4, x0 = (isym(n) for n in ("r0_1", "r0_2", "r0_3", "r0_4", "x0"))
    s2, s3 = (isym(n) for n in ("r1_2", "r1_3"))
    return bert, {
        "distilbert": (bert, r2 + 512 * r3, True),
        "with-x": (bert, r2 + 512 * r3 + 2048 * x0, True),
        "flat-present": (bert, r1 + r2 + 512 * r3, True),
        "scaled": (bert, 3 * (r2 + 512 * r3) + 7, True),
        "partial": (bert, r2 + 7, True),
        "wrong-stride": (bert, r2 + 256 * r3, True),
        "outside-reduction": (bert, r2 + 512 * r3, False),
        "deep": (deep, r2 + 16 * r3 + 256 * r4, True),
        "deep-partial": (deep, r2 + 16 * r3, True),
        "two-trees": (two, r2 + 512 * r3 + s2 + 8 * s3, True),
        "plain-in-input": (bert, sympy.Symbol("r0_1") + r2 + 512 * r3, True),
        "constant": (bert, sympy.Integer(5), True),
    }


def battery(mod, bert, found) -> dict:
    """Each address of ``found`` folded with the live method (gate on), as ``srepr`` (which
    spells out symbol assumptions); the seed case also reports whether its flat symbol is
    the registered ``range_tree_nodes`` key."""
    from types import SimpleNamespace as NS
    from unittest import mock

    import sympy
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.utils import sympy_index_symbol as isym
    from torch._inductor.virtualized import V

    Kernel = mod.NPUTritonKernel
    out = {}
    graph = NS(sizevars=SizeVarAllocator())
    with mock.patch.object(mod.ncfg, "fold_dualview_rnode", True), V.set_graph_handler(graph):
        for case, (spec, index, inside) in found.items():
            out[case] = sympy.srepr(Kernel._fold_dualview_reduction_index(kernel(spec, inside), index))
        k = kernel(bert)
        folded = Kernel._fold_dualview_reduction_index(k, isym("r0_2") + 512 * isym("r0_3"))
    range_tree_nodes = {n.symbol(): n for t in k.range_trees for n in t.nodes.values()}
    (sym,) = folded.free_symbols
    reg = bert["r0_"][0].symbol()
    out["seed"] = {"name": sym.name, "equal": sym == reg, "hash": hash(sym) == hash(reg),
                   "lookup": range_tree_nodes.get(sym) is bert["r0_"][0],
                   "integer": sym.is_integer, "nonnegative": sym.is_nonnegative}
    return out


def through_prepare(mod) -> dict:
    """The seed address through the whole ``NPUTritonKernel.prepare_indexing`` of the state,
    as codegen calls it (linearize on), on a stand-in kernel: Inductor's base
    ``prepare_indexing`` and every NPU rewrite run for real, then the result goes through
    ``TritonSymbols.get_block_shape``, where the unregistered symbol fails for real users."""
    from types import SimpleNamespace as NS
    from unittest import mock

    import sympy
    from torch._inductor.codegen.triton import TritonSymbols
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.utils import sympy_index_symbol as isym
    from torch._inductor.virtualized import V

    Kernel = mod.NPUTritonKernel
    nodes = [PNode("r0_1", 1, 2048), PNode("r0_2", 1, 512), PNode("r0_3", 512, 4)]
    tree = NS(is_reduction=True, nodes={n.name: n for n in nodes}, numel=sympy.Integer(2048),
              var_list=[n.symbol() for n in nodes], var_ranges={n.symbol(): n.length for n in nodes},
              tensor_dim=None)
    for n in nodes:
        n.root = tree
    k = object.__new__(Kernel)
    k.range_trees, k.range_tree_nodes = [tree], {n.symbol(): n for n in nodes}
    k.inside_reduction, k._axis_split_subs = True, {}
    k.simplify_indexing, k.triton_tensor_ndim = (lambda e: e), (lambda: 1)
    out = {"canonicalises": hasattr(Kernel, "_canonicalize_range_symbols")}
    with mock.patch.object(mod, "triton_codegen_linearize", True), \
            mock.patch.object(mod.ncfg, "fold_dualview_rnode", True), \
            V.set_graph_handler(NS(sizevars=SizeVarAllocator())), V.set_kernel_handler(k):
        index = Kernel.prepare_indexing(k, isym("r0_2") + 512 * isym("r0_3"))
        out["index"] = sympy.srepr(index)
        out["registered"] = all(k.range_tree_nodes.get(s) is not None for s in index.free_symbols)
        try:
            out["block_shape"] = list(TritonSymbols.get_block_shape(index))
        except AssertionError as exc:
            out["block_shape"] = str(exc)
    return out


def folds(location: str, prepare: bool = False) -> dict:
    """The probe and battery before and after ``npu_fixes.apply()``, with the state, and
    whether ``undo()`` puts the original fold back; with ``prepare``, also the seed through
    prepare_indexing before and after (``prepare_before``, ``prepare_after``)."""
    import os

    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import dualview_fold as fix

    Kernel = mod.NPUTritonKernel
    bert, found = cases()
    result = {}
    original = vars(Kernel)[NAME]
    result["probe_before"] = fix.probe(mod).defective
    result["before"] = battery(mod, bert, found)
    if prepare:
        result["prepare_before"] = through_prepare(mod)
    import npu_fixes

    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}["dualview-fold"]
    result["identical"] = vars(Kernel)[NAME] is original
    result["probe_after"] = fix.probe(mod).defective
    result["after"] = battery(mod, bert, found)
    if prepare:
        result["prepare_after"] = through_prepare(mod)
    result["undo"] = npu_fixes.undo()
    result["restored"] = vars(Kernel)[NAME] is original
    return result


if __name__ == "__main__":
    main(globals())
