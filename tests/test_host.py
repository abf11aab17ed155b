"""The host loader: real torch_npu code loaded on a machine without CANN or NPU."""

from __future__ import annotations

import zipfile

import pytest

from npu_fixes.tools import host
from tests.conftest import PINNED, run_program, wheel_path

#: The loader's module, loaded with the backend's.
DECOMPOSITION = "torch_npu._inductor.decomposition"
#: Every module a load of a whole tree brings, sorted.
LOADED = ["codegen.triton", "lowering", "npu_triton_helpers", "npu_triton_heuristics", "overrides", DECOMPOSITION]


def report(location, env=None) -> dict:
    """The host load of ``location`` in a fresh interpreter (tests/programs/host.py)."""
    return run_program("host", "report", env=env, location=location)


@pytest.mark.parametrize("version", PINNED)
def test_load_pinned_wheels(version):
    res = report(wheel_path(version))
    assert res["version"] == version
    assert res["bare_parent"] is True
    if version == "2.12.0.post3":
        assert res["has_backend"] is False and res["modules"] == []
    else:
        assert res["has_backend"] is True
        assert res["modules"] == LOADED
        assert res["errors"] == {} and res["device_stand_in"] is True
        assert res["language_stand_in"] is True  # stock Triton here: no tl.extra.cann of its own


def _extract(version, dest):
    with zipfile.ZipFile(wheel_path(version)) as zf:
        for name in zf.namelist():
            if name.startswith("torch_npu/") and name.endswith(".py"):
                zf.extract(name, dest)
    return dest


def test_load_source_tree_and_package_dir(tmp_path):
    root = _extract("2.13.0", tmp_path / "tree")
    (root / "torch_npu" / "version.py").unlink()  # a source tree has no generated version.py
    res = report(root)
    assert res["version"] is None and res["modules"] == LOADED
    res = report(root / "torch_npu")
    assert res["modules"] == LOADED


def test_tree_with_a_different_module_list(tmp_path):
    """An older/newer tree: a target module missing, another one failing to import."""
    root = _extract("2.14.0", tmp_path / "tree")
    backend = root / "torch_npu" / "_inductor" / "triton_experimental"
    (backend / "lowering.py").unlink()
    (backend / "codegen" / "triton.py").write_text("raise ImportError('needs a newer torch')\n")
    res = report(root)
    assert res["modules"] == ["npu_triton_helpers", "npu_triton_heuristics", DECOMPOSITION]
    assert "needs a newer torch" in res["errors"]["codegen.triton"]


def test_unknown_npu_op_gets_a_generic_schema(tmp_path):
    root = _extract("2.13.0", tmp_path / "tree")
    lowering = root / "torch_npu" / "_inductor" / "triton_experimental" / "lowering.py"
    lowering.write_text(lowering.read_text() + "\n_probe_new_op = torch.ops.npu.npu_fixes_test_new_op\n")
    res = report(root)
    assert "lowering" in res["modules"] and res["errors"] == {}


@pytest.mark.parametrize("make", ["missing", "plain_dir", "not_a_wheel", "wheel_without_torch_npu",
                                  "corrupt_wheel", "symlink_loop"])
def test_not_torch_npu(tmp_path, make):
    target = {
        "missing": tmp_path / "nope",
        "plain_dir": tmp_path,
        "not_a_wheel": tmp_path / "x.whl",
        "wheel_without_torch_npu": tmp_path / "other-1.0-py3-none-any.whl",
        "corrupt_wheel": tmp_path / "torch_npu-2.14.0-py3-none-any.whl",
        "symlink_loop": tmp_path / "loop",
    }[make]
    if make == "not_a_wheel":
        target.write_text("hello")
    if make == "wheel_without_torch_npu":
        with zipfile.ZipFile(target, "w") as zf:
            zf.writestr("other/__init__.py", "")
    if make == "corrupt_wheel":  # a sound directory, a member whose data is not (zlib.error)
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("torch_npu/__init__.py", "x = 1\n" * 100)
        data = bytearray(target.read_bytes())
        start = 30 + len("torch_npu/__init__.py")  # the first member's data
        data[start:start + 4] = b"\xff\xff\xff\xff"
        target.write_bytes(bytes(data))
    if make == "symlink_loop":
        target.symlink_to(target)
    with pytest.raises(host.NotTorchNpu) as info:
        host.load(target)
    assert target.name in str(info.value)


def test_import_time_systemexit_is_reported_not_raised(tmp_path):
    """Code under audit that raises SystemExit while it is imported is an error, not an exit."""
    root = _extract("2.14.0", tmp_path / "tree")
    (root / "torch_npu" / "version.py").write_text("raise SystemExit(7)\n")
    (root / "torch_npu" / "_inductor" / "triton_experimental" / "lowering.py").write_text("raise SystemExit(7)\n")
    res = report(root)
    assert res["errors"] == {"lowering": "SystemExit: 7"}
    assert res["version"] is None and res["version_error"] == "torch_npu/version.py raised SystemExit: 7"
    assert res["modules"] == ["codegen.triton", "npu_triton_helpers", "npu_triton_heuristics", "overrides",
                              DECOMPOSITION]


def test_load_writes_no_pycache(tmp_path):
    root = _extract("2.14.0", tmp_path / "tree")
    res = report(root, env={"PYTHONDONTWRITEBYTECODE": ""})
    assert res["modules"] == LOADED
    assert res["dont_write_bytecode"] is False  # restored after the load
    assert list(root.rglob("__pycache__")) == []
