"""te-parallel-ce on stand-in ``transformer_engine`` packages, in fresh interpreters.

The real Transformer Engine cannot be imported here: ``transformer_engine.common`` loads the
CUDA core library and ``transformer_engine.pytorch`` its compiled torch extension. Stand-ins
of its two import paths are used instead: ``transformer_engine.pytorch`` (package) and
``transformer_engine.pytorch.cross_entropy`` (the module Megatron imports the function from).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_program

# package layout per variant: relative path -> source
VARIANTS = {
    # Transformer Engine on NPU: neither the function nor the submodule
    "no-submodule": {"pytorch/__init__.py": "import torch\nLinear = torch.nn.Linear\n"},
    # a cross_entropy module without the function
    "submodule-without": {
        "pytorch/__init__.py": "import torch\nfrom . import cross_entropy\n",
        "pytorch/cross_entropy.py": "HELPER = 1\n",
    },
    # upstream Transformer Engine: its own function
    "own-function": {
        "pytorch/__init__.py": "from .cross_entropy import parallel_cross_entropy\n",
        "pytorch/cross_entropy.py": "def parallel_cross_entropy(*args, **kwargs):\n    return 'theirs'\n",
    },
}

ORDERS = ("npu_fixes-first", "te-first")  # which of npu_fixes and transformer_engine.pytorch is imported first


def write_variant(root: Path, variant: str) -> Path:
    for rel, source in {"__init__.py": "", **VARIANTS[variant]}.items():
        path = root / "transformer_engine" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root


def run_variant(tmp_path: Path, variant: str, order: str) -> dict:
    root = write_variant(tmp_path / variant, variant)
    return run_program("te_parallel_ce", "report", path=[root], order=order)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("variant", ["no-submodule", "submodule-without"])
def test_missing_function_is_provided_and_undone(tmp_path: Path, variant: str, order: str) -> None:
    res = run_variant(tmp_path, variant, order)
    assert res["state"] == "applied", res
    assert res["target"] == "transformer_engine.pytorch.parallel_cross_entropy"
    assert res["top_is_ours"] and res["imported_is_ours"]
    assert res["max_err"] < 1e-5
    stand_in = variant == "no-submodule"
    assert res["restored"] == (4 if stand_in else 2)
    assert res["after_undo"] == {"top": False, "sub": False, "sub_module": not stand_in, "sub_attr": not stand_in}
    assert res["reapplied"]


@pytest.mark.parametrize("order", ORDERS)
def test_own_function_is_left_untouched(tmp_path: Path, order: str) -> None:
    res = run_variant(tmp_path, "own-function", order)
    assert res["state"] == "not-needed" and "Transformer Engine's own is kept" in res["detail"]
    assert not res["top_is_ours"] and not res["imported_is_ours"] and res["theirs"] == "theirs"
    assert res["restored"] == 0
    assert res["after_undo"] == {"top": True, "sub": True, "sub_module": True, "sub_attr": True}
    assert not res["reapplied"]


def test_disable_switch(tmp_path: Path) -> None:
    root = write_variant(tmp_path / "off", "no-submodule")
    res = run_program("te_parallel_ce", "disabled", env={"NPU_FIXES_DISABLE": "te-parallel-ce"}, path=[root])
    assert res == [False, "disabled"]
