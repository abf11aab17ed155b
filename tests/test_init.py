"""`import npu_fixes` is lazy, and the kill switch imports nothing else."""

from __future__ import annotations

from tests.conftest import run_program

HEAVY = ["torch", "torch_npu", "triton", "sympy"]


def test_import_imports_neither_torch_nor_torch_npu():
    res = run_program("init", "lazy_import", fresh=True, heavy=HEAVY)
    assert res == {"heavy": [], "armed": True, "states": ["pending"]}


def test_master_switch_imports_nothing_else():
    res = run_program("init", "imports_added", env={"NPU_FIXES": "0"}, fresh=True)
    import sys

    third_party = [n for n in res if n.split(".")[0] not in sys.stdlib_module_names]
    assert all(name.startswith("npu_fixes") for name in third_party), res
    assert "npu_fixes.shim.registry" not in res and "wrapt" not in res


def test_public_api():
    import npu_fixes
    from npu_fixes.fixes import all_fixes

    # the five reported first, downcast-strides just before boundary-downcast (whose rebuilt
    # wrapper, where it applies, replaces the layers below it), the guard int64-past-int32 just
    # after it (the outermost layer of their target)
    assert npu_fixes.FIXES[:7] == ("rsplit-outer", "dualview-fold", "launch-grid", "downcast-strides",
                                   "boundary-downcast", "int64-past-int32", "rng-capture-gate")
    assert npu_fixes.FIXES[-1] == "te-parallel-ce" and len(set(npu_fixes.FIXES)) == len(npu_fixes.FIXES) == 61
    assert tuple(f.name for f in all_fixes()) == npu_fixes.FIXES  # each module's fix has its name
    assert callable(npu_fixes.status) and callable(npu_fixes.apply) and callable(npu_fixes.undo)


def test_run_time_code_never_uses_unittest_mock():
    """Probes use scoped stand-ins (npu_fixes/shim/scoped.py): no module of the shim or the
    fixes imports unittest.mock (about 20 ms at import, and patches of live globals)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "npu_fixes"
    users = []
    for path in [*root.glob("shim/*.py"), *root.glob("fixes/**/*.py"), root / "__init__.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [])
            if any(n.startswith("unittest.mock") or n == "unittest.mock" for n in names):
                users.append(path.name)
    assert users == []
