"""What upstream's own regression tests (added in 5ff81d9c5) are expected to do at each state.

The tests themselves are never copied here: ``tests/upstream_peer.py`` runs them from
``$NPU_FIXES_UPSTREAM/tests-5ff81d9c5`` and marks each with :func:`expect`.

Each test exercises one defect, named as the fix that handles it (:data:`EXERCISES`). At a
state, a test is expected to pass where that defect is absent (``tests/genuine_states.py``:
``DEFECTS`` for the five, ``BEYOND`` for the others, :data:`UNLISTED` for one no fix handles)
or where a fix of that name is registered in :data:`npu_fixes.fixes.FIX_NAMES`: registering
a fix flips its tests to "pass" with no edit here. Otherwise the test is an expected
failure, ``xfail(strict=True)``, so an unexpected pass fails the run too.

Where a test cannot pass for a reason other than the defect, the reason is listed, and the
test still runs as a strict expected failure (never skipped):

- :data:`NEEDS_HELPER`: it calls a backend helper that this state lacks;
- :data:`HOW_UPSTREAM_FIXED_IT`: besides the behaviour, it checks how upstream made its fix
  (a message's wording, an entry in a list), which npu_fixes' repair does its own way.

:data:`PASSES_REGARDLESS` names tests that pass with or without the defect (guards that a
repair must keep passing, or tests that prove nothing): expected to pass everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping

from tests import genuine_states

#: The folder under ``genuine_states.upstream_dir()`` that holds upstream's test files.
FOLDER = "tests-5ff81d9c5"

_REG = "test_triton_experimental_regressions.py::TestTritonExperimentalRegressions::"
_DEB = "test_triton_experimental_deberta_regressions.py::TestTritonExperimentalDebertaRegressions::"
_BERT = "test_triton_experimental_native_bert_regressions.py::TestTritonExperimentalNativeBertRegressions::"

#: Upstream test (``file::class::name``) -> the defect it exercises, named as its fix.
EXERCISES: dict[str, str] = {
    _REG + "test_cat_store_dtype_accepts_subgraph_lowering": "cat-store-subgraph",
    _REG + "test_cat_store_dtype_preserves_regular_value_dtype": "cat-store-subgraph",
    _REG + "test_control_deps_is_not_replaced_with_fallback": "control-deps-lowering",
    _REG + "test_constant_index_normalizes_emitted_and_cse_shapes": "constant-index-shape",
    _REG + "test_constant_index_keeps_explicit_copy_shape": "constant-index-shape",
    _DEB + "test_bernoulli_fallback_disables_npugraph_capture": "rng-capture-gate",
    _DEB + "test_scalar_pointwise_grid_is_clamped": "launch-grid",
    _BERT + "test_outer_rsplit_rejects_fused_pointwise_output": "rsplit-outer",
    _BERT + "test_outer_rsplit_rejects_nested_reduction_tree": "rsplit-outer",
    _BERT + "test_dualview_reduction_fold_reuses_registered_flat_symbol": "dualview-fold",
    _BERT + "test_downcast_inout_preserves_input_before_writeback": "boundary-downcast",
}

#: Defects a test exercises that ``genuine_states`` does not list: name -> (states, why).
UNLISTED: dict[str, tuple[frozenset[str], str]] = {
    "cat-store-subgraph": (frozenset({"8bfbb9ed1"}), (
        "ir._cat_store_dtype reads value.dtype, which a SubgraphLowering lacks; upstream removed "
        "the helper with the concat-loop kernel in 95c9094da, and no npu_fixes fix handles it")),
}

#: Tests that call a backend helper by name: test -> (module short name, helper, why it may
#: be missing). Where the live backend lacks the helper, the test cannot pass.
NEEDS_HELPER: dict[str, tuple[str, str, str]] = {
    _REG + "test_cat_store_dtype_accepts_subgraph_lowering": (
        "ir", "_cat_store_dtype", "upstream deleted it in 95c9094da, before the commit that adds this test"),
    _REG + "test_cat_store_dtype_preserves_regular_value_dtype": (
        "ir", "_cat_store_dtype", "upstream deleted it in 95c9094da, before the commit that adds this test"),
    _DEB + "test_scalar_pointwise_grid_is_clamped": (
        "npu_triton_heuristics", "_can_clamp_1d_grid",
        "upstream added it with its fix in 5ff81d9c5; our launch-grid repair wraps make_launcher instead"),
}

#: Tests that also check how upstream made its fix, not only what the code does: test ->
#: what differs. They fail where npu_fixes' repair stands in for upstream's fix, for that only.
HOW_UPSTREAM_FIXED_IT: dict[str, str] = {
    _DEB + "test_bernoulli_fallback_disables_npugraph_capture": (
        "the capture-skip reason must contain upstream's phrase 'no graph-safe seed/offset ABI'; "
        "rng-capture-gate's reason names the op and says in its own words why capture is skipped "
        "(every behavioural assertion before that line passes: reason set, op named, lowering called)"),
    _REG + "test_control_deps_is_not_replaced_with_fallback": (
        "asserts control_deps is in lowering_override_list.KEEP_UPSTREAM_LOWERING and that the "
        "registration never calls make_fallback for it; control-deps-lowering leaves the list as "
        "it is and gives control_deps its own lowering back after the registration (the compile "
        "that failed now succeeds and matches eager: tests/fixes/test_control_deps_lowering.py)"),
}

#: Tests that pass with or without their defect: test -> why.
PASSES_REGARDLESS: dict[str, str] = {
    _REG + "test_cat_store_dtype_preserves_regular_value_dtype": (
        "guard: a plain value's dtype is returned wherever the helper exists"),
    _REG + "test_constant_index_keeps_explicit_copy_shape": (
        "guard: an explicit copy_shape is left alone at every state; a repair must keep it so"),
    _BERT + "test_outer_rsplit_rejects_nested_reduction_tree": (
        "not an oracle: passes at every state by accident, its mocked kernel is rejected "
        "before the tree shape is looked at"),
}


@dataclasses.dataclass(frozen=True)
class Expectation:
    outcome: str  # "pass" or "xfail"
    reason: str
    strict: bool = True


def defect_present(fix: str, state: str, live: Mapping[str, str]) -> bool | None:
    """Whether the defect that ``fix`` handles is in ``state`` (None: not known). For a state
    whose defects are not known in advance (``genuine_states.OWN_TREE``), the verdict of a
    registered fix's probe in this process (``live``: fix name -> state) says so."""
    if fix in UNLISTED:
        states, _ = UNLISTED[fix]
        return state in states if state in genuine_states.DEFECTS else None
    if state in genuine_states.DEFECTS:
        if fix in genuine_states.FIVE:
            return fix in genuine_states.DEFECTS[state]
        return state in genuine_states.BEYOND[fix]
    return {"applied": True, "upgrade-needed": True, "guarded": True, "not-needed": False}.get(live.get(fix, ""))


