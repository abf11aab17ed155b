"""rank-mismatch: the rule, and the live ``triton_tensor_ndim`` with the shape helpers that
read it, at every genuine state and the 2.13.0 wheel before and after the repair, compared
case by case with f8802037a (the first state here after upstream's fix, 22fb7f528)."""

from __future__ import annotations

import fnmatch
import itertools
import re
from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rank_mismatch import counted_nodes, folded_x_trees
from tests.conftest import host_check, wheel_path
from tests.genuine_states import BEYOND, COMMITS

NAME = "rank-mismatch"
FIXED_AT = "f8802037a"
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

# Stand-in kernels of the live class after the linearize post-pass: x trees whose nodes are
# free, folded into the mapping, scalar odometer axes or absent, x trees without a slot, a
# y tree, reduction trees unpromoted or promoted to two slots, over linearize x applied x
# inside_reduction x no_x_dim x permuted. Each case records triton_tensor_ndim,
# dense_size_str and reduction_resize("tmp3") (the accumulator resize that collapses in the
# reported kernel), or the exception each raises.
BATTERY = """
import itertools, sympy
from types import SimpleNamespace as NS
from unittest import mock
from npu_fixes.fixes import rank_mismatch as fix
from npu_fixes.shim.patcher import Patcher
mod = mods["codegen.triton"]
K = mod.NPUTritonKernel
original = vars(K)["triton_tensor_ndim"]

def node(name):
    return NS(name=name, length=sympy.Integer(4))

def xtree(prefix, names, mapped=(), odometer=(), dim=0):
    return NS(prefix=prefix, is_reduction=False, tensor_dim=dim, nodes={n: node(n) for n in names},
              tree_node_mapping={n: sympy.Integer(0) for n in mapped}, _npu_scalar_odometer=set(odometer))

X = {  # x tree: node names, mapped, scalar odometer, tensor slot
    "free1": (["x0"], (), (), 0), "free2": (["x0", "x1"], (), (), 0),
    "mapped": (["x0"], ["x0"], (), 0), "mapped2": (["x0", "x1"], ["x0", "x1"], (), 0),
    "odometer": (["x0"], (), ["x0"], 0), "mapped+odometer": (["x0", "x1"], ["x0"], ["x1"], 0),
    "half-mapped": (["x0", "x1"], ["x0"], (), 0), "no-nodes": ([], (), (), 0),
    "no-slot": (["x0"], ["x0"], (), None),
}
R = {"none": None, "r": (0, None), "r@1": (1, None), "promoted": (1, ["r0_1", "r0_2"])}
Y = {"no-y": None, "y-mapped": (["y0"], ["y0"], (), 1)}

def kernel(x, r, y, applied, inside, no_x_dim, permuted, lin):
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
    try:
        return getattr(k, name)(*args)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"

def battery():
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for x, r, y, applied, inside, no_x, perm in itertools.product(
                    X, R, Y, (True, False), (True, False), (False, True), (False, True)):
                k = kernel(x, r, y, applied, inside, no_x, perm, lin)
                out[f"lin={lin}|applied={applied}|{y}|x={x}|{r}|inside={inside}|no_x_dim={no_x}|permuted={perm}"] = [
                    call(k, "triton_tensor_ndim"), call(k, "dense_size_str"), call(k, "reduction_resize", "tmp3")]
    # called through the class, with the kernel first
    with mock.patch.object(mod, "triton_codegen_linearize", True):
        out["through-class"] = K.triton_tensor_ndim(kernel("mapped", "r", "no-y", True, True, False, False, True))
    return out

probe = fix.probe(mod)
result["probe_before"] = [probe.defective, probe.detail]
result["before"] = battery()
patcher = Patcher()
if probe.defective:  # as the registry does: a fixed state is never patched
    fix.FIX.install(mod, patcher)
result["patched"] = vars(K)["triton_tensor_ndim"] is not original
probe = fix.probe(mod)
result["probe_after"] = [probe.defective, probe.detail]
result["after"] = battery()
patcher.restore()
result["restored"] = vars(K)["triton_tensor_ndim"] is original
"""

