"""The fix framework: patcher identity, states, lazy hooks, switches, failure safety."""

from __future__ import annotations

import importlib
import logging
import sys
import threading

import pytest
from packaging.specifiers import SpecifierSet

from npu_fixes.shim.catalogue import About
from npu_fixes.shim.fix import Fix, Probe, State
from npu_fixes.shim.patcher import Patcher
from npu_fixes.shim.registry import Registry

TARGET_SOURCE = """
def decide(x):
    return x > 1

class Launcher:
    def make(self, n):
        return n * 2
"""


def corrected_decide(wrapped, instance, args, kwargs):
    return wrapped(*args, **kwargs) and args[0] < 10


def probe_decide(module):
    broken = module.decide(50)
    return Probe(broken, "decide(50) accepted" if broken else "decide(50) refused")


def install_decide(module, patcher):
    patcher.wrap_path(module, "decide", corrected_decide)


def make_fix(module_name, **changes):
    values = dict(
        name="rsplit-outer",
        module=module_name,
        targets=("decide",),
        probe=probe_decide,
        install=install_decide,
        about=About("a stand-in defect", frozenset({"8bfbb9ed1"}), "95c9094da", "none"),
        torch_window=SpecifierSet(">=0"),
        torch_npu_window=SpecifierSet(">=0"),
    )
    values.update(changes)
    return Fix(**values)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("NPU_FIXES", raising=False)
    monkeypatch.delenv("NPU_FIXES_DISABLE", raising=False)


def test_patcher_wraps_once_and_restores_identity(make_module):
    mod = importlib.import_module(make_module("pt_target", TARGET_SOURCE))
    original_func, original_method = mod.decide, mod.Launcher.__dict__["make"]
    patcher = Patcher()
    first = patcher.wrap(mod, "decide", corrected_decide)
    assert patcher.wrap(mod, "decide", corrected_decide) is first
    assert mod.decide is first and mod.decide(50) is False and mod.decide(5) is True
    patcher.wrap(mod.Launcher, "make", lambda w, inst, a, k: w(*a, **k) + 1)
    assert mod.Launcher().make(3) == 7
    assert patcher.original(mod, "decide") is original_func
    assert patcher.restore() == 2
    assert mod.decide is original_func
    assert mod.Launcher.__dict__["make"] is original_method


def test_patcher_restores_inherited_attribute_by_deleting(make_module):
    mod = importlib.import_module(make_module("pt_inherit", TARGET_SOURCE + "\nclass Sub(Launcher):\n    pass\n"))
    patcher = Patcher()
    patcher.wrap(mod.Sub, "make", lambda w, inst, a, k: 0)
    assert mod.Sub().make(3) == 0 and mod.Launcher().make(3) == 6
    patcher.restore()
    assert "make" not in vars(mod.Sub) and mod.Sub().make(3) == 6


def test_patcher_restore_scope_undoes_one_fix_only(make_module):
    mod = importlib.import_module(make_module("pt_scope", TARGET_SOURCE))
    original = mod.decide
    patcher = Patcher()
    with patcher.scope("a"):
        patcher.wrap(mod, "decide", lambda w, inst, a, k: "a")
        patcher.add(mod, "extra_a", 1)
    with patcher.scope("b"):
        b_handle = patcher.wrap(mod, "decide", lambda w, inst, a, k: ("b", w(*a, **k)))
    assert mod.decide(5) == ("b", "a")
    assert patcher.restore_scope("a") == 2
    assert not hasattr(mod, "extra_a") and mod.decide is b_handle and mod.decide(5) == ("b", True)
    assert patcher.restore_scope("a") == 0 and len(patcher) == 1
    assert patcher.restore() == 1 and mod.decide is original


def test_patcher_add_is_deleted_by_restore(make_module):
    mod = importlib.import_module(make_module("pt_add", TARGET_SOURCE))
    original = mod.decide
    value, table = object(), {"kept": 1}
    patcher = Patcher()
    patcher.add(mod, "extra", value)
    patcher.add(mod, "extra", value)  # adding twice adds once
    patcher.set_item(table, "new", value)
    assert mod.extra is value and patcher.is_wrapped(mod, "extra") and table["new"] is value
    assert len(patcher) == 2
    with pytest.raises(ValueError, match="already has 'decide'"):
        patcher.add(mod, "decide", value)
    assert mod.decide is original
    assert patcher.restore() == 2
    assert not hasattr(mod, "extra") and table == {"kept": 1}