def expect(test: str, state: str, registered: Collection[str], has_helper: Callable[[str, str], bool],
           live: Mapping[str, str]) -> Expectation:
    """The expected outcome of upstream test ``test`` (a key of :data:`EXERCISES`) at ``state``.

    ``registered``: the fix names npu_fixes registers; ``has_helper(module, name)``: whether
    the live backend has that helper; ``live``: fix name -> its state in this process.
    """
    fix = EXERCISES[test]
    if test in NEEDS_HELPER:
        module, name, why = NEEDS_HELPER[test]
        if not has_helper(module, name):
            return Expectation("xfail", f"structural: calls {module}.{name}, absent at {state} ({why})")
    if test in PASSES_REGARDLESS:
        return Expectation("pass", PASSES_REGARDLESS[test])
    present = defect_present(fix, state, live)
    if present is False:
        return Expectation("pass", f"{fix}: defect absent at {state}")
    if present is None:
        return Expectation("xfail", f"{fix}: defect presence at {state} not known", strict=False)
    if fix not in registered:
        why = f" ({UNLISTED[fix][1]})" if fix in UNLISTED else ""
        return Expectation("xfail", f"{fix}: defect present at {state} and no npu_fixes fix of that name{why}")
    if live.get(fix) in ("upgrade-needed", "guarded"):
        return Expectation("xfail", f"{fix}: defect present at {state}; npu_fixes only guards it (no "
                           "run-time repair)")
    if test in HOW_UPSTREAM_FIXED_IT and live.get(fix) == "applied":
        return Expectation("xfail", f"{fix} repaired in its own way: {HOW_UPSTREAM_FIXED_IT[test]}")
    return Expectation("pass", f"{fix}: defect present at {state}, npu_fixes' fix is {live.get(fix)}")
