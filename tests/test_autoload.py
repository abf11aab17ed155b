"""Autoload through a one-line .pth: idempotent, stdlib-only, arms only once torch imports."""

from __future__ import annotations

import errno
import os
import site
from pathlib import Path

import pytest

from npu_fixes.shim import autoload as _autoload
from tests.conftest import REPO, last_json, run_program


def test_enable_is_idempotent_and_disable_removes(tmp_path):
    path = _autoload.enable(tmp_path)
    text = path.read_text()
    assert path.name == _autoload.PTH_NAME
    assert text.count("\n") == 1 and text.startswith("import ")
    assert _autoload.enable(tmp_path) == path and path.read_text() == text
    assert _autoload.is_enabled(tmp_path)
    assert _autoload.disable(tmp_path) is True and not path.exists()
    assert _autoload.disable(tmp_path) is False


def test_enable_never_touches_sitecustomize(tmp_path):
    custom = tmp_path / "sitecustomize.py"
    custom.write_text("# the user's own\n")
    _autoload.enable(tmp_path)
    _autoload.disable(tmp_path)
    assert custom.read_text() == "# the user's own\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sitecustomize.py"]


def run_with_pth(tmp_path: Path, program: str, env=None) -> dict:
    """``program`` of tests/programs/autoload.py with the autoload .pth in ``tmp_path``."""
    _autoload.enable(tmp_path)
    return run_program("autoload", program, env=env, fresh=True, site_dir=str(tmp_path))


def test_pth_arms_only_when_torch_imports(tmp_path):
    res = run_with_pth(tmp_path, "arms_on_import_torch")
    assert res["before"] == {"finders": 1, "npu_fixes": False, "wrapt": False}
    assert res["after"] == {"mid": False, "npu_fixes": True, "armed": True, "inert": [True]}


def test_pth_never_hides_the_next_finder_from_import_torch(tmp_path):
    # A tracer's .pth that sorts before ours registers a wrapt post-import hook on torch
    # (wrapt's finder goes first in sys.meta_path); ours then goes in front of it. The
    # tracer's hook must still fire when torch imports.
    (tmp_path / "e_tracer_hook.py").write_text(
        "import sys, wrapt\n"
        "wrapt.register_post_import_hook(lambda module: setattr(sys, 'tracer_fired', True), 'torch')\n")
    (tmp_path / "e_tracer.pth").write_text("import e_tracer_hook\n")
    res = run_with_pth(tmp_path, "tracer_fired")
    assert res["after"] is True


@pytest.mark.parametrize("word", ["0", "off", "false", "no", " Off "])
def test_pth_respects_master_switch(tmp_path, word):
    """Every word the switch parser reads as off (npu_fixes.shim.switches) keeps the .pth out."""
    res = run_with_pth(tmp_path, "npu_fixes_after_torch", env={"NPU_FIXES": word})
    assert res["before"]["finders"] == 0 and res["after"] is False


