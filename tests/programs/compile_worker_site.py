"""Inductor's compile workers, standing in for an NPU machine's: imported from a ``.pth``
of the test's environment in every interpreter where ``WORKER_STATE`` names a host-loadable
torch_npu (the test's parent program sets it only after its own start, so its workers get
it). There the state is host-loaded at start (standing in for an installed torch_npu:
workers import it when a kernel's source does), and ``triton.compile``, which the backend
calls to build each config of a kernel, builds the kernel's Triton IR with the host
frontend: the step where triton-ascend's frontend resolves a kernel's helpers (such as
``triton_helpers.min2``) and fails on a helper that does not build. It returns a
:class:`FrontendBuild`, which is not a binary: the parent builds the kernel again for its
own device (see ``tests.programs.min2_propagate_nan.in_workers``)."""

from __future__ import annotations

import contextlib
import os
import re

WORKER_STATE = "NPU_FIXES_TEST_WORKER_STATE"
#: The reduction ops of Triton IR that tell how a min/max keeps NaN.
IR_OPS = re.compile(r"arith\.(?:minnumf|minimumf|maxnumf|maximumf)")
_KEEP_OPEN = contextlib.ExitStack()


class FrontendBuild:
    """What a worker's frontend build gives back: the process, the ``min2`` the kernel's
    helpers module held, and the min/max ops of its Triton IR."""

    def __init__(self, ops: list[str], min2: str) -> None:
        self.pid, self.ops, self.min2 = os.getpid(), ops, min2
        self.hash, self.metadata = f"frontend-{self.pid}", {}


def frontend_compile(src, target=None, options=None) -> FrontendBuild:
    """``src`` (the backend's ``ASTSource``) built to Triton IR by the host frontend;
    raises the frontend's ``CompilationError`` where the kernel does not build."""
    from tests.programs.rank_mismatch import host_frontend_ir

    fn = src.fn
    constants = {fn.arg_names[key[0]] if isinstance(key, tuple) else key: value
                 for key, value in src.constants.items()}
    signature = {name: "constexpr" if name in constants else src.signature[name] for name in fn.arg_names}
    text = host_frontend_ir(fn, signature, constants)
    helper = fn.__globals__["triton_helpers"].min2
    helper = getattr(helper, "fn", helper)
    return FrontendBuild(sorted(set(IR_OPS.findall(text))), f"{helper.__module__}.{helper.__qualname__}")


def _install(location: str) -> None:
    import triton

    from tests.programs import host_load, standalone

    interpret = standalone("interpret")  # importing npu_fixes would arm it: the .pth decides
    codegen = host_load(location).modules["codegen.triton"]
    _KEEP_OPEN.enter_context(interpret.cpu_device(codegen))  # for the process's life
    triton.compile = frontend_compile


if os.environ.get(WORKER_STATE):
    _install(os.environ[WORKER_STATE])
