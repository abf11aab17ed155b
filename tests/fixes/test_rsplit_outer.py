"""rsplit-outer: the rule, the fixed wheels left alone, the pre-fix predicate repaired, and
the repaired genuine pre-fix state compared with the reference state case by case."""

from __future__ import annotations

import itertools
from types import SimpleNamespace as NS

import pytest

from npu_fixes.fixes.rsplit_outer import kernel_allows_split, live_outputs, split_allowed
from tests.conftest import FIXED_UPSTREAM, run_program, wheel_install
from tests.genuine_states import COMMITS, DEFECTS, REFERENCE, WITHOUT_UNFIXED

#: Armed only by npu_fixes.apply() in the body, after the probe; rsplit-outer alone on its
#: predicate: the siblings for defects no published state has fixed are switched off (their
#: tests: test_rsplit_nested_range.py, test_rsplit_epilogue.py).
OFF = {"NPU_FIXES": "0", **WITHOUT_UNFIXED}
SEED = "OUTER|sum|two|nested|bert"  # hf_Bert: 2048x768 pointwise + 1x768 reduction store


#: Genuine states: the only one with the defect, and the commit where upstream fixed it.
DEFECTIVE, UPSTREAM_FIX = "8bfbb9ed1", "95c9094da"

# Why the repaired DEFECTIVE state decides otherwise than REFERENCE; every other case agrees.
NONSUM = "rsplit-nonsum: separate upstream fix in 95c9094da, not part of rsplit-outer"
INNER = ("rsplit-inner: 95c9094da also extended the split to INNER reductions (a feature); "
         "the pre-fix predicate never splits INNER and the repair only narrows it")
ONE_LIVE = ("one", "one+removed", "one+removed-name", "inplace", "one+inplace-removed")
SPLIT_SIZES = ("bert", "scalar")  # x <= 40 cores * 256, r >= 2048 and r >= x
NAMED_DIFFERENCES: dict[str, str] = {
    **{f"OUTER|{r}|{o}|{t}|{s}": NONSUM for r in ("max", "min", "prod", "argmax")
       for o in ONE_LIVE for t in ("flat", "nested", "nested-aliased", "split") for s in SPLIT_SIZES},
    **{f"INNER|sum|{o}|{t}|{s}": INNER
       for o in ONE_LIVE for t in ("flat", "nested", "nested-aliased", "split") for s in SPLIT_SIZES},
}


@pytest.fixture(scope="module")
def genuine_results(genuine) -> dict[str, dict]:
    """The battery at the defective state (before and after repair, one interpreter), at
    the commit that fixed it and at the reference state. rsplit-outer alone: its sibling for
    the reduction type (rsplit-nonsum, tests/fixes/test_rsplit_nonsum.py) is switched off,
    so the cases it repairs stay listed above."""
    env = {**OFF, "NPU_FIXES_DISABLE": OFF["NPU_FIXES_DISABLE"] + ",rsplit-nonsum"}
    return {s: run_program("rsplit_outer", "decisions", env=env, location=genuine(s)) for s in (DEFECTIVE, UPSTREAM_FIX, REFERENCE)}


@pytest.fixture(scope="module")
def fixed_results() -> dict[str, dict]:
    return {v: run_program("rsplit_outer", "decisions", env=OFF, location=wheel_install(v)) for v in FIXED_UPSTREAM}


@pytest.fixture(scope="module")
def prefix_result(prefix_copy) -> dict:
    return run_program("rsplit_outer", "decisions", env=OFF, location=prefix_copy("rsplit-outer"))


# -- the rule ---------------------------------------------------------------------------
def test_live_outputs_counts_removed_and_inplace_once():
    from torch._inductor.codegen.common import REMOVED, InplacedBuffer

    shared = InplacedBuffer("in_out_ptr0", ["buf2", "buf3"])
    other = InplacedBuffer("in_out_ptr1", ["buf4", "buf5"])
    for outputs, inplace, expected in [
        ({}, {}, 0),
        ({"a": "out_ptr0"}, {}, 1),
        ({"a": "out_ptr0", "b": "out_ptr1"}, {}, 2),
        ({"a": REMOVED, "b": "out_ptr1"}, {}, 1),
        ({"a": "REMOVED", "b": "REMOVED"}, {}, 0),
        ({}, {"buf2": shared, "buf3": shared}, 1),
        ({}, {"buf2": shared, "buf3": shared, "buf4": other, "buf5": other}, 2),
        ({}, {"buf2": REMOVED, "buf3": shared}, 1),
        ({"a": "out_ptr0"}, {"buf2": shared, "buf3": shared}, 2),
        ({}, {"x": InplacedBuffer("in_out_ptr0", [])}, None),  # no names: cannot tell
        ({}, {"x": object()}, None),
    ]:
        assert live_outputs(NS(output_buffers=outputs, inplace_buffers=inplace)) == expected