# End to end on CPU: the state's backend activated, its NPUTritonScheduling generating the
# kernels of small torch.compile programs (Inductor's Triton CPU path), each generated
# kernel's source kept and its Triton IR built by the host Triton frontend, where a kernel
# build meets shape errors ("Cannot broadcast, rank mismatch"). Compiling the kernel itself
# needs triton-ascend, so that later error is ignored. ``generated(programs, fix)`` runs
# every program before and after ``fix`` is installed (where its probe asks for it).
CODEGEN = """
import importlib.util, re, tempfile
import torch
import torch._inductor.config as inductor_config
from torch._inductor.codegen.common import register_backend_for_device
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

def activate():
    codegen = mods["codegen.triton"]
    importlib.import_module(codegen.__name__.rsplit(".", 2)[0])._activate()
    register_backend_for_device("cpu", codegen.NPUTritonScheduling, PythonWrapperCodegen)

def build_ir(source):
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    from triton._C.libtriton import ir
    body = "@triton.jit" + source.split("@triton.jit")[-1].replace("Placeholder.KERNEL_NAME", "kernel")
    path = tempfile.mkdtemp() + "/generated_kernel.py"
    with open(path, "w") as f:
        f.write("import triton\\nimport triton.language as tl\\n"
                "from torch._inductor.runtime import triton_helpers\\n" + body)
    spec = importlib.util.spec_from_file_location("generated_kernel", path)
    kmod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kmod)
    signature, constants = {}, {}
    for param in (p.strip() for p in re.search(r"def kernel\\((.*?)\\):", body).group(1).split(",")):
        name = param.split(":")[0].strip()
        if "constexpr" in param:
            signature[name], constants[name] = "constexpr", 1 if name.startswith("X") else 64
        else:
            signature[name] = "*fp32" if "ptr" in name else "i32"
    target = GPUTarget("cuda", 80, 32)
    backend = CUDABackend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    try:
        ASTSource(kmod.kernel, signature, constants).make_ir(
            target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
        return "builds"
    except Exception as exc:
        text = str(exc)
        return "fails: " + (text[text.index("Cannot broadcast"):].splitlines()[0]
                            if "Cannot broadcast" in text else text.strip().splitlines()[-1])

def generate(fn, shape):
    kernel_cls = mods["codegen.triton"].NPUTritonKernel
    codegen_kernel, sources = kernel_cls.codegen_kernel, []
    def keep(self, *args, **kwargs):
        source = codegen_kernel(self, *args, **kwargs)
        sources.append(source)
        return source
    torch._dynamo.reset()
    error = None
    with mock.patch.object(kernel_cls, "codegen_kernel", keep), \\
            mock.patch("torch.utils._triton.triton_hash_with_backend", lambda: "host"), \\
            inductor_config.patch(cpu_backend="triton", compile_threads=1, force_disable_caches=True):
        try:
            torch.compile(fn)(torch.arange(float(torch.Size(shape).numel())).reshape(shape))
        except Exception as exc:  # the kernel compile needs triton-ascend: after codegen
            error = str(exc).strip().splitlines()[0]
    if not sources:
        return {"error": error}
    return {"kernels": [{"body": s.split("@triton.jit")[-1].strip(), "ir": build_ir(s)} for s in sources]}

def generated(programs, fix):
    activate()
    before = {label: generate(fn, shape) for label, (fn, shape) in programs.items()}
    patcher = Patcher()
    if fix.FIX.probe(mods["codegen.triton"]).defective:
        fix.FIX.install(mods["codegen.triton"], patcher)
        after = {label: generate(fn, shape) for label, (fn, shape) in programs.items()}
    else:
        after = before
    patcher.restore()
    return {"before": before, "after": after}
"""
END_TO_END = """
PROGRAMS = {
    "keepdim-sum": (lambda x: x.sum(dim=0, keepdim=True), (4096, 1)),
    "keepdim-sum+scalar": (lambda x: (x + x[5, 0]).sum(dim=0, keepdim=True), (4096, 1)),
    "keepdim-mean": (lambda x: x.mean(dim=0, keepdim=True), (4096, 1)),
}
if GENUINE:
    result["codegen"] = generated(PROGRAMS, fix)
"""

