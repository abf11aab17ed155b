"""modular-fold-bound: chains of reshapes and transposes whose index holds a modulo of a
modulo, compiled through every genuine state and both published wheels, kernels run in
Triton's interpreter (every load bounds-checked), against eager; and the rule on indexes."""

from __future__ import annotations

import pytest

from tests.conftest import FIXED_UPSTREAM, assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

STATES = (*COMMITS, *FIXED_UPSTREAM)
PROGRAMS = ("reshape-6x3", "reshape-10x3", "reshape-4x5", "transpose-sum")
DEFECTIVE = ("reshape-6x3", "reshape-10x3")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "modular_fold_bound", "chains")


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    """The live method folds the probe's index wrongly at every state, the wheels included."""
    res = runs[state]
    assert_probed_repaired_and_undone(res, "is folded to 3*((x0//2)) + 27*(ModularIndexing(x0, 1, 2))")


@pytest.mark.parametrize("state", COMMITS)
def test_reads_past_the_input_as_built_and_equals_eager_with_npu_fixes(runs, state):
    before, after = runs[state]["before"], runs[state]["after"]
    for label in DEFECTIVE:
        assert "a load outside every buffer" in str(before[label]), (label, before[label])
    assert before["reshape-4x5"] is True and before["transpose-sum"] is True
    assert after == dict.fromkeys(PROGRAMS, True), after


@pytest.mark.parametrize("state", FIXED_UPSTREAM)
def test_the_wheels_compute_these_programs_right_either_way(runs, state):
    """No program here reaches the wheels' fold with such an index: right as built, and
    unchanged with npu_fixes."""
    assert runs[state]["before"] == runs[state]["after"] == dict.fromkeys(PROGRAMS, True)


def test_only_bases_that_do_not_grow_and_are_not_bounded_are_hidden():
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    from npu_fixes.fixes import modular_fold_bound as fix

    x0, x1 = sympy.symbols("x0 x1", integer=True, nonnegative=True)
    ranges = {x0: sympy.Integer(9), x1: sympy.Integer(4)}
    assert fix.grows(FloorDiv(x0, 2) + 3 * x1, set(ranges))
    assert not fix.grows(ModularIndexing(x0, 1, 2), set(ranges))
    assert not fix.grows(8 - x0, set(ranges))
    base = FloorDiv(x0, 2) + 9 * ModularIndexing(x0, 1, 2)  # reaches 13
    assert fix.unsafe_atoms(ModularIndexing(base, 1, 6), ranges) == [ModularIndexing(base, 1, 6)]
    small = FloorDiv(x0, 2) + ModularIndexing(x0, 1, 2)  # at most 5: the fold is right
    assert fix.unsafe_atoms(ModularIndexing(small, 1, 6), ranges) == []
    assert fix.unsafe_atoms(ModularIndexing(x0 + x1, 1, 16), ranges) == [], "grows: left to the method"
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    assert fix.unsafe_atoms(ModularIndexing(small, 1, 6), {x0: 2 * s0 + 1, x1: sympy.Integer(4)}) == [
        ModularIndexing(small, 1, 6)], "a length known only at run time proves no bound"

    def drop_all(index):  # a fold that drops every modulo of divisor 1
        return index.replace(lambda e: isinstance(e, ModularIndexing), lambda e: e.args[0])

    index = 3 * ModularIndexing(base, 1, 6) + ModularIndexing(x1, 1, 2)
    kernel = type("Kernel", (), {"var_ranges": lambda self: ranges})()
    assert fix.fold_safely(drop_all, kernel, index) == 3 * ModularIndexing(base, 1, 6) + x1
