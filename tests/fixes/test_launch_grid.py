"""launch-grid: the rule, the fixed wheels left alone, and the pre-fix launcher repaired."""

from __future__ import annotations

import fnmatch

import pytest

from npu_fixes.fixes.launch_grid import presents_one_node
from tests.conftest import FIXED_UPSTREAM, run_program, wheel_install
from tests.genuine_states import DEFECTS, PRE_FIX, REFERENCE, sharing_the_target

# Loaded with NPU_FIXES=0: the battery (tests/programs/launch_grid.py) builds real
# launchers from stand-in binaries over metadata x kernel shape x XBLOCK x core count,
# launches each over several xnumel values and records the grids asked for and a
# fingerprint of the generated launcher's code; then npu_fixes is armed.
OFF = {"NPU_FIXES": "0"}

SEED = "Grid1D/0|pointwise|1|48"
#: The metadata labels (before the first "|") of the cases the defect covers: zero-node
#: Grid1D kernels with an xnumel (the recipe only off A5; the no-linearize exact grid loses
#: to the clamp, as upstream's order has it).
DEFECT_METAS = {"Grid1D/0", "None/0", "1D/0/store-cubin", "1D/0/extra-arg", "1D/0/no-linearize",
                "1D/0/rsplit-partial", "recipe/a5=False/0", "1D/0/extra-xnumel"}


def in_defect(key: str) -> bool:
    """Whether the defect covers a battery case: a zero-node Grid1D metadata label, and a
    pointwise kernel (or, for extra-xnumel, the kernel whose xnumel comes only from there)."""
    meta, _, rest = key.partition("|")
    return meta in DEFECT_METAS and (not rest or rest.startswith("pointwise") or meta.endswith("extra-xnumel"))


@pytest.fixture(scope="module")
def prefix_runs(prefix_copy):
    """The pre-fix copy before and after npu_fixes applies, in one interpreter."""
    return run_program("launch_grid", "prefix", env=OFF, location=prefix_copy("launch-grid"))


@pytest.fixture(scope="module")
def fixed_runs():
    return {v: run_program("launch_grid", "applied", env=OFF, location=wheel_install(v)) for v in FIXED_UPSTREAM}


# -- the rule ------------------------------------------------------------------------------


def test_presentation_only_for_zero_node_kernels_the_rule_accepts():
    pw, red = ["in_out_ptr0", "xnumel", "XBLOCK"], ["in_ptr0", "xnumel", "XBLOCK", "R0_BLOCK"]
    assert presents_one_node({"grid_type": "Grid1D", "npu_num_x_nodes": 0}, pw)
    assert presents_one_node({"npu_num_x_nodes": 0}, pw)  # Grid1D is the default
    assert presents_one_node({"npu_num_x_nodes": 0, "extra_launcher_args": ["xnumel"]}, ["in_ptr0"])
    for meta, names in [
        ({"grid_type": "Grid1D", "npu_num_x_nodes": 1}, pw),  # already takes the branch
        ({"grid_type": "Grid1D"}, pw),  # missing node count stays conservative
        ({"grid_type": "Grid1D", "npu_num_x_nodes": 2}, pw),
        ({"grid_type": "Grid2D", "npu_num_x_nodes": 0}, pw),
        ({"grid_type": "Grid1D", "npu_num_x_nodes": 0}, red),
        ({"grid_type": "Grid1D", "npu_num_x_nodes": 0}, ["in_out_ptr0", "ks0"]),
    ]:
        assert not presents_one_node(meta, names), meta


# -- real upstream code ----------------------------------------------------------------------


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(fixed_runs, version):
    res = fixed_runs[version]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    assert res["battery"][SEED]["grids"][1] == 1


def test_prefix_copy_is_detected_and_matches_upstream_after_fix(prefix_runs, fixed_runs):
    res = prefix_runs
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after, upstream = res["battery"], res["battery_after"], fixed_runs["2.13.0"]["battery"]
    assert len(upstream) > 400 and after.keys() == upstream.keys()
    mismatched = [k for k in upstream if after[k] != upstream[k]]
    assert not mismatched, mismatched[:5]
    # the seed: scalar Grid1D, 0 nodes, xnumel=1 -> 1 program (the old rule gave 48)
    assert before[SEED]["grids"][1] == 48 and after[SEED]["grids"][1] == 1
    # only the cases the defect covers change, on every metadata label of it
    changed = {k for k in upstream if before[k] != upstream[k]}
    assert {k.split("|")[0] for k in changed} == DEFECT_METAS
    assert all(in_defect(k) for k in changed)
    assert res["meta_after_error"] == [True, True]
    assert res["undo"] >= 1 and res["restored"] is True