OFF = {"NPU_FIXES": "0"}  # nothing armed: the body installs this fix alone
SEED = "lin=True|applied=True|no-y|x=mapped|r|inside=True|no_x_dim=False|permuted=False"
#: The x trees the defect concerns: a slot, and every node folded away (or none at all).
FOLDED = ("mapped", "mapped2", "odometer", "mapped+odometer", "no-nodes")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    """One interpreter per state: probe, battery, install where the probe says so,
    probe again, battery again."""
    roots = {state: genuine(state) for state in COMMITS}
    roots[WHEEL] = wheel_path("2.13.0")
    return {state: host_check(root, f"GENUINE = {state != WHEEL}\n" + BATTERY + CODEGEN + END_TO_END, env=OFF)
            for state, root in roots.items()}


# -- the rule ------------------------------------------------------------------------------
def _tree(names, mapped=(), odometer=None, dim=0, reduction=False):
    tree = NS(nodes={n: NS(name=n) for n in names}, tree_node_mapping=dict.fromkeys(mapped),
              tensor_dim=dim, is_reduction=reduction)
    if odometer is not None:
        tree._npu_scalar_odometer = set(odometer)
    return tree


def test_counted_nodes_skip_mapped_and_odometer_nodes():
    assert counted_nodes(_tree(["x0", "x1", "x2"], ["x0"], ["x2"])) == 1
    assert counted_nodes(_tree(["x0"], odometer=None)) == 1  # trees without the attribute
    assert counted_nodes(_tree([], odometer=set())) == 0
    bare = NS(nodes={"x0": NS(name="x0")})  # no mapping and no odometer attributes at all
    assert counted_nodes(bare) == 1


def test_folded_x_trees_sweep():
    names = ["x0", "x1", "x2"]
    for k, dim, reduction in itertools.product(range(4), (0, None), (False, True)):
        for mapped in itertools.combinations(names[:k], min(k, 2)):
            odometer = [n for n in names[:k] if n not in mapped]
            tree = _tree(names[:k], mapped, odometer[:1], dim, reduction)
            free = k - len(mapped) - len(odometer[:1])
            expected = int(dim is not None and not reduction and free == 0)
            assert folded_x_trees([tree]) == expected, (k, mapped, dim, reduction)
    trees = [_tree(["x0"], ["x0"]), _tree(["y0"], odometer=["y0"]), _tree(["x1"]), _tree([], dim=None),
             _tree(["r0_0"], ["r0_0"], reduction=True)]
    assert folded_x_trees(trees) == 2


# -- the live target at every state ----------------------------------------------------------
@pytest.mark.parametrize("state", STATES)
def test_probe_and_repair(runs, state):
    res = runs[state]
    defective = state in BEYOND[NAME]
    assert res["probe_before"][0] is defective, res["probe_before"]
    assert res["probe_after"][0] is False, res["probe_after"]
    assert res["patched"] is defective and res["restored"] is True
    if not defective:
        assert res["after"] == res["before"]


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_repaired_state_behaves_like_the_fixed_state(runs, state):
    before, after, reference = runs[state]["before"], runs[state]["after"], runs[FIXED_AT]["after"]
    assert len(reference) > 1000 and before.keys() == after.keys() == reference.keys()
    assert not [k for k in reference if after[k] != reference[k]]
    # the reported kernel: one slot short, the accumulator resized to rank one
    assert before[SEED] == [1, "[R0_BLOCK]", "triton_helpers.promote_to_tensor(tmp3)"]
    assert after[SEED] == [2, "[R0_BLOCK, 1]", "tmp3[:, None]"]
    assert before["through-class"] == 1 and after["through-class"] == 2
    # only linearized kernels with a slotted x tree whose nodes are all folded away change
    repaired = {k for k in reference if before[k] != after[k]} - {"through-class"}
    assert repaired and all(fnmatch.fnmatchcase(k, "lin=True|applied=True|*") for k in repaired)
    assert all(k.split("|")[3].removeprefix("x=") in FOLDED or k.split("|")[2] == "y-mapped"
               for k in repaired)


