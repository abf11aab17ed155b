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
from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS

NAME = "constant-index-shape"
FIXED_AT = "5ff81d9c5"  # where upstream fixed it: the reference behaviour
WHEEL = "wheel-2.13.0"
STATES = (*COMMITS, WHEEL)

OFF = {"NPU_FIXES": "0"}  # nothing armed: the program installs this fix alone

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
    roots[WHEEL] = wheel_install("2.13.0")
    return {state: run_program("constant_index_shape", "indexing", env=OFF, location=root,
                               genuine=state != WHEEL)
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
