"""constant-index-shape: the rule, and the live ``indexing`` at every genuine state and the
2.13.0 wheel before and after the repair, compared case by case with 5ff81d9c5."""

from __future__ import annotations

import fnmatch
import itertools
import re

import pytest
import sympy
from torch.utils._sympy.functions import Identity

from npu_fixes.fixes.constant_index_shape import RANK_ONE, integer_like, rank_one
from tests.conftest import host_check, wheel_path
from tests.fixes.test_rank_mismatch import CODEGEN
from tests.genuine_states import BEYOND, COMMITS

NAME = "constant-index-shape"
FIXED_AT = "5ff81d9c5"  # where upstream fixed it: the reference behaviour
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

# The live ``NPUTritonKernel.indexing`` over PyTorch's real ``TritonKernel.indexing`` on
# stand-in kernels (a leaf subclass that only skips the index preparation and mask
# filtering, the same at every state), for constant and Identity indexes x kernel rank x
# copy_shape x override_mask x load mask x linearize; plus symbolic indexes over a canned
# base result (the NPU post-pass on its own). Each case records the fields of the result
# or the exception.
BATTERY = """
import itertools, sympy, torch
from types import SimpleNamespace as NS
from unittest import mock
from torch._inductor.codegen.triton import TritonKernel
from torch._inductor.sizevars import SizeVarAllocator
from torch._inductor.virtualized import V
from torch._inductor.utils import sympy_index_symbol as isym
from torch.utils._ordered_set import OrderedSet
from torch.utils._sympy.functions import Identity
from npu_fixes.fixes import constant_index_shape as fix
from npu_fixes.shim.patcher import Patcher
mod = mods["codegen.triton"]
K = mod.NPUTritonKernel
original = vars(K)["indexing"]

class Mask:
    def __init__(self, name, mask_vars):
        self.name, self.mask_vars = name, OrderedSet(mask_vars)
    def __str__(self):
        return self.name

class Leaf(K):
    def prepare_indexing(self, index):
        return index
    def filter_masks(self, mask_vars):
        pass

CANNED = {}
class Canned(TritonKernel):
    def indexing(self, index, **kwargs):
        return CANNED["result"]
class CannedLeaf(K, Canned):
    def filter_masks(self, mask_vars):
        pass

def tree(prefix, dim, red):
    return NS(prefix=prefix, tensor_dim=dim, is_reduction=red, var_list=[], nodes={},
              tree_node_mapping={}, is_loop=False, mask_name=lambda: prefix + "mask",
              block_size_str=lambda: prefix.upper() + "BLOCK")

TREES = {"x": [("x", 0, False)], "x+r": [("x", 0, False), ("r0_", 1, True)],
         "y+x+r": [("y", 0, False), ("x", 1, False), ("r0_", 2, True)]}
INDEXES = {"0": sympy.Integer(0), "7": sympy.Integer(7), "Identity(3)": Identity(sympy.Integer(3))}
COPY = {"none": None, "(1, 1)": (1, 1), "str": "tmp5"}
MASKS = {"none": None, "axis": ("tmp9", ["x0mask"]), "no-axis": ("tmp8", [])}

def kernel(cls, trees, load_mask, linearize):
    k = object.__new__(cls)
    k.range_trees = [tree(*t) for t in TREES[trees]]
    k._load_mask = None if load_mask is None else Mask(*load_mask)
    k.inside_reduction, k.no_x_dim, k.fixed_config, k.is_combo_kernel = True, False, None, False
    k._npu_linearize, k._index_dtype, k.range_tree_nodes = linearize, torch.int32, {}
    return k

def record(k, index, **kwargs):
    graph = NS(sizevars=SizeVarAllocator())
    try:
        with V.set_graph_handler(graph), V.set_kernel_handler(k):
            r = k.indexing(index, **kwargs)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    return [type(r).__name__, r.index_str, sorted(map(str, r.mask_vars)), r.expand_str,
            list(r.expand_shape) if r.expand_shape is not None else None, str(r.index)]

def battery():
    out = {}
    for lin in (True, False):
        with mock.patch.object(mod, "triton_codegen_linearize", lin):
            for (t, trees), (i, index), (c, copy), ov, (m, mask) in itertools.product(
                    TREES.items(), INDEXES.items(), COPY.items(), (None, "xmask"), MASKS.items()):
                out[f"lin={lin}|{t}|{i}|copy={c}|override={ov}|mask={m}"] = record(
                    kernel(Leaf, t, mask, lin), index, copy_shape=copy, override_mask=ov)
            # canned base results: symbolic indexes, and a base that is already rank one
            x0, r0 = isym("x0"), isym("r0_0")
            for label, base, index in [
                    ("x0", ("x0", ["x0mask"], "[XBLOCK, 1]", False, x0, ("XBLOCK", 1)), x0),
                    ("x0+r0", ("x0 + r0_0", ["x0mask", "r0_mask"], "[XBLOCK, R0_BLOCK]", True,
                               x0 + r0, ("XBLOCK", "R0_BLOCK")), x0 + r0),
                    ("0-rank-one", ("tl.full([1], 0, tl.int32)", [], "[1]", False, sympy.Integer(0), (1,)),
                     sympy.Integer(0))]:
                s, mv, e, h, ix, shape = base
                CANNED["result"] = mod.IndexingOptions(s, OrderedSet(mv), e, h, ix, expand_shape=shape)
                out[f"lin={lin}|canned|{label}"] = record(kernel(CannedLeaf, "x+r", None, lin), index)
                if label == "0-rank-one":  # nothing to change: the very same object comes back
                    k = kernel(CannedLeaf, "x+r", None, lin)
                    with V.set_graph_handler(NS(sizevars=SizeVarAllocator())), V.set_kernel_handler(k):
                        out[f"lin={lin}|canned|{label}|same"] = k.indexing(index) is CANNED["result"]
    return out

probe = fix.probe(mod)
result["probe_before"] = [probe.defective, probe.detail]
result["before"] = battery()
patcher = Patcher()
if probe.defective:  # as the registry does: a fixed state is never patched
    fix.FIX.install(mod, patcher)
result["patched"] = vars(K)["indexing"] is not original
probe = fix.probe(mod)
result["probe_after"] = [probe.defective, probe.detail]
result["after"] = battery()
patcher.restore()
result["restored"] = vars(K)["indexing"] is original
"""