# -- end to end: generated kernels -------------------------------------------------------------
#: What the repair cannot remove (see the catalogue): the store re-rank fixup of
#: _apply_linearize, deleted upstream, turns the kept-2-D scalar store target
#: ``.broadcast_to(XBLOCK, 1)`` into ``.broadcast_to(1, 1)`` (the value's rank; both build).
STORE_FIXUP = (".broadcast_to(1, 1)", ".broadcast_to(XBLOCK, 1)")
SHAPED = re.compile(r"^\s*_?tmp\d+ = tl\.(full|broadcast_to|sum)\(.*$", re.M)
STORE_INDEX = re.compile(r"tl\.full\(\[[^\]]*\], 0, tl\.int32\)\.broadcast_to\([^)]*\)")


def kernels(res: dict, stage: str) -> dict[str, list[dict]]:
    return {label: case["kernels"] for label, case in res["codegen"][stage].items()}


@pytest.mark.parametrize("state", COMMITS)
def test_generated_kernels_build(runs, state):
    """Every program's kernels build (Triton IR) after the repair at every genuine state;
    at 8bfbb9ed1 the keepdim sum that adds a scalar read fails before it."""
    res = runs[state]
    after = kernels(res, "after")
    assert all(k["ir"] == "builds" for ks in after.values() for k in ks), after
    if state not in BEYOND[NAME]:
        assert res["codegen"]["after"] == res["codegen"]["before"]
    if state == "8bfbb9ed1":
        (before,) = kernels(res, "before")["keepdim-sum+scalar"]
        assert before["ir"].startswith("fails: Cannot broadcast, rank mismatch")


@pytest.mark.parametrize("state", sorted(BEYOND[NAME]))
def test_generated_kernels_match_the_fixed_state(runs, state):
    """The repaired kernels' shaped statements (accumulator, broadcasts, reduction) equal
    f8802037a's, and so does the scalar store index but for the listed fixup. At
    95c9094da the whole kernel then equals f8802037a's; 8bfbb9ed1 lacks the cross-core
    split that 95c9094da added, so only those statements compare there."""
    before, after, reference = (kernels(runs[s], st) for s, st in
                                ((state, "before"), (state, "after"), (FIXED_AT, "after")))
    for label, ref_kernels in reference.items():
        (ref,), (got,), (old,) = ref_kernels, after[label], before[label]
        assert "tl.full([R0_BLOCK], 0" in old["body"]  # the collapsed rank-one accumulator
        assert SHAPED.findall(got["body"]) and [m.group(0).strip() for m in SHAPED.finditer(got["body"])] == \
            [m.group(0).strip() for m in SHAPED.finditer(ref["body"])], label
        fixed_up = STORE_INDEX.findall(got["body"])
        assert fixed_up and all(STORE_FIXUP[0] in index for index in fixed_up)
        assert [i.replace(*STORE_FIXUP) for i in fixed_up] == STORE_INDEX.findall(ref["body"])
        if state == "95c9094da":
            assert got["body"].replace(*STORE_FIXUP) == ref["body"]


def test_wheel_agrees_with_the_fixed_state(runs):
    assert runs[WHEEL]["before"] == runs[FIXED_AT]["before"]
