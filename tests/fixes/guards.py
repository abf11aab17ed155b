"""What the three guards' test modules share: each guard's program run at every genuine state and
the 2.13.0 wheel, and the checks of its probe and state against the catalogue."""

from __future__ import annotations

from npu_fixes.fixes import all_fixes
from tests.conftest import run_program, wheel_install
from tests.genuine_states import COMMITS

WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)


def guard_runs(genuine, name: str) -> dict[str, dict]:  # noqa: ANN001
    """State -> the guard ``name`` probed and decided in a fresh interpreter (npu_fixes off)."""
    roots = {s: genuine(s) for s in COMMITS}
    roots[WHEEL] = wheel_install(WHEEL)
    return {s: run_program("upgrade_guards", "guarded", env={"NPU_FIXES": "0"}, location=root, name=name)
            for s, root in roots.items()}


def present(name: str, state: str) -> bool:
    return state in {f.name: f for f in all_fixes()}[name].about.present


def check_probe_and_state(res: dict, name: str, state: str) -> None:
    """The probe finds the defect exactly where the catalogue has it; there the state is
    ``upgrade-needed`` with the probe's detail naming where upstream fixed it and the upgrade;
    only a guard with an install patches anything, and restoring puts the original back."""
    fix = {f.name: f for f in all_fixes()}[name]
    defective, detail = res["probe"]
    assert defective is present(name, state), detail
    state_value, state_detail = res["state"]
    if present(name, state):
        assert state_value == "upgrade-needed" and state_detail == detail
        assert fix.about.fixed_in.removeprefix("the ") in detail and "2.13.0 wheel" in detail and "upgrade" in detail
    else:
        assert state_value == "not-needed", state_detail
    installs = int(present(name, state) and fix.install is not None)
    assert res["patched"] == installs and res["identical"] is (installs == 0)
    assert res["restored"] == res["patched"] and res["identical_after_restore"]
