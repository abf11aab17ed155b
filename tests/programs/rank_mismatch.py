"""Programs of tests/fixes/test_rank_mismatch.py (and of test_constant_index_shape.py and
test_minmax_propagate_nan.py, which share the code-generation harness: ``activate``,
``build_ir``, ``triton_ir``, ``generate``, ``generated``)."""

from __future__ import annotations

import itertools

from tests.programs import host_load, main, method_before_and_after

X = {  # x tree: node names, mapped, scalar odometer, tensor slot
    "free1": (["x0"], (), (), 0), "free2": (["x0", "x1"], (), (), 0),
    "mapped": (["x0"], ["x0"], (), 0), "mapped2": (["x0", "x1"], ["x0", "x1"], (), 0),
    "odometer": (["x0"], (), ["x0"], 0), "mapped+odometer": (["x0", "x1"], ["x0"], ["x1"], 0),
    "half-mapped": (["x0", "x1"], ["x0"], (), 0), "no-nodes": ([], (), (), 0),
    "no-slot": (["x0"], ["x0"], (), None),
}
R = {"none": None, "r": (0, None), "r@1": (1, None), "promoted": (1, ["r0_1", "r0_2"])}
Y = {"no-y": None, "y-mapped": (["y0"], ["y0"], (), 1)}
PROGRAMS = {
    "keepdim-sum": (lambda x: x.sum(dim=0, keepdim=True), (4096, 1)),
    "keepdim-sum+scalar": (lambda x: (x + x[5, 0]).sum(dim=0, keepdim=True), (4096, 1)),
    "keepdim-mean": (lambda x: x.mean(dim=0, keepdim=True), (4096, 1)),
}


def node(name):
    """A range-tree node of length 4."""
    from types import SimpleNamespace as NS

    import sympy

    return NS(name=name, length=sympy.Integer(4))


def xtree(prefix, names, mapped=(), odometer=(), dim=0):
    """A non-reduction range tree."""
    from types import SimpleNamespace as NS

    import sympy

    return NS(prefix=prefix, is_reduction=False, tensor_dim=dim, nodes={n: node(n) for n in names},
              tree_node_mapping={n: sympy.Integer(0) for n in mapped}, _npu_scalar_odometer=set(odometer))


def kernel(K, x, r, y, applied, inside, no_x_dim, permuted, lin):
    """A stand-in ``K`` (the live NPUTritonKernel) after the linearize post-pass."""
    from types import SimpleNamespace as NS

    trees = [xtree("x", *X[x])]
    if Y[y] is not None:
        trees.insert(0, xtree("y", *Y[y]))
    promoted = {}
    if R[r] is not None:
        dim, slots = R[r]
        trees.append(NS(prefix="r0_", is_reduction=True, tensor_dim=dim, nodes={"r0_0": node("r0_0")},
                        tree_node_mapping={}))
        if slots:
            promoted["r0_"] = slots
    k = object.__new__(K)
    k.range_trees, k._npu_rtree_promoted, k.inside_reduction = trees, promoted, inside
    k.no_x_dim, k._npu_tile_permuted, k._npu_linearize = no_x_dim, permuted, lin
    if applied:
        k._linearize_applied = True
    return k


def call(k, name, *args):
    """``k.name(*args)``, or the exception it raises."""
    try:
        return getattr(k, name)(*args)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"


def battery(mod) -> dict:
    """Stand-in kernels of the live class after the linearize post-pass: x trees whose
    nodes are free, folded into the mapping, scalar odometer axes or absent, x trees without
    a slot, a y tree, reduction trees unpromoted or promoted to two slots, over linearize x
    applied x inside_reduction x no_x_dim x permuted. Each case records triton_tensor_ndim,
    dense_size_str and reduction_resize("tmp3") (the accumulator resize that collapses in
    the reported kernel), or the exception each raises."""
    from unittest import mock

    K = mod.NPUTritonKernel
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for x, r, y, applied, inside, no_x, perm in itertools.product(
                    X, R, Y, (True, False), (True, False), (False, True), (False, True)):
                k = kernel(K, x, r, y, applied, inside, no_x, perm, lin)
                out[f"lin={lin}|applied={applied}|{y}|x={x}|{r}|inside={inside}|no_x_dim={no_x}|permuted={perm}"] = [
                    call(k, "triton_tensor_ndim"), call(k, "dense_size_str"), call(k, "reduction_resize", "tmp3")]
    # called through the class, with the kernel first
    with mock.patch.object(mod, "triton_codegen_linearize", True):
        out["through-class"] = K.triton_tensor_ndim(kernel(K, "mapped", "r", "no-y", True, True, False, False, True))
    return out


def activate(mod):
    """The state's backend activated, its NPUTritonScheduling generating CPU's kernels.
    First, as the torch_npu loader does, the decompositions of the ops in the state's
    ``EXPLICIT_FALLBACK_LIST`` are removed (only the wheels have the list)."""
    import importlib

    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.decomposition import decompositions

    package = mod.__name__.rsplit(".", 2)[0]
    for op in getattr(importlib.import_module(package + ".lowering"), "EXPLICIT_FALLBACK_LIST", []):
        decompositions.pop(op, None)
    importlib.import_module(package)._activate()
    register_backend_for_device("cpu", mod.NPUTritonScheduling, PythonWrapperCodegen)


