"""Programs of tests/fixes/test_range_symbol_canon.py."""

from __future__ import annotations

from tests.programs import before_and_after, host_load, main

TARGETS = ("_refactor_clamp_stride", "_fold_trivial_modular_indexing", "_fold_dualview_reduction_index")


def blocks(k, ndim):
    """``k`` with what get_block_shape and the index folds ask of the kernel and its trees."""
    from torch._inductor.utils import sympy_index_symbol as isym

    for tree in k.range_trees:
        tree.root, tree.block_size = tree, (lambda p=tree.prefix: p.upper() + "BLOCK")
        tree.index_sym = lambda p=tree.prefix: isym(p + "index")
    k.triton_tensor_ndim = lambda: ndim
    return k


def fused(mod):
    """A pointwise kernel whose x tree maps the fused node x3 to plain-symbol x5 + 64*x6 (as
    _apply_linearize maps it)."""
    from npu_fixes.fixes import range_symbol_canon as fix

    return blocks(fix.fused_kernel(mod), 1)


def dualview(mod):
    """The hf_DistilBert dual-view reduction kernel (r0_1 = r0_2 + 512*r0_3)."""
    from types import SimpleNamespace as NS

    import sympy

    from npu_fixes.fixes import range_symbol_canon as fix

    nodes = [fix._Node("r0_1", 1, 2048), fix._Node("r0_2", 1, 512), fix._Node("r0_3", 512, 4),
             fix._Node("x0", 1, 768)]
    red = NS(prefix="r0_", is_reduction=True, is_loop=False, tensor_dim=1, numel=sympy.Integer(2048),
             nodes={n.name: n for n in nodes[:3]}, var_list=[n.symbol() for n in nodes[:3]],
             var_ranges={n.symbol(): n.length for n in nodes[:3]}, tree_node_mapping={})
    xt = NS(prefix="x", is_reduction=False, is_loop=False, tensor_dim=0, numel=sympy.Integer(768),
            nodes={"x0": nodes[3]}, var_list=[nodes[3].symbol()], var_ranges={nodes[3].symbol(): nodes[3].length},
            tree_node_mapping={})
    for n in nodes[:3]:
        n.root = red
    nodes[3].root = xt
    k = object.__new__(mod.NPUTritonKernel)
    k.range_trees, k.range_tree_nodes = [xt, red], {n.symbol(): n for n in nodes}
    k.inside_reduction, k._axis_split_subs, k.simplify_indexing = True, {}, (lambda e: e)
    return blocks(k, 2)


def cases() -> dict:
    """Label -> (kernel maker, index)."""
    import sympy
    from torch._inductor.utils import sympy_index_symbol as isym
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    P = sympy.Symbol  # a plain look-alike
    x3, x5, x6, r1, r2, r3, x0 = (isym(n) for n in ("x3", "x5", "x6", "r0_1", "r0_2", "r0_3", "x0"))
    I1 = sympy.Integer(1)
    return {
        "fused-mod64": (fused, ModularIndexing(x3, I1, sympy.Integer(64))),
        "fused-mod128": (fused, ModularIndexing(x3, I1, sympy.Integer(128))),
        "fused-mod64+x6": (fused, ModularIndexing(x3, I1, sympy.Integer(64)) + x6),
        "fused-div64": (fused, FloorDiv(x3, sympy.Integer(64))),
        "plain-mapping": (fused, P("x5") + 64 * P("x6")),
        "plain-x5": (fused, P("x5")),
        "plain-x5-integer": (fused, P("x5", integer=True) + 2),
        "plain-mod": (fused, ModularIndexing(P("x6"), I1, sympy.Integer(16)) + x5),
        "registered": (fused, x5 + 64 * x6),
        "registered-mod": (fused, ModularIndexing(x6, I1, sympy.Integer(16)) + x5),
        "foreign-plain": (fused, P("x9") + P("s0") + x5),
        "constant": (fused, sympy.Integer(7)),
        "dualview": (dualview, r2 + 512 * r3),
        "dualview+x": (dualview, r2 + 512 * r3 + 2048 * x0),
        "dualview-plain-input": (dualview, P("r0_2") + 512 * r3),
    }


def run(k, index):
    """``k.prepare_indexing(index)`` as srepr (which spells out symbol assumptions), its
    range-named symbols that are not range_tree_nodes keys, and TritonSymbols.get_block_shape
    of it, where codegen meets them ("Unregistered range symbol"); or the exception."""
    from types import SimpleNamespace as NS

    import sympy
    from torch._inductor.codegen.triton import TritonSymbols
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    graph = NS(sizevars=SizeVarAllocator())
    with V.set_graph_handler(graph), V.set_kernel_handler(k):
        try:
            out = k.prepare_indexing(index)
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"
        unregistered = sorted(s.name for s in out.free_symbols
                              if s.name[0] in "xyzr" and k.range_tree_nodes.get(s) is None)
        try:
            shape = [str(d) for d in TritonSymbols.get_block_shape(out)]
        except Exception as exc:  # names one of them, in set order: keep the words only
            shape = f"{type(exc).__name__}: {str(exc).partition(':')[0]}"
    return [sympy.srepr(out), unregistered, shape]


def battery(mod) -> dict:
    """Every case with linearize on and off, and fused-mod64 with the other tail pass
    (npu_refactor_clamp_stride) on."""
    from unittest import mock

    found = cases()
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for label, (make, index) in found.items():
                k = make(mod)
                k._npu_linearize = lin
                out[f"lin={lin}|{label}"] = run(k, index)
    with mock.patch.object(mod, "npu_refactor_clamp_stride", True):  # the other tail pass on
        out["clamp-stride-on|fused-mod64"] = run(fused(mod), found["fused-mod64"][1])
    return out


def prepared(location: str) -> dict:
    """The whole live ``NPUTritonKernel.prepare_indexing`` of the state on stand-in kernels
    (Inductor's base preparation and every NPU pass run for real): probe, battery, install
    where the probe says so (as the registry does: a fixed state is never patched), probe
    again, battery again, then dualview-fold on top where its probe asks for it (the two
    fixes stack), everything undone."""
    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import dualview_fold
    from npu_fixes.fixes import range_symbol_canon as fix
    from npu_fixes.shim.patcher import Patcher

    K = mod.NPUTritonKernel
    originals = {name: vars(K)[name] for name in TARGETS}

    def ours():
        return {name: vars(K)[name] is not originals[name] for name in TARGETS}

    result, patcher = before_and_after(fix, mod, lambda: battery(mod))
    result["patched"] = ours()
    other = Patcher()
    if dualview_fold.FIX.probe(mod).defective:
        dualview_fold.FIX.install(mod, other)
        result["both"] = battery(mod)
        result["both_probes"] = [fix.probe(mod).defective, dualview_fold.FIX.probe(mod).defective]
    other.restore()
    patcher.restore()
    result["restored"] = not any(ours().values())
    return result


if __name__ == "__main__":
    main(globals())
