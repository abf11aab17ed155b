"""Real upstream code that does not look as expected: a probe that raises, a missing
target, a changed signature. The fix is `failed` or `absent`, the target is untouched,
and the import that triggered it succeeds."""

from __future__ import annotations

from pathlib import Path

from npu_fixes.fixes import all_fixes
from tests.conftest import backend_targets, last_json, run_program
from tests.genuine_states import FIVE, UNFIXED, absent_at

BACKEND = Path("torch_npu/_inductor/triton_experimental")

def edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / BACKEND / relative
    text = path.read_text()
    assert text.count(old) == 1, f"anchor not found once in {relative}: {old!r}"
    path.write_text(text.replace(old, new))


def run(root: Path, exploding_probe: bool = False) -> dict:
    """Sabotage (``exploding_probe``), load with fixes off, then turn them on and apply."""
    return run_program("failure_modes", "report", location=root, targets=backend_targets(),
                       exploding_probe=exploding_probe)


def test_missing_target_and_changed_signature(prefix_copy, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(prefix_copy("all"), root)
    edit(root, "npu_triton_heuristics.py", "def _wrap_launcher_with_downcast(",
         "def _renamed_wrap_launcher_with_downcast(")
    edit(root, "npu_triton_heuristics.py", "    def make_launcher(self):", "    def make_launcher(self, variant=None):")
    edit(root, "codegen/triton.py", "def _npu_rsplit_outer_applicable(kernel)", "def _npu_rsplit_outer_applicable(kernel, hint=None)")
    res = run(root)
    states = res["states"]
    assert states["boundary-downcast"][0] == "absent" and "_wrap_launcher_with_downcast" in states["boundary-downcast"][1]
    for name in ("launch-grid", "rsplit-outer"):
        assert states[name][0] == "failed" and "upstream changed it" in states[name][1], states
    assert states["dualview-fold"][0] == "applied" and states["rng-capture-gate"][0] == "applied"
    for name in ("launch-grid", "rsplit-outer"):
        assert res["same"][name], name


def test_probe_that_raises_on_real_code(prefix_copy):
    res = run(prefix_copy("all"), exploding_probe=True)
    state, detail = res["states"]["dualview-fold"]
    assert state == "failed" and "probe exploded" in detail
    assert res["same"]["dualview-fold"]
    others = {n: s for n, (s, _) in res["states"].items() if n != "dualview-fold"}
    # the copy has the five defects, every later upstream fix of the wheel and the wheel's
    # defects that no published state has fixed
    absent = absent_at("2.13.0")  # the copy's wheel lacks their code
    state = {f.name: f.present_state.value for f in all_fixes()}
    assert others == {n: state[n] if n in FIVE or n in UNFIXED else "absent" if n in absent else "not-needed"
                      for n in others}


def test_import_succeeds_when_a_hook_fails(prefix_copy):
    """The hook fires inside the import statement; a failing install must not break it."""
    proc = run_program("failure_modes", "install_fails", check=False, location=prefix_copy("all"))
    assert proc.returncode == 0, proc.stderr
    modules, state, detail = last_json(proc)
    assert modules == ["codegen.triton", "lowering", "npu_triton_helpers", "npu_triton_heuristics", "overrides",
                       "torch_npu._inductor.decomposition"]
    assert state == "failed" and "install exploded" in detail
    assert proc.stderr.count("launch-grid failed") == 1