def test_patcher_set_item_tells_each_change_and_its_restore():
    table, calls = {"kept": 1}, []
    patcher = Patcher()
    patcher.set_item(table, "kept", 2, changed=lambda: calls.append(dict(table)))
    patcher.set_item(table, "kept", 3, changed=lambda: calls.append(dict(table)))  # the first original stays
    assert patcher.restore() == 1
    assert calls == [{"kept": 2}, {"kept": 3}, {"kept": 1}] and table == {"kept": 1}


def test_patcher_replace_puts_the_original_back_only_over_its_own(make_module):
    mod = importlib.import_module(make_module("pt_replace", TARGET_SOURCE))
    original, ours, theirs = mod.decide, object(), object()
    patcher = Patcher()
    patcher.replace(mod, "decide", ours)
    patcher.replace(mod, "decide", object())  # replacing twice replaces once
    assert mod.decide is ours and patcher.is_wrapped(mod, "decide") and patcher.original(mod, "decide") is original
    assert patcher.restore() == 1 and mod.decide is original
    patcher.replace(mod, "decide", ours)
    mod.decide = theirs  # replaced behind our back (a reload): ours is gone, theirs stays
    assert not patcher.is_wrapped(mod, "decide") and patcher.restore() == 0 and mod.decide is theirs
    patcher.replace(mod, "decide", ours)  # applied again: the new original is theirs
    assert patcher.restore() == 1 and mod.decide is theirs
    with pytest.raises(AttributeError):
        patcher.replace(mod, "missing", ours)


def test_fix_that_adds_a_missing_attribute(make_module):
    mod = importlib.import_module(make_module("adds_attr", TARGET_SOURCE))

    def probe(module):
        return Probe(not hasattr(module, "extra"), "extra missing")

    reg = Registry([make_fix(mod.__name__, targets=(), provides=("extra",), probe=probe,
                             install=lambda module, patcher: patcher.add(module, "extra", 42))])
    assert reg.status()[0].target == f"{mod.__name__}.extra"
    reg.arm()
    reg.apply()
    assert reg.status()[0].state is State.APPLIED and mod.extra == 42 and len(reg.patcher) == 1
    assert reg.undo() == 1
    assert not hasattr(mod, "extra") and reg.status()[0].state is State.UNDONE
    mod.extra = "their own"
    reg.apply()
    assert reg.status()[0].state is State.NOT_NEEDED and mod.extra == "their own"


def test_hook_applies_when_module_imports_later(make_module):
    name = make_module("late_target", TARGET_SOURCE)
    reg = Registry([make_fix(name)])
    reg.arm()
    assert reg.status()[0].state is State.PENDING
    mod = importlib.import_module(name)
    rec = reg.status()[0]
    assert rec.state is State.APPLIED, rec
    assert mod.decide(50) is False
    assert "decide(50) accepted" in rec.detail


