"""axis-split-self-reference: ``pixel_shuffle`` under ``dynamic=True`` and the three live index
rewrites, at every genuine commit and the 2.13.0 wheel, kernels run in Triton's interpreter,
against eager (tests/programs/axis_split_self_reference.py)."""

from __future__ import annotations

import pytest
import sympy

from npu_fixes.fixes import axis_split_self_reference as fix
from tests.conftest import assert_probed_repaired_and_undone, run_at_states
from tests.genuine_states import COMMITS

WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
PROGRAMS = tuple(f"{label}-{way}" for label in ("shuffle-9-by-3", "shuffle-18-by-3", "shuffle-8-by-2")
                 for way in ("forward", "backward"))


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "axis_split_self_reference", "pixel_shuffles")


class _SizeVars:
    """Answers as Inductor's would for plain integers."""

    def statically_known_equals(self, left, right):
        return left == right

    def statically_known_multiple_of(self, length, factor):
        return length % factor == 0


def test_only_a_length_known_to_equal_its_factor_is_refused_and_only_inside_the_block():
    sizevars = _SizeVars()
    with fix.no_split_into_itself(sizevars):
        assert [sizevars.statically_known_multiple_of(*q) for q in ((9, 3), (3, 3), (7, 3))] == [True, False, False]
        with fix.no_split_into_itself(sizevars):  # a rewrite inside another keeps the one override
            assert sizevars.statically_known_multiple_of(3, 3) is False
        assert sizevars.statically_known_multiple_of(3, 3) is False
    assert sizevars.statically_known_multiple_of(3, 3) is True and "statically_known_multiple_of" not in vars(sizevars)


def test_a_node_mapped_to_an_expression_of_itself_is_found():
    x0, x1 = sympy.symbols("x0 x1")

    class Tree:
        tree_node_mapping = {"x0": x0 + 3 * x1, "x2": 3 * x1 + x0}

    assert fix.self_referencing(Tree()) == {"x0": x0 + 3 * x1}


@pytest.mark.parametrize("state", STATES)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "maps x0 <- x0 + 3*x1")


@pytest.mark.parametrize("state", STATES)
def test_no_rewrite_defines_a_node_from_itself_with_npu_fixes(runs, state):
    """As built each of the three rewrites maps the node it splits to an expression of
    itself where its length is known to equal the factor; with npu_fixes none does."""
    before, after = runs[state]["before"]["rewrites"], runs[state]["after"]["rewrites"]
    assert before == {"_maybe_split_fused_axes": {"x0": "x0 + 3*x1"},
                      "_simplify_compound_indexing": {"x0": "x0 + 3*x1"},
                      "_maybe_split_strided_axis": {"x0": "x0 + 8*x1"}}, before
    assert after == dict.fromkeys(fix.METHODS, {}), after


@pytest.mark.parametrize("state", STATES)
def test_pixel_shuffle_equals_eager_with_npu_fixes(runs, state):
    """At the five commits the backward of ``pixel_shuffle`` of 9 channels by 3 stops with
    ``UnboundLocalError`` as built (the wheel takes another kernel there and is right); with
    npu_fixes every program equals eager, and none that was right as built changes."""
    before, after = runs[state]["before"], runs[state]["after"]
    assert {p: after[p] for p in PROGRAMS} == dict.fromkeys(PROGRAMS, True), after
    broken = {p for p in PROGRAMS if before[p] is not True}
    if state == WHEEL:
        assert broken == set(), before
    else:
        assert broken == {"shuffle-9-by-3-backward"}, before
        assert before["shuffle-9-by-3-backward"].startswith("UnboundLocalError: cannot access local variable 'y4'")
