"""Programs of tests/fixes/test_safe_stride_order.py (without ``from __future__ import
annotations``: torch.library.custom_op reads the op's annotations as types)."""

from tests.programs import host_load, main


def pairs(a, b):
    """Label -> (left, right) strides over the sizes ``a`` and ``b``."""
    return {
        "two-shared": ((a + 1) * (a + b), (a + 1) * (a + b) * (b - 1)),
        "two-shared-rev": ((a + 1) * (a + b) * (b - 1), (a + 1) * (a + b)),
        "three-shared": (b * (a + 1) * (b - 1), (a + 1) * (a + b) * (b - 1)),
        "one-shared": (a + 1, (a + 1) * (a + b)),
        "monomial": (a, a * b), "monomial-rev": (a * b, a), "equal": (a * b, a * b),
        "unit": (1, a), "unit-rev": (a, 1), "zero-left": (0, a), "zero-right": (a, 0),
        "sum": (a, a + b), "sum-rev": (a + b, a), "quotient": (a / b, a),
        "ints": (4, 2), "ints-rev": (2, 4), "ints-odd": (6, 4),
    }


def battery() -> dict:
    """Layout._stride_expr_ge_or_false in force, on pairs of strides over a real ShapeEnv
    (backed sizes with hints, and unbacked ones); each answer or the exception type."""
    from types import SimpleNamespace as NS

    from torch._dynamo.source import ConstantSource
    from torch._inductor.ir import Layout
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    out = {}
    for kind in ("backed", "unbacked"):
        env = ShapeEnv()
        if kind == "backed":
            a, b = (env.create_symbol(h, ConstantSource(n), dynamic_dim=DimDynamic.DYNAMIC)
                    for n, h in (("a", 8), ("b", 4)))
        else:
            a, b = (env.create_unbacked_symint().node.expr for _ in range(2))
        with V.set_graph_handler(NS(sizevars=SizeVarAllocator(env))):
            for label, (left, right) in pairs(a, b).items():
                try:
                    out[f"{kind}|{label}"] = bool(Layout._stride_expr_ge_or_false(left, right))
                except Exception as exc:
                    out[f"{kind}|{label}"] = f"raised {type(exc).__name__}"
    return out


def fixed_order_op(seen: list):
    """The op npu_fixes_test::fixed_order (tagged needs_fixed_stride_order), a copy that
    appends the strides it sees to ``seen``."""
    import torch

    @torch.library.custom_op("npu_fixes_test::fixed_order", mutates_args=(),
                             tags=(torch._C.Tag.needs_fixed_stride_order,))
    def fixed_order(t: torch.Tensor) -> torch.Tensor:
        seen.append(list(t.stride()))
        return t.clone()

    @fixed_order.register_fake
    def _(t):
        return torch.empty_like(t)

    return fixed_order


def e2e(fixed_order, seen: list) -> dict:
    """torch.compile(dynamic=True) on CPU of a model that hands a [2, b-1, a+b, a+1] buffer
    to ``fixed_order``: the strides it sees, compared with eager (or the compile's error)."""
    import torch

    def model(p, q):  # no cat: 8bfbb9ed1's own cat lowering emits an op CPU code lacks
        r = torch.nn.functional.pad(p, (0, q.shape[0]))  # a + b
        pp = torch.nn.functional.pad(p, (0, 1))          # a + 1
        qq = q[1:]                                       # b - 1
        two = torch.arange(2.0)
        t = two[:, None, None, None] + qq[None, :, None, None] * r[None, None, :, None] * pp[None, None, None, :]
        return fixed_order(t).sum()

    torch._dynamo.reset()
    seen.clear()
    p, q = torch.arange(8.0) / 8, torch.arange(4.0) / 4 + 1
    try:
        got = torch.compile(model, dynamic=True)(p, q)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    compiled = seen[:]
    want = model(p, q)
    return {"same": bool(torch.allclose(got, want)), "strides": compiled, "eager": seen[len(compiled):]}


def strides(location: str) -> dict:
    """The probe before activation; activation as the backend does it; the battery and the
    compile; then the fix installed as the registry decides (only where its probe says
    needed, here after activation: npu_fixes imported late), probed, battery and compile
    again; activation once more through the wrapper; everything undone."""
    import importlib
    import inspect

    host_load(location)
    import torch._functorch.config as functorch_config
    from torch._inductor import config
    from torch._inductor.ir import Layout

    from npu_fixes.fixes import safe_stride_order as fix
    from npu_fixes.shim.patcher import Patcher

    config.fx_graph_cache = False  # every compile lowers; compiled C++ is shared
    functorch_config.enable_autograd_cache = False
    ov = importlib.import_module("torch_npu._inductor.triton_experimental.overrides")
    seen = []
    fixed_order = fixed_order_op(seen)
    result = {}
    stock = inspect.getattr_static(Layout, fix.RULE)
    activation = inspect.getattr_static(ov, fix.TARGET)
    first = fix.probe(ov)
    result["probe_before"] = [first.defective, first.detail]
    result["stock_untouched_by_probe"] = inspect.getattr_static(Layout, fix.RULE) is stock
    ov.apply_npu_overrides()
    result["activation_replaces_rule"] = inspect.getattr_static(Layout, fix.RULE) is not stock
    result["battery_before"] = battery()
    result["e2e_before"] = e2e(fixed_order, seen)
    patcher = Patcher()
    if first.defective:
        fix.FIX.install(ov, patcher)
    result["patched"] = len(patcher)
    after = fix.probe(ov)
    result["probe_after"] = [after.defective, after.detail]
    result["battery_after"] = battery()
    if len(patcher):
        result["e2e_after"] = e2e(fixed_order, seen)
        setattr(Layout, fix.RULE, stock)  # as if an override had put torch's rule back
        result["probe_replaced"] = fix.probe(ov).defective
        ov.apply_npu_overrides()  # activation again, through the wrapper: guarded again
        result["guarded_after_reactivation"] = [patcher.is_wrapped(Layout, fix.RULE), fix.probe(ov).defective]
        patcher.restore()
        result["restored"] = [inspect.getattr_static(Layout, fix.RULE) is stock,
                              inspect.getattr_static(ov, fix.TARGET) is activation]
        result["probe_end"] = fix.probe(ov).defective
    return result


if __name__ == "__main__":
    main(globals())