def test_pth_with_npu_fixes_missing_never_breaks_import_torch(tmp_path):
    # npu_fixes not importable (uninstalled, .pth left behind): torch still imports.
    _autoload.enable(tmp_path)
    proc = run_program("autoload", "without_npu_fixes", check=False, fresh=True, site_dir=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "cannot import npu_fixes" in proc.stderr
    assert last_json(proc)["after"].startswith("2.")


def test_example_sitecustomize_arms_without_importing_npu_fixes(tmp_path):
    (tmp_path / "sitecustomize.py").write_text((REPO / "examples" / "sitecustomize.py").read_text())
    res = run_program("autoload", "example_sitecustomize", path=[tmp_path], fresh=True)
    assert res == [False, True]


def test_cli_autoload_commands(tmp_path):
    from npu_fixes.tools.cli import main

    assert main(["autoload", "enable", "--site-dir", str(tmp_path)]) == 0
    assert (tmp_path / _autoload.PTH_NAME).is_file()
    assert main(["autoload", "status", "--site-dir", str(tmp_path)]) == 0
    assert main(["autoload", "disable", "--site-dir", str(tmp_path)]) == 0
    assert not (tmp_path / _autoload.PTH_NAME).exists()


def test_pth_warning_remedy_works_without_npu_fixes(tmp_path):
    """Once npu-fixes is uninstalled there is no `npu-fixes` command: say what to delete."""
    path = _autoload.enable(tmp_path)
    proc = run_program("autoload", "without_npu_fixes", check=False, fresh=True, site_dir=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"delete {path} to remove this autoload" in proc.stderr
    assert "npu-fixes autoload disable" not in proc.stderr


def _read_only(directory: Path, monkeypatch) -> None:
    """Make ``directory`` read-only; where that does not stop writes (root), make
    writing and removing files in it fail as in a read-only directory."""
    directory.chmod(0o555)
    probe = directory / "probe"
    try:
        probe.write_text("")
    except PermissionError:
        return  # the chmod is enough
    probe.unlink()
    for name in ("write_text", "unlink"):
        original = getattr(Path, name)

        def denied(self, *args, _original=original, **kwargs):
            if self.parent == directory:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Path, name, denied)


@pytest.mark.parametrize("action", ["enable", "disable"])
def test_cli_autoload_read_only_site_dir_exits_2(tmp_path, monkeypatch, capsys, action):
    from npu_fixes.tools.cli import main

    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    if action == "disable":
        _autoload.enable(site_dir)
    _read_only(site_dir, monkeypatch)
    try:
        assert main(["autoload", action, "--site-dir", str(site_dir)]) == 2
    finally:
        site_dir.chmod(0o755)
    err = capsys.readouterr().err
    verb = "write" if action == "enable" else "remove"
    assert err == f"npu-fixes autoload: cannot {verb} {site_dir / _autoload.PTH_NAME}: Permission denied\n"


def test_cli_autoload_site_dir_below_a_file_exits_2(tmp_path, capsys):
    from npu_fixes.tools.cli import main

    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "site-packages"
    assert main(["autoload", "enable", "--site-dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == (f"npu-fixes autoload: cannot write {target / _autoload.PTH_NAME}: "
                   f"{tmp_path / 'afile'}: not a directory\n")


def test_cli_autoload_outside_site_dirs_is_never_called_enabled(tmp_path, capsys):
    """Python never reads .pth files from tmp_path: neither enable nor status may say enabled."""
    from npu_fixes.tools.cli import main

    assert main(["autoload", "enable", "--site-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "autoload enabled" not in out and "NOT enabled for this interpreter" in out
    assert f"{tmp_path} is not a site directory of this interpreter" in err
    assert main(["autoload", "status", "--site-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("autoload inactive: ") and "enabled" not in out
    assert f"{tmp_path} is not a site directory of this interpreter" in out


def test_cli_autoload_in_a_site_dir_is_enabled(tmp_path, monkeypatch, capsys):
    from npu_fixes.tools.cli import main

    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    assert main(["autoload", "enable", "--site-dir", str(tmp_path)]) == 0
    assert capsys.readouterr() == (f"autoload enabled: {tmp_path / _autoload.PTH_NAME}\n", "")
    assert main(["autoload", "status", "--site-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"autoload enabled: {tmp_path / _autoload.PTH_NAME}\n"


@pytest.mark.parametrize("text", ["import os\n", "", "garbage \x00\n", "{line}import os\n", "{cut}"])
def test_cli_autoload_status_reads_what_the_file_holds(tmp_path, monkeypatch, capsys, text):
    """A file of the autoload's name that does not hold its line (alone, whole) is not
    called enabled."""
    from npu_fixes.tools.cli import main

    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    path = tmp_path / _autoload.PTH_NAME
    line = _autoload.pth_text(path)
    path.write_text(text.format(line=line, cut=line[:-5]))
    assert not _autoload.is_enabled(tmp_path)
    assert main(["autoload", "status", "--site-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"autoload NOT enabled: {path} does not hold")
    assert main(["autoload", "enable", "--site-dir", str(tmp_path)]) == 0 and _autoload.is_enabled(tmp_path)


def test_autoload_line_for_another_spelling_of_the_path_is_enabled(tmp_path):
    """The line names its file's path in its warning; another spelling of that path (a
    symlinked or relative site dir) is still the autoload's line."""
    path = _autoload.enable(tmp_path)
    path.write_text(path.read_text().replace(str(tmp_path), f"{tmp_path}/../{tmp_path.name}"))
    assert _autoload.is_enabled(tmp_path)