def test_hook_applies_at_once_when_module_already_imported(make_module):
    mod = importlib.import_module(make_module("early_target", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    assert reg.status()[0].state is State.APPLIED
    assert mod.decide(50) is False


def test_fixed_target_is_left_untouched(make_module):
    fixed = TARGET_SOURCE.replace("return x > 1", "return 1 < x < 10")
    mod = importlib.import_module(make_module("fixed_target", fixed))
    original = mod.decide
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    assert reg.status()[0].state is State.NOT_NEEDED
    assert mod.decide is original


def test_apply_twice_wraps_once_and_undo_restores(make_module):
    mod = importlib.import_module(make_module("twice_target", TARGET_SOURCE))
    original = mod.decide
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    wrapped = mod.decide
    reg.apply()
    reg.apply()
    assert mod.decide is wrapped and len(reg.patcher) == 1
    assert wrapped.__wrapped__ is original
    assert reg.undo() == 1
    assert mod.decide is original
    assert reg.status()[0].state is State.UNDONE
    reg.apply()
    assert mod.decide is not original and mod.decide.__wrapped__ is original


def test_probe_that_raises_is_failed_and_target_untouched(make_module, caplog):
    mod = importlib.import_module(make_module("probe_raises", TARGET_SOURCE))
    original = mod.decide

    def bad_probe(module):
        raise ValueError("probe exploded")

    reg = Registry([make_fix(mod.__name__, probe=bad_probe)])
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.FAILED and "probe exploded" in rec.detail
    assert mod.decide is original
    assert sum("probe exploded" in r.getMessage() for r in caplog.records) == 1


def test_install_that_raises_rolls_back_partial_patches(make_module):
    mod = importlib.import_module(make_module("install_raises", TARGET_SOURCE))
    original_func, original_method = mod.decide, mod.Launcher.__dict__["make"]

    def bad_install(module, patcher):
        patcher.wrap_path(module, "Launcher.make", lambda w, i, a, k: 0)
        raise RuntimeError("install exploded")

    reg = Registry([make_fix(mod.__name__, install=bad_install)])
    reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.FAILED and "install exploded" in rec.detail
    assert mod.decide is original_func and mod.Launcher.__dict__["make"] is original_method
    assert len(reg.patcher) == 0


def test_missing_attribute_is_absent(make_module):
    mod = importlib.import_module(make_module("no_attr", "x = 1\n"))
    reg = Registry([make_fix(mod.__name__, targets=("Launcher.make",))])
    reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.ABSENT and "Launcher" in rec.detail


def test_changed_signature_is_failed_and_untouched(make_module):
    mod = importlib.import_module(make_module("changed_sig", TARGET_SOURCE))
    original = mod.decide
    reg = Registry([make_fix(mod.__name__, signatures={"decide": ("x", "y")})])
    reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.FAILED and "upstream changed it" in rec.detail
    assert mod.decide is original


def test_out_of_window(make_module, monkeypatch):
    monkeypatch.setattr("npu_fixes.shim.versions.torch_npu_version", lambda: "2.12.0")
    mod = importlib.import_module(make_module("window_target", TARGET_SOURCE))
    original = mod.decide
    reg = Registry([make_fix(mod.__name__, torch_npu_window=SpecifierSet(">=2.13.0.dev0,<2.15"))])
    reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.OUT_OF_WINDOW and "2.12.0" in rec.detail
    assert mod.decide is original


def test_unknown_version_lets_the_probe_decide(make_module, monkeypatch):
    monkeypatch.setattr("npu_fixes.shim.versions.torch_npu_version", lambda: None)
    mod = importlib.import_module(make_module("unknown_version", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__, torch_npu_window=SpecifierSet(">=2.13.0.dev0,<2.15"))])
    reg.arm()
    assert reg.status()[0].state is State.APPLIED


def test_disable_switch_and_master_switch(make_module, monkeypatch):
    mod = importlib.import_module(make_module("switch_target", TARGET_SOURCE))
    original = mod.decide
    monkeypatch.setenv("NPU_FIXES_DISABLE", "rsplit-outer")
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    assert reg.status()[0].state is State.DISABLED and mod.decide is original
    monkeypatch.delenv("NPU_FIXES_DISABLE")
    monkeypatch.setenv("NPU_FIXES", "0")
    reg2 = Registry([make_fix(mod.__name__)])
    reg2.arm()
    assert reg2.status()[0].state is State.DISABLED and mod.decide is original


def test_unknown_disable_names_warn_once_listing_valid_names(make_module, monkeypatch, caplog):
    mod = importlib.import_module(make_module("unknown_names", TARGET_SOURCE))
    monkeypatch.setenv("NPU_FIXES_DISABLE", "launch-grid, no-such-fix,,bogus")
    reg = Registry([make_fix(mod.__name__), make_fix("not_imported_here", name="launch-grid")])
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        reg.arm()
        reg.apply()
    warnings = [r.getMessage() for r in caplog.records if "unknown fix" in r.getMessage()]
    assert len(warnings) == 1
    assert "bogus, no-such-fix;" in warnings[0] and "rsplit-outer, launch-grid, or all for every fix" in warnings[0]
    assert reg.status()[0].state is State.APPLIED  # a typo never turns anything else off


def test_old_fix_names_disable_with_a_deprecation_warning(make_module, monkeypatch, caplog):
    mod = importlib.import_module(make_module("renamed_fix", TARGET_SOURCE))
    monkeypatch.setenv("NPU_FIXES_DISABLE", "Outer-Split")
    reg = Registry([make_fix(mod.__name__, old_names=("outer-split",))])
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        reg.arm()
    assert reg.status()[0].state is State.DISABLED
    assert [r.getMessage() for r in caplog.records] == [
        "NPU_FIXES_DISABLE: 'outer-split' is the old name of 'rsplit-outer' (deprecated; it still works): "
        "use 'rsplit-outer'"]


def test_concurrent_imports_apply_once(make_module):
    name = make_module("threaded_target", TARGET_SOURCE + "\nimport time\ntime.sleep(0.05)\n")
    calls = []

    def counting_install(module, patcher):
        calls.append(threading.get_ident())
        install_decide(module, patcher)

    reg = Registry([make_fix(name, install=counting_install)])
    reg.arm()
    barrier = threading.Barrier(8)
    errors = []

    def worker():
        try:
            barrier.wait()
            importlib.import_module(name)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(calls) == 1 and len(reg.patcher) == 1
    assert sys.modules[name].decide(50) is False


def test_reload_replacing_a_wrapped_function_is_wrapped_again(make_module):
    mod = importlib.import_module(make_module("reloaded_target", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    first = mod.decide
    reg.disarm()  # not re-applied at the reload itself
    importlib.reload(mod)  # a backend reload: new function objects in the same module
    fresh = mod.decide
    assert fresh is not first and not hasattr(fresh, "__wrapped__")
    reg.apply()
    assert mod.decide is not fresh and mod.decide.__wrapped__ is fresh and mod.decide(50) is False
    reg.undo()
    assert mod.decide is fresh


def test_applied_only_when_the_probe_after_install_sees_the_defect_gone(make_module, caplog):
    mod = importlib.import_module(make_module("repair_no_effect", TARGET_SOURCE))
    original = mod.decide

    def ineffective_install(module, patcher):  # wraps, but the decision is unchanged
        patcher.wrap_path(module, "decide", lambda w, i, a, k: w(*a, **k))

    reg = Registry([make_fix(mod.__name__, install=ineffective_install)])
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        reg.arm()
    rec = reg.status()[0]
    assert rec.state is State.FAILED and "repair did not take" in rec.detail
    assert "decide(50) accepted" in rec.detail
    assert mod.decide is original and len(reg.patcher) == 0
    assert sum("repair did not take" in r.getMessage() for r in caplog.records) == 1


def test_failed_reinstall_after_a_reload_is_rolled_back(make_module):
    mod = importlib.import_module(make_module("reinstall_fails", TARGET_SOURCE))
    calls = []

    def install_then_fail_second_time(module, patcher):
        install_decide(module, patcher)
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("second install exploded")

    reg = Registry([make_fix(mod.__name__, install=install_then_fail_second_time)])
    reg.arm()
    assert reg.status()[0].state is State.APPLIED
    importlib.reload(mod)
    fresh = mod.decide
    reg.apply()  # the stale entry is replaced by a new wrap, then the install raises
    rec = reg.status()[0]
    assert rec.state is State.FAILED and "second install exploded" in rec.detail
    assert mod.decide is fresh  # left as the reload made it, not still patched


def test_reload_gets_the_repair_again_without_apply(make_module):
    mod = importlib.import_module(make_module("reload_watched", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    try:
        importlib.reload(mod)  # new function objects; wrapt's one-shot hook does not fire again
        assert mod.decide(50) is False and hasattr(mod.decide, "__wrapped__")
        with reg.patcher.scope("rsplit-outer"):
            assert reg.status()[0].state is State.APPLIED and reg.patcher.is_wrapped(mod, "decide")
    finally:
        reg.undo()


def test_status_says_replaced_when_a_target_is_swapped_behind_our_back(make_module):
    mod = importlib.import_module(make_module("swapped_target", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    mod.decide = lambda x: x > 1  # not a reload: nothing re-applies
    assert reg.status()[0].state is State.REPLACED
    reg.apply()
    assert reg.status()[0].state is State.APPLIED and mod.decide(50) is False


def test_undo_after_a_reload_never_restores_stale_objects(make_module):
    mod = importlib.import_module(make_module("undo_after_reload", TARGET_SOURCE))
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    reg.disarm()  # reloads are no longer repaired
    importlib.reload(mod)
    fresh = mod.decide
    reg.undo()
    assert mod.decide is fresh  # the pre-reload function is not put back


def test_undo_splices_ours_out_from_under_another_wrapper(make_module):
    import wrapt

    mod = importlib.import_module(make_module("stacked_wrappers", TARGET_SOURCE))
    original = mod.decide
    reg = Registry([make_fix(mod.__name__)])
    reg.arm()
    calls = []
    theirs = wrapt.wrap_function_wrapper(mod, "decide", lambda w, i, a, k: calls.append(1) or w(*a, **k))
    assert mod.decide(50) is False
    reg.undo()
    assert mod.decide is theirs and theirs.__wrapped__ is original  # theirs kept, ours gone
    assert mod.decide(50) is True and len(calls) == 2


def test_guard_reports_upgrade_needed_and_installs_only_its_guard(make_module, caplog):
    mod = importlib.import_module(make_module("guarded_target", TARGET_SOURCE))
    original = mod.decide
    bare = Registry([make_fix(mod.__name__, install=None, repairable=False)])
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        bare.arm()
    rec = bare.status()[0]
    assert rec.state is State.UPGRADE_NEEDED and rec.detail == "decide(50) accepted"
    assert mod.decide is original and len(bare.patcher) == 0
    assert sum("decide(50) accepted" in r.getMessage() for r in caplog.records) == 1
    bare.disarm()

    def refuse(module, patcher):  # the symptom becomes a clear error
        patcher.wrap_path(module, "decide", lambda w, i, a, k: (_ for _ in ()).throw(RuntimeError("upgrade")))

    guarded = Registry([make_fix(mod.__name__, install=refuse, repairable=False)])
    guarded.arm()
    assert guarded.status()[0].state is State.UPGRADE_NEEDED
    with pytest.raises(RuntimeError, match="upgrade"):
        mod.decide(50)
    guarded.undo()
    assert mod.decide is original and "guard was removed" in guarded.status()[0].detail


def test_two_fixes_wrapping_one_target_both_apply_and_undo(make_module):
    mod = importlib.import_module(make_module("shared_target", TARGET_SOURCE))
    original = mod.decide

    def probe_small(module):
        broken = module.decide(-5) is True
        return Probe(broken, "decide(-5) accepted" if broken else "decide(-5) refused")

    def install_small(module, patcher):  # a second, independent repair of the same function
        patcher.wrap_path(module, "decide", lambda w, i, a, k: w(*a, **k) and a[0] > -1)

    mod.decide = lambda x: x > 1 or x < -1  # defective both ways
    broken = mod.decide
    reg = Registry([make_fix(mod.__name__), make_fix(mod.__name__, name="launch-grid", probe=probe_small,
                                                     install=install_small)])
    reg.arm()
    assert [r.state for r in reg.status()] == [State.APPLIED, State.APPLIED]
    assert mod.decide(50) is False and mod.decide(-5) is False and mod.decide(5) is True
    reg.arm()  # evaluating again wraps nothing more
    assert len(reg.patcher) == 2
    reg.undo()
    assert mod.decide is broken and original is not broken


def test_call_rebound_reads_the_overrides_through_wrapt_layers(caplog):
    """A wrapper's bound method runs as a copy reading the overrides, below a wrapt layer of
    someone else too; what cannot be rebuilt runs unchanged, with a warning."""
    import functools

    import wrapt

    from npu_fixes.shim.scoped import call_rebound

    class Kernel:
        def build(self, x):
            return (LIMIT, x)  # noqa: F821 - a global of the copy

    seen = []

    def ours(wrapped, instance, args, kwargs):
        seen.append(call_rebound("demo", wrapped, {"LIMIT": 7}, args, kwargs))
        return seen[-1]

    def theirs(wrapped, instance, args, kwargs):
        return wrapped(*args, **kwargs)

    wrapt.wrap_function_wrapper(Kernel, "build", theirs)
    wrapt.wrap_function_wrapper(Kernel, "build", ours)
    assert Kernel().build(3) == (7, 3) and seen == [(7, 3)]

    class Other:
        @functools.lru_cache  # noqa: B019 - a builtin wrapper with_globals cannot rebuild
        def build(self, x):
            return x

    wrapt.wrap_function_wrapper(Other, "build", ours)
    with caplog.at_level(logging.WARNING, logger="npu_fixes"):
        assert Other().build(4) == 4
    assert "npu_fixes: demo:" in caplog.text and "ran unchanged" in caplog.text


def test_left_as_found_forgets_the_backend_modules_imported_inside(tmp_path, monkeypatch):
    """Backend modules imported inside are gone afterwards, from ``sys.modules`` and their
    package; those imported before, those named in ``keep`` and other packages' stay."""
    from npu_fixes.shim.pristine import PACKAGE, left_as_found

    root = tmp_path / PACKAGE
    (root / "inner").mkdir(parents=True)
    for name in ("__init__", "before", "kept", "inner/__init__", "inner/deep"):
        (root / f"{name}.py").write_text("")
    (tmp_path / "npu_fixes_other_package.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert PACKAGE not in sys.modules  # the absent-torch_npu row: this stand-in only
    try:
        package = importlib.import_module(PACKAGE)
        importlib.import_module(f"{PACKAGE}.before")
        with left_as_found(keep=[f"{PACKAGE}.kept"]):
            for name in (f"{PACKAGE}.inner.deep", f"{PACKAGE}.kept", "npu_fixes_other_package"):
                importlib.import_module(name)
        left = {n for n in sys.modules if n.partition(".")[0] == PACKAGE}
        assert left == {PACKAGE, f"{PACKAGE}.before", f"{PACKAGE}.kept"}
        assert not hasattr(package, "inner") and hasattr(package, "kept") and hasattr(package, "before")
        assert "npu_fixes_other_package" in sys.modules
    finally:
        for name in [n for n in sys.modules if n.partition(".")[0] in (PACKAGE, "npu_fixes_other_package")]:
            del sys.modules[name]
