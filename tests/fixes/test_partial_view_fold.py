"""partial-view-fold: the span fold on stand-in trees in-process, then a transpose under a
``slice_scatter`` and a product compiled through every genuine commit and the 2.13.0 wheel,
kernels run in Triton's interpreter, against eager, with the lanes of its tile loops
(tests/programs/partial_view_fold.py)."""

from __future__ import annotations

import pytest
import sympy
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

from npu_fixes.fixes.partial_view_fold import fold_spans, stand_in_tree
from npu_fixes.fixes.shared.codegen_kernel import cpu_graph
from tests.conftest import assert_probed_repaired_and_undone, run_at_states, run_program, wheel_install
from tests.genuine_states import COMMITS

#: The pointwise kernel's elements, and its lanes as built: 17 x 65 x 3 x 195.
ELEMENTS, AS_BUILT_LANES = 3 * 65 * 17, 17 * 65 * 3 * 195


def _fold(nodes: list[tuple[str, int, int]], basis: set[str], numel: int) -> tuple[dict, dict]:
    """``fold_spans`` on a tree of ``(name, divisor, length)`` nodes under a CPU graph."""
    matcher: dict = {}
    with cpu_graph() as graph:
        mapped = fold_spans(graph.sizevars, stand_in_tree(nodes, numel), basis, {}, matcher)
    return mapped, matcher


def test_a_view_of_whole_basis_nodes_becomes_their_mixed_radix_sum():
    """The sweep's program: basis x0 (17), x1 (257), x2 (15); x4 (3855) is the span of x1 and x2."""
    mapped, matcher = _fold([("x0", 1, 17), ("x1", 17, 257), ("x2", 4369, 15), ("x4", 17, 3855)],
                            {"x0", "x1", "x2"}, 65535)
    x1, x2 = sympy.symbols("x1 x2")
    assert mapped == {"x4": x1 + 257 * x2}
    assert matcher == {"x4 = x4index": "x4 = x1 + 257*x2"}


def test_a_view_inside_one_basis_node_becomes_its_div_and_mod():
    """BigBird's case (the probe's stand-in): x3 (64) * x2 (64) inside x0's 4096."""
    mapped, _ = _fold([("x0", 1, 4096), ("x1", 4096, 64), ("x2", 1, 64), ("x3", 64, 64)], {"x0", "x1"}, 262144)
    flat = sympy.Symbol("x0") + 4096 * sympy.Symbol("x1")
    assert mapped == {"x2": ModularIndexing(flat, 1, 64), "x3": ModularIndexing(flat, 64, 64)}


def test_a_view_reaching_the_top_is_a_quotient_and_nodes_off_any_span_stay_free():
    """x5 (4) then x6 (32) run from the basis's start to its top, across x0's end; x7 starts on a
    boundary (8) but ends at 24, none."""
    mapped, _ = _fold([("x0", 1, 8), ("x1", 8, 16), ("x5", 1, 4), ("x6", 4, 32), ("x7", 8, 3)], {"x0", "x1"}, 128)
    flat = sympy.Symbol("x0") + 8 * sympy.Symbol("x1")
    assert mapped == {"x5": ModularIndexing(flat, 1, 4), "x6": FloorDiv(flat, 4)}


def test_nothing_is_folded_without_a_complete_basis():
    assert _fold([("x0", 1, 17), ("x1", 17, 257), ("x4", 17, 257)], {"x0", "x1"}, 65535) == ({}, {})
    assert _fold([("x1", 17, 257), ("x4", 17, 257)], {"x1"}, 4369) == ({}, {})


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, COMMITS, "partial_view_fold", "folds")


@pytest.mark.parametrize("state", COMMITS)
def test_probe_says_needed_and_the_fix_applies(runs, state):
    assert_probed_repaired_and_undone(runs[state], "x3 * 64 + x2 inside x0's 4096")


@pytest.mark.parametrize("state", COMMITS)
def test_the_kernel_runs_over_its_elements_once_with_npu_fixes(runs, state):
    """As built the pointwise kernel's loops run over 195 times its elements (the result is
    right: each value is stored 195 times); with npu_fixes over its elements once, still right."""
    before, after = runs[state]["before"], runs[state]["after"]
    assert before == {"equal": True, "lanes": AS_BUILT_LANES}, before
    assert after == {"equal": True, "lanes": ELEMENTS}, after


def test_the_wheel_folds_the_span_itself():
    res = run_program("partial_view_fold", "as_built", env={"NPU_FIXES": "0"}, location=wheel_install("2.13.0"))
    assert res == {"equal": True, "lanes": ELEMENTS}, res
