"""Host time of one cross entropy call and where it goes, on a CUDA GPU.

Small problems and small training steps are bound by the host: what counts there is the CPU
time a call spends before its kernels are queued. Printed, side by side in one run:

* host microseconds per forward+backward call (``torch.autograd.grad`` of a reducing call,
  shape 1x16x1024 fp32, so the GPU never holds the host back) for PyTorch's
  ``F.cross_entropy``, ours, ours with ``FAST_LAUNCH`` off, Liger's (when importable), a
  ``--baseline`` implementation (a copy of an earlier version of ``npu_fixes.ops.cross_entropy``:
  this package, or the single module it was before), and PyTorch's and ours with the
  autograd engine single-threaded (what handing the backward to the device's autograd
  thread and back costs);
* each of them layer by layer: forward with the graph built, backward alone (autograd
  engine), the general path's forward/backward without autograd, each Triton launch
  through Triton's JIT and directly, the Python pieces (checks, launch configuration,
  allocations), and the bare mechanisms (a no-op autograd.Function, a C++ op, an empty
  Triton kernel);
* where a Triton JIT launch spends its time (argument binding and specialization, cache key,
  launcher);
* with ``--lines``, the host time of each line of our eager path inside forward+backward
  calls (each line rewritten with a timer around it, which adds about 0.1 us per line);
* with ``--profile``, a cProfile of ours by own time, and a torch.profiler table of ours and
  PyTorch's.

Every number is the median over interleaved rounds (the contenders alternate), since the
host's speed drifts. ``--out FILE`` also writes the tables there.

    python benchmarks/ce_host_overhead.py [--baseline ce_baseline_ops.cross_entropy] [--lines] [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import importlib
import inspect
import io
import os
import pstats
import statistics
import sys
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ce_benchmark import liger_cross_entropy, make  # noqa: E402

from npu_fixes.ops.cross_entropy import (  # noqa: E402
    api,
    autograd,
    direct_launch,
    eager_plans,
    general_path,
    launch_config,
    routing,
    triton_path,
    tuning,
)

LINES: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    LINES.append(text)


def host_us_many(fns: dict[str, Callable[[], object]], calls: int = 200, rounds: int = 7) -> dict[str, float]:
    """Median host microseconds per call of each function; the functions alternate round by
    round and the GPU is synced before each round."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return {name: statistics.median(v) for name, v in samples.items()}


def host_us(fn: Callable[[], object], calls: int = 200) -> float:
    return host_us_many({"x": fn}, calls)["x"]


@contextmanager
def fast_launch(on: bool):
    old = tuning.FAST_LAUNCH.get("cuda", False)
    tuning.FAST_LAUNCH["cuda"] = on
    try:
        yield
    finally:
        tuning.FAST_LAUNCH["cuda"] = old


class Impl(NamedTuple):
    """What the layer-by-layer timing needs of an implementation."""

    parallel_cross_entropy: Callable[..., Any]
    forward: Callable[..., Any]  # the general path's forward, no autograd
    backward: Callable[..., Any]
    kernels: Any  # the kernel module
    fast_launch: dict[str, bool] | None
    launcher: Callable[[Any], tuple[Any, tuple[Any, ...]]] | None


OURS = Impl(api.parallel_cross_entropy, general_path.forward, general_path.backward,
            direct_launch.load_kernels(), tuning.FAST_LAUNCH, direct_launch.launcher)  # fmt: skip


def baseline_impl(mod: Any) -> Impl:
    """An earlier version: a copy of this package, or of the single module it was before
    (whose functions had private names)."""
    if hasattr(mod, "general_path"):
        dl = mod.direct_launch
        return Impl(mod.parallel_cross_entropy, mod.general_path.forward, mod.general_path.backward,
                    dl.load_kernels(), mod.tuning.FAST_LAUNCH, dl.launcher)  # fmt: skip
    load = getattr(mod, "_kernels", None)
    kernels = load() if load is not None else importlib.import_module(mod.__name__ + "_kernels")
    return Impl(mod.parallel_cross_entropy, mod._forward, mod._backward, kernels,
                getattr(mod, "FAST_LAUNCH", None), getattr(mod, "_launcher", None))  # fmt: skip


