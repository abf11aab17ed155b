"""triton36-launcher: the scoped switch and the lent hooks in-process, then kernels compiled
through every genuine state and the fixed wheel with their launchers built for this
machine's Triton 3.6 (tests/programs/triton36_launcher.py), and for a 3.2 generation."""

from __future__ import annotations

import pytest

from npu_fixes.fixes import triton36_launcher as fix
from tests.conftest import run_at_states, run_program
from tests.genuine_states import BEYOND, COMMITS, sharing_the_target

NAME = "triton36-launcher"
#: Upstream fixed it only in the published wheels: the reference.
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
HOOK_ERROR = "AttributeError: type object 'InterpretedBinary' has no attribute 'launch_enter_hook'"


def test_this_machines_triton_is_of_the_36_generation():
    """The suite's own premise: the probe's generation check on the Triton installed here."""
    import triton
    from triton import knobs

    assert triton.__version__.startswith("3.6") and hasattr(knobs.runtime, "launch_enter_hook")
    assert fix.knobs_generation() is True


def test_the_scoped_import_answers_false_for_that_switch_only():
    from torch._inductor import utils

    from npu_fixes.shim.scoped import with_globals

    def reads():
        from torch._inductor.utils import ceildiv, triton_version_uses_attrs_dict

        return triton_version_uses_attrs_dict(), ceildiv

    assert with_globals(reads, {"__builtins__": fix._BUILTINS})() == (False, utils.ceildiv)
    assert reads() == (True, utils.ceildiv) and utils.triton_version_uses_attrs_dict() is True


def test_hooks_are_lent_for_the_call_only():
    from triton import knobs

    class Kernel:
        pass

    class Hooked:
        launch_enter_hook = launch_exit_hook = "own"

    with fix.hooks_from_knobs(Kernel):
        assert Kernel.launch_enter_hook is knobs.runtime.launch_enter_hook
        assert Kernel.launch_exit_hook is knobs.runtime.launch_exit_hook
    assert not hasattr(Kernel, "launch_enter_hook") and not hasattr(Kernel, "launch_exit_hook")
    with fix.hooks_from_knobs(Hooked):  # a class with hooks keeps its own
        assert Hooked.launch_enter_hook == "own"
    assert Hooked.launch_exit_hook == "own"


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "triton36_launcher", "on_triton36")


def test_the_defect_is_at_every_commit():
    assert BEYOND[NAME] == set(COMMITS)


@pytest.mark.parametrize("state", STATES)
def test_probe_and_state(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is (state in COMMITS), res["probe_before"]
    assert res["state"] == ("applied" if state in COMMITS else "not-needed")
    assert res["probe_after"] is False and res["undone"] is (state in COMMITS)


@pytest.mark.parametrize("state", COMMITS)
def test_launches_fail_as_built_and_run_with_the_fix(runs, state):
    """As built no launcher can be made for a kernel class without hooks; past the hooks
    the launcher takes the constexprs, which its caller never passes. With npu_fixes both
    programs equal eager, and the launchers take what the wheel's take."""
    before, after, wheel = runs[state]["before"], runs[state]["after"], runs[WHEEL]["after"]
    assert before["programs"] == {label: {"error": HOOK_ERROR} for label in ("pointwise", "sum")}
    assert before["parameters"].startswith("AttributeError: type object '_HooklessBinary'")
    assert {"XBLOCK", "R0_BLOCK"} <= set(before["with_class_hooks"])
    assert after["programs"] == {"pointwise": {"equal": True}, "sum": {"equal": True}}
    assert after["parameters"] == after["with_class_hooks"] == wheel["parameters"]
    assert "XBLOCK" not in after["parameters"] and "stream" in after["parameters"]


def test_the_wheel_launches_as_built(runs):
    res = runs[WHEEL]
    assert res["before"] == res["after"]
    assert res["after"]["programs"] == {"pointwise": {"equal": True}, "sum": {"equal": True}}


@pytest.mark.parametrize("state", ["8bfbb9ed1", "bafc50684"])
def test_a_32_generation_triton_changes_nothing(genuine, state):
    """With a 3.2-generation Triton (stood in for by an ``AttrsDescriptor``) the probe finds
    nothing: ``make_launcher`` stays the very object it was (the other fixes on it off) and
    the programs run on launchers built for 3.2."""
    res = run_program("triton36_launcher", "on_triton32", env={"NPU_FIXES": "0",
                      "NPU_FIXES_DISABLE": sharing_the_target(NAME)}, location=genuine(state))
    assert res == {"state": "not-needed", "same": True,
                   "programs": {"pointwise": {"equal": True}, "sum": {"equal": True}}}
