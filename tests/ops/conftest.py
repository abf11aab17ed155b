"""The cross entropy kernels run in Triton's interpreter where no CUDA GPU is present:
there, each test module runs with the interpreter's fast paths on
(``npu_fixes.tools.interpret.interpreter_fast_paths``: the same values, less time)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from npu_fixes.tools.interpret import interpreter_fast_paths


@pytest.fixture(autouse=True, scope="module")
def interpreter_fast_paths_on():
    with contextlib.nullcontext() if torch.cuda.is_available() else interpreter_fast_paths():
        yield