def test_launcher_is_built_once_with_upstream_code(prefix_runs, fixed_runs):
    """The patched launcher is the plain generated function, code-identical to upstream's
    fixed one: no wrapper and no added work per launch."""
    after, upstream = prefix_runs["battery_after"], fixed_runs["2.13.0"]["battery"]
    for key, case in after.items():
        assert case["code"][0] == "function"
        assert case["code"] == upstream[key]["code"], key
    assert prefix_runs["battery"][SEED]["code"] != after[SEED]["code"]  # the branch did change


def test_fix_applies_when_imported_after_the_backend_loaded(prefix_copy):
    res = run_program("launch_grid", "imported_after_load", location=prefix_copy("launch-grid"))
    assert res == {"state": "applied", "grids": [1, 1, 1]}


# -- genuine upstream states ----------------------------------------------------------------

#: Genuine states with this fix's defect, each compared with the reference state.
DEFECTIVE = tuple(s for s in PRE_FIX if "launch-grid" in DEFECTS[s])
SCALAR_REDUCTION = (
    "scalar-reduction-grid: upstream's separate one-program branch for unsplit scalar "
    "reductions (Grid1D, zero or missing x nodes, R0_BLOCK, no rsplit partial), added in "
    "95c9094da; launch-grid leaves reductions alone on purpose, so 8bfbb9ed1 keeps one "
    "program per core for them"
)
#: state -> {case pattern: reason} of cases where the repaired state legitimately differs
#: from REFERENCE (grids and launcher code alike); a state not listed has none.
LEGITIMATE: dict[str, dict[str, str]] = {
    "8bfbb9ed1": {f"{meta}|reduction|*": SCALAR_REDUCTION for meta in (
        "Grid1D/0", "None/0", "Grid1D/None", "None/None",
        "1D/0/no-linearize", "1D/0/store-cubin", "1D/0/extra-arg")},
}


@pytest.fixture(scope="module")
def genuine_runs(genuine):
    """Each defective genuine state and the reference, before and after npu_fixes applies,
    in one interpreter per state. launch-grid alone: the other fixes of ``make_launcher``
    are switched off (its sibling for scalar reductions, scalar-reduction-grid, repairs the
    cases listed below; the nonlinearize-grid guard wraps it too)."""
    env = {**OFF, "NPU_FIXES_DISABLE": sharing_the_target("launch-grid")}
    return {s: run_program("launch_grid", "applied", env=env, location=genuine(s), again=True)
            for s in (*DEFECTIVE, REFERENCE)}


def listed(patterns: dict[str, str], cases) -> set[str]:
    """The cases matched by the patterns; each pattern must match at least one case."""
    found = {p: {k for k in cases if fnmatch.fnmatchcase(k, p)} for p in patterns}
    assert all(found.values()), [p for p, ks in found.items() if not ks]
    return set().union(*found.values())


def test_genuine_states_cover_the_defect():
    assert DEFECTIVE == ("8bfbb9ed1", "95c9094da", "f8802037a") and not DEFECTS[REFERENCE]


def test_reference_state_is_left_identical(genuine_runs):
    res = genuine_runs[REFERENCE]
    assert res["probe_before"] is False and res["probe_after"] is False
    assert res["state"] == "not-needed" and res["identical"] is True
    assert res["battery_after"] == res["battery"]
    assert res["battery"][SEED]["grids"][1] == 1


@pytest.mark.parametrize("state", DEFECTIVE)
def test_genuine_state_is_repaired_like_reference(genuine_runs, state):
    """Grids and launcher code fingerprints after the repair equal the reference on every
    case but the listed ones. The fingerprints are comparable here (unlike against the
    wheel): every genuine state generates the same launcher layout (3.2.x launch hooks, no
    compat switch), so code differs only where the chosen grid branch does."""
    res, reference = genuine_runs[state], genuine_runs[REFERENCE]["battery"]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert res["identical"] is False and res["probe_after"] is False
    before, after = res["battery"], res["battery_after"]
    assert len(reference) > 600 and before.keys() == after.keys() == reference.keys()
    differing = {k for k in reference if after[k] != reference[k]}
    assert differing == listed(LEGITIMATE.get(state, {}), reference)
    assert before[SEED]["grids"][1] == 48 and after[SEED]["grids"][1] == 1
    # the repair changes exactly the cases the defect covers, on every metadata label of it;
    # everything else that differed before is a listed difference
    repaired = {k for k in reference if before[k] != after[k]}
    assert {k.split("|")[0] for k in repaired} == DEFECT_METAS
    assert all(in_defect(k) for k in repaired), sorted(k for k in repaired if not in_defect(k))[:5]
    assert {k for k in reference if before[k] != reference[k]} == repaired | differing
    assert not repaired & differing
