"""The cross entropy kernels run in Triton's interpreter where no CUDA GPU is present:
there, each test module runs with the interpreter's type names formatted when read
(``npu_fixes.tools.interpret.types_named_when_read``: the same values, less time)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from npu_fixes.tools.interpret import types_named_when_read


@pytest.fixture(autouse=True, scope="module")
def interpreter_types_named_when_read():
    with contextlib.nullcontext() if torch.cuda.is_available() else types_named_when_read():
        yield
