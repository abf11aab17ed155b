"""A fork server for the test programs: pay for ``import torch`` once, not per program.

Run as a script by :class:`ForkServer`, it imports torch, sympy and stock Inductor (never
torch_npu, npu_fixes, wrapt or the tests' own packages) and does what a first compile does
before anything of its own (see ``_warm``), then forks one child per request.
The child becomes what ``python -m MODULE ARGS`` (or ``python -c CODE``) would be: the
requested environment, working directory, ``sys.path`` (its ``PYTHONPATH`` first) and
``sys.argv``, stdout and stderr in files, and at the end what interpreter exit does
(thread pools stopped, non-daemon threads joined, atexit handlers run) and the exit
status of a fresh interpreter (1 and a traceback for an uncaught exception). What it
cannot be is an interpreter in which torch was never imported: tests whose point is the
import order, the ``.pth`` autoload or what importing npu_fixes pulls in ask for a fresh
interpreter instead (or a server of the other kind, below), and so does any request whose
environment differs from the server's in a variable read at import time (only
``FORKABLE_ENV`` may differ). Two things differ on purpose: Dynamo's guard-latency
statistic (see ``_no_guard_latency_probe``), and a child's garbage collections, which leave
out every object the server made (see ``serve``).

A server given ``first_steps`` (code) is the other kind: started in the very environment of
its children, it preloads nothing of its own, runs that code as the first steps of a fresh
``python -m`` program and forks the rest of each program from there. Its children are what
fresh interpreters would be after those steps (an import order: npu_fixes, then torch) and
the imports a request names (``preload``: what each program imports next anyway), but for
the garbage collections above; tests give it the steps that are the same for many programs.

Protocol, one JSON line each way: a request ``{"argv", "env", "cwd", "stdout", "stderr",
"preload"}`` (modules the server imports before this fork and keeps) is answered with
``{"pid"}`` once forked and ``{"returncode"}`` once the child ended.
"""

from __future__ import annotations

import gc
import json
import os
import select
import subprocess
import sys
from collections.abc import Sequence

#: Environment variables a forked child may set differently from the server: each is read
#: when used, not when torch, sympy or Inductor are imported (npu_fixes, which reads the
#: NPU_FIXES switches at its import, is never imported by the server), or read at start-up
#: into what a child sets afresh from its own (``sys.path``, ``sys.dont_write_bytecode``).
#: Not TRITON_INTERPRET: Triton's language module, imported by the server, is set up for
#: compiled kernels.
FORKABLE_ENV = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "TORCHINDUCTOR_CACHE_DIR")
#: What the server imports before it forks: the bulk of a program's start-up, then what a
#: first compile imports besides (the code generators of every device, imported when
#: Inductor registers them for a device, and the parts of Triton it uses), and what sympy
#: imports at its first sum of two terms (its tensor module: about 50 ms of each child
#: that probes or compiles). Importing a module registers nothing for a device: a child does
#: that where a fresh process does.
PRELOAD = ("torch", "sympy", "sympy.tensor.tensor", "torch._inductor.lowering", "torch._inductor.codegen.triton",
           "torch._inductor.runtime.triton_heuristics", "torch._inductor.loop_body",
           *(f"torch._inductor.codegen.{name}" for name in (
               "cpp_wrapper_cpu_array_ref", "cpp_wrapper_gpu", "cpp_wrapper_mps", "cuda_combined_scheduling",
               "halide", "mps", "pallas", "python_wrapper_mtia", "wrapper_fxir", "xpu.xpu_combined_scheduling")),
           "triton.compiler.code_generator", "triton.runtime.interpreter")


def forkable(env: dict[str, str], server_env: dict[str, str]) -> bool:
    """Whether a child with ``env`` can be forked from a server started with ``server_env``."""
    return all(env.get(k) == server_env.get(k) for k in env.keys() | server_env.keys()
               if not k.startswith("NPU_FIXES") and k not in FORKABLE_ENV)