def build_ir(source: str) -> str:
    """The kernel's Triton IR built by the host Triton frontend: "builds", or "fails: "
    with the shape error (else the error's last line)."""
    try:
        triton_ir(source)
        return "builds"
    except Exception as exc:
        text = str(exc)
        return "fails: " + (text[text.index("Cannot broadcast"):].splitlines()[0]
                            if "Cannot broadcast" in text else text.strip().splitlines()[-1])


def triton_ir(source: str) -> str:
    """The text of the kernel's Triton IR, built by the host Triton frontend (CUDA's
    language module: the IR before any device compiler; the backend's `max2` stood in for, see
    ``ascend_language``); raises where the build fails."""
    import importlib.util
    import re
    import tempfile
    from unittest import mock

    from tests.programs import ascend_language

    body = "@triton.jit" + source.split("@triton.jit")[-1].replace("Placeholder.KERNEL_NAME", "kernel")
    path = tempfile.mkdtemp() + "/generated_kernel.py"
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n"
                "from torch._inductor.runtime import triton_helpers\n" + body)
    spec = importlib.util.spec_from_file_location("generated_kernel", path)
    kmod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kmod)
    signature, constants = {}, {}
    for param in (p.strip() for p in re.search(r"def kernel\((.*?)\):", body).group(1).split(",")):
        name = param.split(":")[0].strip()
        if "constexpr" in param:
            signature[name], constants[name] = "constexpr", 1 if name.startswith("X") else 64
        else:
            signature[name] = "*fp32" if "ptr" in name else "i32"
    with mock.patch.object(kmod.triton_helpers, "max2", ascend_language.max2):
        return host_frontend_ir(kmod.kernel, signature, constants)


def host_frontend_ir(fn, signature: dict, constants: dict) -> str:
    """The Triton IR of the JIT function ``fn`` (``signature``: argument -> type or
    "constexpr"; ``constants``: constexpr -> value) as the host Triton frontend builds it
    (CUDA's language module, no device compiler); raises the frontend's error."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 80, 32)
    backend = CUDABackend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    return str(ASTSource(fn, signature, constants).make_ir(
        target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context))


def generate(mod, fn, shape) -> dict:
    """The kernels that ``torch.compile(fn)`` on an arange of ``shape`` generates, each with
    its Triton IR build; compiling the kernel itself needs triton-ascend, so that later
    error is ignored."""
    from unittest import mock

    import torch
    import torch._inductor.config as inductor_config

    kernel_cls = mod.NPUTritonKernel
    codegen_kernel, sources = kernel_cls.codegen_kernel, []

    def keep(self, *args, **kwargs):
        source = codegen_kernel(self, *args, **kwargs)
        sources.append(source)
        return source

    torch._dynamo.reset()
    error = None
    with mock.patch.object(kernel_cls, "codegen_kernel", keep), \
            mock.patch("torch.utils._triton.triton_hash_with_backend", lambda: "host"), \
            inductor_config.patch(cpu_backend="triton", compile_threads=1, force_disable_caches=True):
        try:
            torch.compile(fn)(torch.arange(float(torch.Size(shape).numel())).reshape(shape))
        except Exception as exc:  # the kernel compile needs triton-ascend: after codegen
            error = str(exc).strip().splitlines()[0]
    if not sources:
        return {"error": error}
    return {"kernels": [{"body": s.split("@triton.jit")[-1].strip(), "ir": build_ir(s)} for s in sources]}


def generated(mod, programs: dict, fix) -> dict:
    """End to end on CPU: the state's backend activated, its NPUTritonScheduling generating
    the kernels of small torch.compile programs (Inductor's Triton CPU path), each kernel's
    Triton IR built by the host Triton frontend, where a kernel build meets shape errors
    ("Cannot broadcast, rank mismatch"). Every program (label -> (fn, shape)) runs before
    and after ``fix`` is installed (where its probe asks for it)."""
    from npu_fixes.shim.patcher import Patcher

    activate(mod)
    before = {label: generate(mod, fn, shape) for label, (fn, shape) in programs.items()}
    patcher = Patcher()
    if fix.FIX.probe(mod).defective:
        fix.FIX.install(mod, patcher)
        after = {label: generate(mod, fn, shape) for label, (fn, shape) in programs.items()}
    else:
        after = before
    patcher.restore()
    return {"before": before, "after": after}


def ndim(location: str, genuine: bool) -> dict:
    """Probe, battery, install where the probe says so (as the registry does: a fixed state
    is never patched), probe again, battery again, undo; at a genuine state then the
    kernels of PROGRAMS generated before and after the fix."""
    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.fixes import rank_mismatch as fix

    result = method_before_and_after(fix, mod, mod.NPUTritonKernel, "triton_tensor_ndim", lambda: battery(mod))
    if genuine:
        result["codegen"] = generated(mod, PROGRAMS, fix)
    return result


if __name__ == "__main__":
    main(globals())