class Recorder:
    """Records the Triton launches of one call: (kernel, grid, args, kwargs) as the JIT gets them."""

    def __init__(self, kernels: list[Any]) -> None:
        self.kernels = kernels
        self.calls: list[tuple[Any, Any, tuple[Any, ...], dict[str, Any]]] = []

    def __enter__(self) -> Recorder:
        for k in self.kernels:
            real = k.run

            def run(
                *args: Any, _k: Any = k, _real: Any = real, grid: Any, warmup: bool, **kwargs: Any
            ) -> Any:
                self.calls.append((_k, grid, args, dict(kwargs)))
                return _real(*args, grid=grid, warmup=warmup, **kwargs)

            k.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        for k in self.kernels:
            del k.run  # the class's method again


def direct_launcher(
    kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any], raw: bool,
    entry: Callable[[Any], tuple[Any, tuple[Any, ...]]] | None = direct_launch.launcher,
) -> Callable[[], None]:
    """The compiled kernel launched directly, the way an implementation's plans do
    (``FAST_LAUNCH``; through its ``entry``, e.g. ``direct_launch.launcher``, where it has one,
    else through the launcher object): with the
    tensors themselves (``raw=False``, the launcher asks the driver about each pointer) or
    with their addresses."""
    options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages", "num_ctas")}
    params = {k: v for k, v in kwargs.items() if k not in options}
    compiled = kernel[grid](*args, **kwargs)
    bound = kernel.signature.bind(*args, **params)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    if raw:
        values = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in values]
    g = tuple(grid) + (1,) * (3 - len(grid))
    stream = torch.cuda.current_stream().cuda_stream

    fn, head = (compiled.run, (compiled.function, compiled.packed_metadata, None, None, None))
    if entry is not None:
        fn, head = entry(compiled)

    def launch() -> None:
        fn(g[0], g[1], g[2], stream, *head, *values)

    return launch


def jit_breakdown(
    kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, float]]:
    """Where a JIT launch of ``kernel`` spends its host time (the steps of JITFunction.run)."""
    from triton.runtime.driver import driver
    from triton.runtime.jit import compute_cache_key

    kw = dict(kwargs)
    kw["debug"] = False
    kw["instrumentation_mode"] = ""
    device = driver.active.get_current_device()
    _, key_cache, _, _, binder = kernel.device_caches[device]
    _, spec, options = binder(*args, **kw)
    compiled = kernel[grid](*args, **kwargs)
    values = list(binder(*args, **kw)[0].values())
    stream = driver.active.get_current_stream(device)
    active = driver.active
    kw0 = kwargs
    return [
        ("whole JIT launch", host_us(lambda: kernel[grid](*args, **kwargs))),
        ("  device + stream", host_us(lambda: active.get_current_stream(active.get_current_device()))),
        ("  bind + specialize arguments", host_us(lambda: binder(*args, **kw))),
        ("  cache key", host_us(lambda: compute_cache_key(key_cache, spec, options))),
        ("  launch metadata", host_us(lambda: compiled.launch_metadata(grid, stream, *values))),
        ("  launcher (tensors: pointer queries)", host_us(direct_launcher(kernel, grid, args, kw0, False))),
        ("  launcher (raw addresses)", host_us(direct_launcher(kernel, grid, args, kw0, True))),
    ]