class ForkServer:
    """Client side: starts the server with ``env`` on first use and runs requests on it."""

    def __init__(self, env: dict[str, str], cwd: str, first_steps: str | None = None) -> None:
        self.env, self.cwd, self.first_steps = dict(env), cwd, first_steps
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = [sys.executable, __file__, *([self.first_steps] if self.first_steps is not None else [])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env, cwd=self.cwd)
        ready = self.proc.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"fork server did not start (said {ready!r})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.proc = None

    def run(self, argv: Sequence[str], env: dict[str, str], cwd: str, stdout: str, stderr: str,
            timeout: float, preload: Sequence[str] = ()) -> int:
        """Run ``python ARGV`` forked, its output to the files ``stdout`` and ``stderr``;
        return its exit status (negative: the signal that ended it). A child that runs past
        ``timeout`` seconds is killed and :class:`subprocess.TimeoutExpired` raised. The
        modules ``preload`` the server imports first, once (see ``_preload``)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        request = {"argv": list(argv), "env": env, "cwd": cwd, "stdout": stdout, "stderr": stderr,
                   "preload": list(preload)}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        pid = self._reply()["pid"]
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            os.kill(pid, 9)
            self._reply()
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout)
        return self._reply()["returncode"]

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server ended (status {self.proc.wait()})")
        return json.loads(line)


# -- server side -------------------------------------------------------------------------------


def _child(request: dict, base_path: list[str]) -> None:
    """Become ``python ARGV`` as requested; never returns."""
    import atexit
    import importlib
    import runpy
    import threading
    import types

    for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    first = "" if argv[0] == "-c" else os.getcwd()
    sys.path[:] = [first, *_pythonpath(request["env"]), *base_path]
    sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
    importlib.invalidate_caches()
    status = 0
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(argv[1], "<string>", "exec"), vars(main))
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]  # runpy puts the module's file first
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            raise ValueError(f"fork server runs -c and -m only, not {argv[0]!r}")
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    # Interpreter exit, in its order: threading's exit hooks (thread pools stop their
    # workers) and the join of non-daemon threads, then the atexit handlers.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _pythonpath(env) -> list[str]:
    """The ``sys.path`` entries that ``PYTHONPATH`` in ``env`` gives an interpreter."""
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _exit_status(code) -> int:
    """The exit status of ``sys.exit(code)`` in a fresh interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _no_guard_latency_probe() -> None:
    """After each compile Dynamo times one evaluation of the new guards for its compile
    metrics (``guard_latency_us``), first flushing the CPU's caches: about a fifth of a
    small program's compile here (an rsplit battery program 9.6 s and 8.8 s against 7.4 s
    and 7.5 s without it). Nothing of the tests reads that statistic: children report it
    as 0. The guards themselves are built and checked as before."""
    import torch._dynamo.guards as guards

    guards.profile_guard_manager = lambda *args, **kwargs: 0.0


def _warm() -> None:
    """What a process's first compile does before anything of its own, done once here:
    Inductor's pattern passes registered, the CPU's vector ISA probed (a compiler run) and
    the hash of torch's own source files taken (every kernel's cache key holds it; reading
    them costs a child 0.1-0.4 s). The server must stay single-threaded: its children are
    forked."""
    import threading

    try:
        import tqdm  # the pattern passes' progress bars would start its monitor thread
    except ImportError:
        pass
    else:
        tqdm.tqdm.monitor_interval = 0
    from torch._inductor import codecache, cpu_vec_isa
    from torch._inductor.fx_passes import joint_graph, post_grad

    cpu_vec_isa.pick_vec_isa()
    codecache.torch_key()
    joint_graph.lazy_init()
    post_grad.lazy_init()
    if threading.active_count() != 1:
        raise RuntimeError(f"fork server must not fork with threads: {threading.enumerate()}")


def _preload(names: Sequence[str]) -> None:
    """Import ``names`` here, for this and every later child: modules many programs import
    after start-up (transformers: 3 s), read nothing of a request's own environment at
    import, and start no thread. One that cannot be imported is left to the child, which
    then fails as a fresh interpreter would."""
    import threading

    for name in names:
        try:
            __import__(name)
        except ImportError:
            continue
        if threading.active_count() != 1:
            raise RuntimeError(f"importing {name} started a thread: {threading.enumerate()}")


def _first_steps(code: str) -> list[str]:
    """Run ``code`` as a fresh ``python -m`` program's first steps, on its ``sys.path`` (the
    working directory, ``PYTHONPATH``, the rest); return the rest as it is after them."""
    import threading

    extra = _pythonpath(os.environ)
    sys.path[:] = [os.getcwd(), *extra, *(p for p in sys.path if p not in extra)]
    exec(compile(code, "<first steps>", "exec"), {"__name__": "__first_steps__"})
    if threading.active_count() != 1:
        raise RuntimeError(f"the first steps started a thread: {threading.enumerate()}")
    return [p for p in sys.path[1:] if p not in extra]


def serve(first_steps: str | None = None) -> None:
    """Preload (or run ``first_steps``), then fork a child per request line on stdin until
    stdin closes."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # what the preloads print must not reach the protocol
    os.close(devnull)
    sys.path.pop(0)  # this file's folder: a program's first entry is its own
    if first_steps is not None:
        base_path = _first_steps(first_steps)
    else:
        base_path = list(sys.path)
        for name in PRELOAD:
            __import__(name)
        _warm()
        _no_guard_latency_probe()
    replies.write(b"ready\n")
    for line in requests:
        request = json.loads(line)
        _preload(request.get("preload", ()))
        sys.stdout.flush()
        sys.stderr.flush()
        # Everything the server holds moves to the collector's permanent generation, which
        # collections never scan: a child's first full collection would otherwise walk the
        # server's ~440,000 objects (torch, sympy, Inductor) and write to every page that
        # holds one, copying it (about 0.25 s of an rsplit battery program's 4.3 s). A cycle
        # among those objects that a child drops is left uncollected until the child ends.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _child(request, base_path)
        replies.write(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


if __name__ == "__main__":
    serve(*sys.argv[1:])