# End to end (the harness is test_rank_mismatch's CODEGEN): a scalar read by constant index
# in a reduction, over a long and a short (persistent) reduction and a row reduction.
END_TO_END = """
PROGRAMS = {
    "sum-x+x[3]": (lambda x: (x + x[3]).sum(), (4096,)),
    "small-sum-x+x[3]": (lambda x: (x + x[3]).sum(), (64,)),
    "rows-x+x[0,0]": (lambda x: (x + x[0, 0]).sum(dim=1), (4, 512)),
}
if GENUINE:
    result["codegen"] = generated(PROGRAMS, fix)
"""

OFF = {"NPU_FIXES": "0"}  # nothing armed: the body installs this fix alone

#: Cases where a repaired state differs from FIXED_AT, by pattern, with the reason.
NOT_REPAIRED = {
    "lin=True|*|Identity(3)|*|override=None|mask=axis": (
        "an integer-like index that is not a sympy Integer under a load mask with axis "
        "masks: the pre-fix post-pass decides its load-mask broadcast by isinstance(index, "
        "sympy.Integer) and broadcasts it to the dense shape, which the fixed one does not; "
        "that broadcast is inside the method, and the repair leaves such a result as it is "
        "(a rank-one shape would contradict the broadcast index)"),
    "lin=True|*|Identity(3)|copy=none|override=None|mask=no-axis": (
        "the same index under a load mask without axis masks is not broadcast, but the "
        "repair cannot tell that from the result, so it keeps the pre-fix shape for every "
        "such index under a load mask"),
}


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    """One interpreter per state: probe, battery, install where the probe says so,
    probe again, battery again."""
    roots = {state: genuine(state) for state in COMMITS}
    roots[WHEEL] = wheel_path("2.13.0")
    return {state: host_check(root, f"GENUINE = {state != WHEEL}\n" + BATTERY + CODEGEN + END_TO_END, env=OFF)
            for state, root in roots.items()}


def listed(patterns, cases) -> set[str]:
    """The cases matched by ``patterns``; each pattern must match at least one case."""
    found = {p: {k for k in cases if fnmatch.fnmatchcase(k, p)} for p in patterns}
    assert all(found.values()), [p for p, ks in found.items() if not ks]
    return set().union(*found.values())