def test_split_allowed_needs_upstream_and_one_live_output():
    for upstream, outputs in itertools.product((True, False), (None, 0, 1, 2, 3)):
        assert split_allowed(upstream, outputs) is (upstream and outputs == 1), (upstream, outputs)


def test_kernel_that_cannot_be_read_is_rejected():
    assert kernel_allows_split(NS()) is False  # no args
    assert kernel_allows_split(NS(args=NS(output_buffers={"a": "out_ptr0"}))) is False  # no inplace_buffers
    assert kernel_allows_split(NS(args=NS(output_buffers={"a": "out_ptr0"}, inplace_buffers={}))) is True


# -- real upstream code ------------------------------------------------------------------
@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_is_left_identical(fixed_results, version):
    res = fixed_results[version]
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["restored"] and res["undo"] == 0
    assert res["before"] == res["after"]
    assert res["after"][SEED] is False
    assert res["after"]["OUTER|sum|one|nested|bert"] is True  # the battery reaches acceptance


def test_fixed_wheels_agree(fixed_results):
    a, b = (fixed_results[v]["after"] for v in FIXED_UPSTREAM)
    assert a == b


def test_prefix_copy_is_detected_and_repaired(prefix_result):
    res = prefix_result
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["before"][SEED] is True and res["after"][SEED] is False  # the hf_Bert kernel
    assert res["undo"] >= 1 and res["restored"]


def test_prefix_repaired_matches_fixed_upstream(prefix_result, fixed_results):
    fixed = fixed_results["2.13.0"]["after"]
    before, after = prefix_result["before"], prefix_result["after"]
    assert before != fixed  # the battery does see the defect
    assert fixed.keys() == after.keys()
    assert after == fixed  # case by case, the fixed wheel's decisions


# -- genuine states ------------------------------------------------------------------------
def test_genuine_states_are_the_documented_ones():
    assert [c for c in COMMITS if "rsplit-outer" in DEFECTS[c]] == [DEFECTIVE]
    assert COMMITS.index(DEFECTIVE) < COMMITS.index(UPSTREAM_FIX) <= COMMITS.index(REFERENCE)


def test_genuine_defective_state_is_detected_and_repaired(genuine_results):
    res = genuine_results[DEFECTIVE]
    assert res["probe_before"] is True and res["state"] == "applied"
    assert not res["identical"] and res["probe_after"] is False
    assert res["before"][SEED] is True and res["after"][SEED] is False
    assert res["undo"] >= 1 and res["restored"]


@pytest.mark.parametrize("state", [UPSTREAM_FIX, REFERENCE])
def test_genuine_fixed_states_are_left_identical(genuine_results, state):
    res = genuine_results[state]
    assert res["probe_before"] is False and res["state"] == "not-needed"
    assert res["identical"] and res["restored"] and res["probe_after"] is False
    assert res["before"] == res["after"]
    assert res["after"][SEED] is False
    assert res["after"]["OUTER|sum|one|nested|bert"] is True  # the battery reaches acceptance


def test_genuine_fixed_states_agree(genuine_results):
    assert genuine_results[UPSTREAM_FIX]["after"] == genuine_results[REFERENCE]["after"]


def test_genuine_repaired_matches_reference_except_named(genuine_results):
    """Every battery case decides as at REFERENCE, except exactly the named ones; only
    the reduction-type difference (a separate upstream fix) accepts more than REFERENCE."""
    before = genuine_results[DEFECTIVE]["before"]
    after, ref = genuine_results[DEFECTIVE]["after"], genuine_results[REFERENCE]["after"]
    assert after.keys() == ref.keys() >= NAMED_DIFFERENCES.keys()
    assert before != ref  # the battery does see the defect
    differing = {case for case in after if after[case] is not ref[case]}
    assert differing == NAMED_DIFFERENCES.keys()
    for case, reason in NAMED_DIFFERENCES.items():
        assert after[case] is (reason == NONSUM), (case, reason)  # NONSUM: we accept, REFERENCE not


def test_genuine_repair_on_reduction_types(genuine_results):
    """sum/max/min/prod/argmax: the repair decides alike for every type (it looks at the
    outputs only); REFERENCE splits sum alone. Welford is never split."""
    after, ref = genuine_results[DEFECTIVE]["after"], genuine_results[REFERENCE]["after"]

    def accepted(results, rtype):
        return {c.replace(f"|{rtype}|", "|*|") for c, ok in results.items() if ok and c.split("|")[1] == rtype}

    assert accepted(after, "sum")  # the battery reaches acceptance after repair
    for rtype in ("max", "min", "prod", "argmax"):
        assert accepted(after, rtype) == accepted(after, "sum"), rtype
        assert not accepted(ref, rtype), rtype
    assert not accepted(after, "welford_reduce") and not accepted(ref, "welford_reduce")
    assert accepted(after, "sum") < accepted(ref, "sum")
