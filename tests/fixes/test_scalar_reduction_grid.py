"""scalar-reduction-grid: the rule, the probe at every genuine state, and the launcher grids
of 8bfbb9ed1 repaired like 5ff81d9c5's, stacked with launch-grid in either order."""

from __future__ import annotations

import fnmatch
import itertools

import pytest

from npu_fixes.fixes.scalar_reduction_grid import launches_one_program
from tests.conftest import run_program, wheel_install
from tests.fixes.test_launch_grid import LEGITIMATE
from tests.genuine_states import BEYOND, COMMITS, REFERENCE

NAME = "scalar-reduction-grid"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
DEFECTIVE = tuple(s for s in COMMITS if s in BEYOND[NAME])

# -- the rule ------------------------------------------------------------------------------

RED = ["in_ptr0", "out_ptr0", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"]
RSPLIT = ["in_ptr0", "ws_ptr", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"]
POINTWISE = ["in_out_ptr0", "xnumel", "XBLOCK"]


def test_rule_sweep():
    """One program exactly for Grid1D (or unset) reductions with zero (or unset) x nodes
    that are not the partial half of a cross-core split."""
    grids = (None, "Grid1D", "Grid2D", "Grid3D")
    nodes = (None, 0, 1, 2)
    partial = (None, False, True)
    for grid, node, part, names in itertools.product(grids, nodes, partial, (RED, RSPLIT, POINTWISE)):
        meta = {k: v for k, v in (("grid_type", grid), ("npu_num_x_nodes", node),
                                  ("npu_rsplit_partial", part)) if v is not None}
        is_partial = part if part is not None else names is RSPLIT
        expected = grid in (None, "Grid1D") and node in (None, 0) and names is not POINTWISE and not is_partial
        assert launches_one_program(meta, names) is expected, (meta, names)


def test_rule_needs_no_xnumel_and_reads_only_the_arg_names():
    assert launches_one_program({}, ["in_ptr0", "out_ptr0", "r0_numel", "R0_BLOCK"])
    assert not launches_one_program({"npu_num_x_nodes": None}, RED)  # an explicit None is no count
    assert launches_one_program({"npu_rsplit_partial": False}, RSPLIT)  # the mark wins over ws_ptr


# -- the wrapper, on a stand-in module, stacked with someone else's wrapper -----------------

STAND_IN = """
import types

def get_npu_vector_core_count():
    return 48

class NPUTritonCompileResult:
    def __init__(self, arg_names, inductor_meta):
        self.kernel = types.SimpleNamespace(src=types.SimpleNamespace(fn=types.SimpleNamespace(arg_names=arg_names)))
        self.inductor_meta = inductor_meta

    def make_launcher(self):
        return f"grid_0 = {get_npu_vector_core_count()}"
"""


def outside(wrapped, instance, args, kwargs):
    """Someone else's wrapper: tags what it returns."""
    return ("outside", wrapped(*args, **kwargs))


@pytest.mark.parametrize("ours_first", [True, False])
def test_wrapper_stacks_and_undoes_with_another_wrapper(make_module, ours_first):
    import importlib

    import wrapt

    from npu_fixes.fixes import scalar_reduction_grid as fix
    from npu_fixes.shim.patcher import Patcher

    mod = importlib.import_module(make_module("npu_fixes_srg_stand_in", STAND_IN))
    cls, original = mod.NPUTritonCompileResult, mod.NPUTritonCompileResult.__dict__["make_launcher"]
    ours = Patcher()
    if ours_first:
        fix.install(mod, ours)
    wrapt.wrap_function_wrapper(cls, "make_launcher", outside)
    if not ours_first:
        fix.install(mod, ours)
    assert cls(RED, {"npu_num_x_nodes": 0}).make_launcher() == ("outside", "grid_0 = 1")
    assert cls(RSPLIT, {}).make_launcher() == ("outside", "grid_0 = 48")
    assert cls(POINTWISE, {}).make_launcher() == ("outside", "grid_0 = 48")
    assert mod.get_npu_vector_core_count() == 48  # the module's own core count untouched
    assert ours.restore() == 1
    assert cls.__dict__["make_launcher"].__wrapped__ is original  # the other wrapper stays
    assert cls(RED, {}).make_launcher() == ("outside", "grid_0 = 48")


# -- genuine states ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(genuine):
    """Every state: the probe, and install and undo where it says needed; 8bfbb9ed1 and the
    reference also run launch-grid's battery, and both fixes stacked in both orders."""
    out = {}
    for state in STATES:
        root = wheel_install(WHEEL) if state == WHEEL else genuine(state)
        out[state] = run_program("scalar_reduction_grid", "probed", env={"NPU_FIXES": "0"}, location=root,
                                 stacked=state in (*DEFECTIVE, REFERENCE))
    return out


def test_probe_needed_exactly_where_the_defect_is(runs):
    assert DEFECTIVE == ("8bfbb9ed1",)
    for state in STATES:
        res = runs[state]
        assert res["probe"][0] is (state in BEYOND[NAME]), (state, res["probe"])
        if res["probe"][0]:
            assert "launched [48] programs" in res["probe"][1]
            assert res["probe_after"][0] is False, res["probe_after"]
            assert res["undo"] == 1 and res["untouched"] is True
        else:  # fixed: nothing installed, the target is the original object
            assert "launches 1 program" in res["probe"][1]
            assert "probe_after" not in res and res["untouched"] is True


def reduction_cases(cases) -> set[str]:
    """The battery cases launch-grid's test lists as this defect's at 8bfbb9ed1."""
    patterns = LEGITIMATE["8bfbb9ed1"]
    found = {k for k in cases if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    assert len(found) == 42 and all(k.split("|")[1] == "reduction" for k in found)
    return found


@pytest.mark.parametrize("order", ["lg_first", "srg_first"])
def test_both_fixes_give_the_reference_launchers(runs, order):
    """With launch-grid and this fix installed (either order), every battery case at
    8bfbb9ed1 (grids over ten xnumel values and the generated launcher's code) equals
    5ff81d9c5's, the 42 scalar-reduction cases included: nothing is left listed."""
    reference = runs[REFERENCE]["battery"]
    before, res = runs["8bfbb9ed1"]["battery"], runs["8bfbb9ed1"][order]
    assert len(reference) > 600 and res["battery"].keys() == reference.keys()
    assert res["probes"] == [False, False]
    assert [k for k in reference if res["battery"][k] != reference[k]] == []
    for key in reduction_cases(reference):
        cores = int(key.rsplit("|", 1)[1])
        assert set(before[key]["grids"]) == {cores} and set(reference[key]["grids"]) == {1}
        assert res["battery"][key]["code"][0] == "function"  # the plain generated launcher
    assert res["restored"] is True


def test_each_fix_undoes_on_its_own(runs):
    """Undoing the fix installed first leaves the other one working: launch-grid alone
    differs from the reference exactly on the 42 reduction cases; this fix alone repairs
    exactly those and leaves every other case as the unpatched state has it."""
    reference = runs[REFERENCE]["battery"]
    before = runs["8bfbb9ed1"]["battery"]
    reductions = reduction_cases(reference)
    srg_alone = runs["8bfbb9ed1"]["lg_first"]["alone"]
    lg_alone = runs["8bfbb9ed1"]["srg_first"]["alone"]
    assert srg_alone["probes"] == [True, False] and lg_alone["probes"] == [False, True]
    assert {k for k in reference if srg_alone["battery"][k] != before[k]} == reductions
    assert all(srg_alone["battery"][k] == reference[k] for k in reductions)
    assert {k for k in reference if lg_alone["battery"][k] != reference[k]} == reductions
    assert all(lg_alone["battery"][k] == before[k] for k in reductions)