# -- the rule ------------------------------------------------------------------------------
def test_integer_like_matches_torch():
    from torch._inductor.codegen.triton import is_sympy_integer_like

    x = sympy.Symbol("x0", integer=True)
    for value in (sympy.Integer(0), sympy.Integer(-3), Identity(sympy.Integer(3)), x, x + 1,
                  sympy.Rational(1, 2), sympy.Float(2.0), 3, "0", None, sympy.Integer(2) * 4):
        assert integer_like(value) is bool(is_sympy_integer_like(value)), value


def test_rank_one_sweep():
    indexes = {"int": sympy.Integer(0), "identity": Identity(sympy.Integer(3)),
               "symbol": sympy.Symbol("x0", integer=True)}
    for (kind, index), copy, masked in itertools.product(
            indexes.items(), (None, (1, 1), "tmp5", ()), (False, True)):
        expected = copy is None and (kind == "int" or (kind == "identity" and not masked))
        assert rank_one(index, copy, masked) is expected, (kind, copy, masked)
    assert RANK_ONE == ("[1]", (1,))


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
    assert len(reference) > 300 and before.keys() == after.keys() == reference.keys()
    differing = {k for k in reference if after[k] != reference[k]}
    assert differing == listed(NOT_REPAIRED, reference), sorted(differing)[:5]
    # the seed: constant index 0 in a two-slot linearized kernel, no copy_shape
    seed = "lin=True|x+r|0|copy=none|override=None|mask=none"
    assert before[seed][3:5] == ["[1, 1]", [1, 1]] and after[seed][3:5] == ["[1]", [1]]
    # the repair changes linearized, non-overridden constant indexes without copy_shape only
    repaired = {k for k in reference if before[k] != after[k]}
    assert repaired and all(fnmatch.fnmatchcase(k, "lin=True|*|copy=none|override=None|*") for k in repaired)
    assert {k for k in reference if before[k] != reference[k]} == repaired | differing


# -- end to end: generated kernels -------------------------------------------------------------
CONSTANT_LOAD = re.compile(r"^\s*(tmp\d+) = tl\.load\(in_ptr0 \+ \(\d+\)\)$", re.M)


def constant_read(body: str) -> str:
    """The statement that takes up the value loaded by constant index (CSE gives it the
    index's shape: a plain copy at rank one, a broadcast to [1, 1] otherwise)."""
    (name,) = CONSTANT_LOAD.findall(body)
    lines = body.splitlines()
    at = next(i for i, line in enumerate(lines) if CONSTANT_LOAD.match(line))
    return re.sub(rf"\b{name}\b", "LOADED", re.sub(r"\btmp\d+ =", "tmp =", lines[at + 1].strip()))


def generated(res: dict, stage: str) -> dict[str, dict]:
    return {label: case["kernels"][0] for label, case in res["codegen"][stage].items()}


@pytest.mark.parametrize("state", COMMITS)
def test_generated_kernels_build_and_read_the_scalar_at_rank_one(runs, state):
    """After the repair every program's kernel builds (Triton IR) and takes the scalar up
    as 5ff81d9c5 does, a plain copy; at 8bfbb9ed1, whose reduction tile here is rank one,
    the [1, 1] copy broke the build of both whole-tensor sums."""
    res, reference = runs[state], generated(runs[FIXED_AT], "after")
    before, after = generated(res, "before"), generated(res, "after")
    assert all(k["ir"] == "builds" for k in after.values()), after
    assert {label: constant_read(k["body"]) for label, k in after.items()} == \
        {label: constant_read(k["body"]) for label, k in reference.items()} == \
        dict.fromkeys(reference, "tmp = LOADED")
    if state in BEYOND[NAME]:  # where the pre-fix kernel differs, it is the [1, 1] copy
        reads = {constant_read(k["body"]) for k in before.values()}
        assert "tmp = tl.broadcast_to(LOADED, [1, 1])" in reads
        assert reads <= {"tmp = LOADED", "tmp = tl.broadcast_to(LOADED, [1, 1])"}
    else:
        assert res["codegen"]["after"] == res["codegen"]["before"]
    if state == "8bfbb9ed1":
        assert all(before[p]["ir"].startswith("fails: Cannot broadcast, rank mismatch")
                   for p in ("sum-x+x[3]", "small-sum-x+x[3]"))


def test_wheel_agrees_with_the_fixed_state(runs):
    assert runs[WHEEL]["before"] == runs[FIXED_AT]["before"]