class _Timed(ast.NodeTransformer):
    """Rewrites a function so that each statement (an ``if``: its test) adds its host time to
    ``_T[(function, line)]``; compound statements are timed through their bodies."""

    def __init__(self, name: str) -> None:
        self.name = name

    def timed(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in body:
            key = repr((self.name, st.lineno))
            start = ast.parse("_t0 = _pc()").body
            stop = ast.parse(f"_T[{key}] += _pc() - _t0").body
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(st, field, None)
                if inner and not isinstance(st, ast.FunctionDef):
                    setattr(st, field, self.timed(inner))
            for handler in getattr(st, "handlers", []):
                handler.body = self.timed(handler.body)
            if isinstance(st, ast.Return):
                value = st.value if st.value is not None else ast.Constant(None)
                out += [*start, ast.Assign([ast.Name("_rv", ast.Store())], value, lineno=st.lineno), *stop]
                out.append(ast.Return(ast.Name("_rv", ast.Load())))
            elif isinstance(st, ast.If):
                out += [*start, ast.Assign([ast.Name("_c", ast.Store())], st.test, lineno=st.lineno), *stop]
                st.test = ast.Name("_c", ast.Load())
                out.append(st)
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
                out.append(st)
            else:
                out += [*start, st, *stop]
        return out


def timed_copy(mod: Any, fn: Any, totals: dict[tuple[str, int], int]) -> Any:
    """``fn`` (a function of ``mod``) rebuilt from its source with :class:`_Timed`."""
    fn = getattr(fn, "__func__", fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    node = tree.body[0]
    node.decorator_list = []
    node.body = _Timed(fn.__name__).timed(node.body)
    ast.fix_missing_locations(tree)
    scope = dict(vars(mod), _pc=time.perf_counter_ns, _T=totals)
    exec(compile(tree, inspect.getsourcefile(fn), "exec"), scope)
    return scope[fn.__name__]


def line_times(x: torch.Tensor, t: torch.Tensor, calls: int = 3000) -> list[tuple[float, str, int, str]]:
    """Host us per call of each line of our eager path (public function, checks, autograd
    forward and backward, plan forward and backward), inside forward+backward calls. Each
    timed line adds about 0.1 us of its own."""
    totals: dict[tuple[str, int], int] = defaultdict(int)
    fn_cls = autograd.CrossEntropyFunction
    saved = {(mod, name): getattr(mod, name) for mod, name in (
        (api, "parallel_cross_entropy"), (api, "validate"), (eager_plans, "fast_forward"),
        (eager_plans, "fast_backward"))}  # fmt: skip
    methods = {name: fn_cls.__dict__[name] for name in ("forward", "backward")}
    files = {fn.__name__: inspect.getsourcefile(fn) for fn in saved.values()}
    files.update({name: inspect.getsourcefile(autograd) for name in methods})
    try:
        for (mod, name), fn in saved.items():
            setattr(mod, name, timed_copy(mod, fn, totals))
        for name, fn in methods.items():
            setattr(fn_cls, name, staticmethod(timed_copy(autograd, fn, totals)))
        for _ in range(50):
            torch.autograd.grad(api.parallel_cross_entropy(x, t, reduce_loss=True), x)
        totals.clear()
        for _ in range(calls):
            torch.autograd.grad(api.parallel_cross_entropy(x, t, reduce_loss=True), x)
        torch.cuda.synchronize()
    finally:
        for (mod, name), fn in saved.items():
            setattr(mod, name, fn)
        for name, fn in methods.items():
            setattr(fn_cls, name, fn)
    sources = {name: open(path).read().splitlines() for name, path in files.items()}
    return [(ns / calls / 1e3, name, line, sources[name][line - 1].strip())
            for (name, line), ns in totals.items()]


class _NoOp(torch.autograd.Function):
    """A Python autograd function with our function's arguments that does nothing."""

    grad: torch.Tensor | None = None  # the gradient it hands back, set before use

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, t: torch.Tensor, opts: tuple[Any, ...]) -> torch.Tensor:
        return x.new_empty(())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return _NoOp.grad, None, None


@triton.jit
def _noop_kernel(x_ptr):
    pass


def layers(impl: Impl, label: str, x: torch.Tensor, t: torch.Tensor) -> list[tuple[str, float]]:
    """Host time of an implementation, layer by layer."""
    pce = impl.parallel_cross_entropy
    xd = x.detach()
    loss = pce(x, t, reduce_loss=True)
    _, lse, inv = impl.forward(xd, t, 0.0, True, -100)
    one = torch.ones((), device="cuda")
    names = ("ce_forward_kernel", "ce_finalize_kernel", "ce_mean_kernel", "ce_backward_kernel")
    jit = [getattr(impl.kernels, n) for n in names]
    fast = impl.fast_launch
    saved = dict(fast) if fast is not None else None
    if fast is not None:
        fast["cuda"] = False  # record what the JIT gets
    try:
        with Recorder(jit) as rec:
            torch.autograd.grad(pce(x, t, reduce_loss=True), x)
    finally:
        if fast is not None:
            fast.update(saved)
    rows = host_us_many(
        {
            f"{label}: fwd+bwd (autograd.grad)": lambda: torch.autograd.grad(pce(x, t, reduce_loss=True), x),
            f"{label}: forward, graph built": lambda: pce(x, t, reduce_loss=True),
            f"{label}: backward alone (engine)": lambda: torch.autograd.grad(loss, x, retain_graph=True),
            f"{label}: forward, no autograd": lambda: impl.forward(xd, t, 0.0, True, -100),
            f"{label}: backward, no autograd": lambda: impl.backward(one, xd, t, lse, inv, 0.0, -100, None),
        }
    )
    out = list(rows.items())
    for k, grid, args, kwargs in rec.calls:
        name = k.fn.__name__
        jit_launch = partial(lambda k, g, a, kw: k[g](*a, **kw), k, grid, args, kwargs)
        out.append((f"{label}:   launch {name} via JIT", host_us(jit_launch)))
        direct = direct_launcher(k, grid, args, kwargs, True, impl.launcher)
        out.append((f"{label}:   launch {name} direct", host_us(direct)))
    out.append((f"{label}:   launches per fwd+bwd", float(len(rec.calls))))
    return out


def pieces(x: torch.Tensor, t: torch.Tensor) -> list[tuple[str, float]]:
    """Host time of the pieces of ours and of the bare mechanisms."""
    n, v = t.numel(), x.shape[-1]
    xd = x.detach()
    dev = x.device
    small = torch.randn(16, device="cuda", requires_grad=True)
    g16 = torch.ones(16, device="cuda")
    noop_args = (x, t, (0.0, True, -100, False, None))
    _NoOp.grad = torch.zeros_like(xd)
    env = os.environ.get
    grad = torch.autograd.grad
    return [
        ("argument checks (validate)", host_us(lambda: api.validate(x, t, 0.0))),
        ("route (use_triton: env + rule)", host_us(lambda: routing.route(xd, None))),
        ("launch config, computed", host_us(lambda: launch_config.launch_config(n, v, "cuda", 132))),
        ("launch config, cached", host_us(lambda: launch_config.cached_config(n, v, dev, None))),
        ("sync counter lookup (stream query)", host_us(lambda: triton_path.sync_counter(dev))),
        ("device guard (current_device)", host_us(lambda: triton_path.device_guard(dev))),
        ("switch read (routing.switch)", host_us(lambda: routing.switch(routing.CE_CHECK))),
        ("capturing? (is_current_stream_capturing)", host_us(torch.cuda.is_current_stream_capturing)),
        ("os.environ.get", host_us(lambda: env("NPU_FIXES_CE_CHECK"))),
        ("torch.compiler.is_compiling", host_us(lambda: torch.compiler.is_compiling())),
        ("torch.empty(n) fp32", host_us(lambda: torch.empty(n, dtype=torch.float32, device=dev))),
        ("torch.empty(()) fp32", host_us(lambda: torch.empty((), dtype=torch.float32, device=dev))),
        ("torch.empty_like(logits)", host_us(lambda: torch.empty_like(xd))),
        ("tensor.data_ptr()", host_us(lambda: xd.data_ptr())),
        ("no-op autograd.Function fwd+bwd (3 args)", host_us(lambda: grad(_NoOp.apply(*noop_args), x))),
        ("no-op autograd.Function forward", host_us(lambda: _NoOp.apply(*noop_args))),
        ("C++ op fwd+bwd (mul, autograd.grad)", host_us(lambda: grad(small.mul(2.0), small, g16))),
        ("empty Triton kernel, JIT launch", host_us(lambda: _noop_kernel[(1,)](small))),
        ("empty Triton kernel, direct launch",
         host_us(direct_launcher(_noop_kernel, (1,), (small,), {}, True))),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="an earlier version's module, e.g. ce_baseline_ops.cross_entropy")
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument("--profile", action="store_true", help="cProfile and torch.profiler tables too")
    parser.add_argument("--lines", action="store_true", help="host time of each line of our eager path too")
    args = parser.parse_args()
    torch.manual_seed(0)
    say(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    x, t = make(1, 16, 1024, torch.float32)
    v = x.shape[-1]
    base = importlib.import_module(args.baseline) if args.baseline else None

    def ours() -> object:
        return torch.autograd.grad(api.parallel_cross_entropy(x, t, reduce_loss=True), x)

    def ours_jit() -> object:
        with fast_launch(False):
            return ours()

    contenders: dict[str, Callable[[], object]] = {
        "torch F.cross_entropy": lambda: torch.autograd.grad(F.cross_entropy(x.view(-1, v), t.view(-1)), x),
        "ours": ours,
        "ours, FAST_LAUNCH off": ours_jit,
    }
    if base is not None:
        base_ce = base.parallel_cross_entropy
        contenders["baseline"] = lambda: torch.autograd.grad(base_ce(x, t, reduce_loss=True), x)

    def single_threaded(fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            with torch.autograd.set_multithreading_enabled(False):
                return fn()

        return run

    # the backward on the calling thread instead of the device's autograd thread (a user setting:
    # how much of the engine's cost is the hand-over between threads)
    contenders["torch, autograd single-threaded"] = single_threaded(contenders["torch F.cross_entropy"])
    contenders["ours, autograd single-threaded"] = single_threaded(ours)
    if liger_cross_entropy is not None:
        contenders["liger"] = lambda: torch.autograd.grad(liger_cross_entropy(x.view(-1, v), t.view(-1)), x)
    say("\n# host us per forward+backward call (autograd.grad), 1x16x1024 fp32, reduce_loss")
    totals = host_us_many(contenders, calls=300, rounds=9)
    for name, us in totals.items():
        say(f"{name:28s} {us:8.1f}   ({us / totals['torch F.cross_entropy']:.2f}x PyTorch)")

    say("\n# host us, layer by layer")
    tv = host_us_many(
        {
            "torch: fwd+bwd (autograd.grad)": contenders["torch F.cross_entropy"],
            "torch: forward, graph built": lambda: F.cross_entropy(x.view(-1, v), t.view(-1)),
        }
    )
    loss_t = F.cross_entropy(x.view(-1, v), t.view(-1))
    tv["torch: backward alone (engine)"] = host_us(lambda: torch.autograd.grad(loss_t, x, retain_graph=True))
    for name, us in tv.items():
        say(f"{name:50s} {us:8.1f}")
    impls = [(OURS, "ours")] + ([(baseline_impl(base), "baseline")] if base is not None else [])
    for impl, label in impls:
        for name, us in layers(impl, label, x, t):
            say(f"{name:50s} {us:8.1f}")

    say("\n# host us of the pieces and the bare mechanisms")
    for name, us in pieces(x, t):
        say(f"{name:50s} {us:8.1f}")

    say("\n# where a JIT launch of our forward kernel goes (us)")
    with fast_launch(False), Recorder([OURS.kernels.ce_forward_kernel]) as rec:
        api.parallel_cross_entropy(x.detach(), t, reduce_loss=True)
    k, grid, a, kw = rec.calls[0]
    for name, us in jit_breakdown(k, grid, a, kw):
        say(f"{name:50s} {us:8.1f}")

    if args.lines:
        say("\n# host us per call of each line of our eager path, in forward+backward calls")
        rows = line_times(x, t)
        for us, name, line, code in rows:
            if us >= 0.05:
                say(f"{us:7.2f}  {name:22s} {line:5d}  {code[:80]}")
        entry = sum(us for us, name, _, _ in rows if name in ("parallel_cross_entropy", "backward"))
        say(f"{entry:7.2f}  (parallel_cross_entropy and backward, what they call included)")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            ours()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(22)
        say("\n# cProfile of 300 calls of ours, by own time\n" + text.getvalue())
        from torch.profiler import ProfilerActivity, profile

        for name in ("ours", "torch F.cross_entropy"):
            fn = contenders[name]
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                for _ in range(50):
                    fn()
                torch.cuda.synchronize()
            say(f"\n# torch.profiler, 50 calls of {name}, by CPU time (us per 50 calls)")
            say(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=60))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()
