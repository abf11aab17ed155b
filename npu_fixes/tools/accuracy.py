"""``npu-fixes accuracy``: compiled vs eager training, as the reports' accuracy runs did.

For each model, N training iterations (forward, backward, SGD step) run eagerly and
under ``torch.compile`` from the same seed and initial state; after every iteration the
predictions, loss, gradients, updated parameters and buffers are compared with
``torch._dynamo.utils.same`` against an fp64 eager reference, the way PyTorch's own
benchmark harness checks training accuracy (tolerance 1e-2, no cosine similarity, NaN
never equal; a NaN or infinity anywhere fails, with the error reported as nan or inf, never
hidden by ``max``). Dropout stays on: Inductor's ``fallback_random`` makes compiled code call
the same ATen RNG ops in the same order as eager, so both draw identical random numbers.

What keeps the run from starting (an unavailable device, an unknown backend, a model that
cannot be built, e.g. without ``transformers``) raises :class:`SetupError`: that is not an
accuracy result.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from ..shim.fix import one_line

TOLERANCE = 1e-2  # the harness's training tolerance for Hugging Face models
LEARNING_RATE = 1e-2


class SetupError(ValueError):
    """The run cannot start here (device, backend, a model's packages): no accuracy result."""


@dataclasses.dataclass
class Failure:
    iteration: int
    tensor: str
    max_error: float


@dataclasses.dataclass
class RngGraph:
    """A compiled graph that calls Bernoulli ops (dropout masks), and the reason Inductor
    recorded for keeping it out of device-graph capture (None: it would capture it; on the
    NPU that capture fails, see rng-capture-gate)."""
    ops: list[str]
    capture_disabled: str | None


@dataclasses.dataclass
class ModelResult:
    name: str
    passed: bool
    iterations: int
    max_error: float
    seconds: float
    failure: Failure | None = None
    error: str | None = None
    rng_graphs: list[RngGraph] = dataclasses.field(default_factory=list)

    @property
    def status(self) -> str:
        return "pass_accuracy" if self.passed else "fail_accuracy"


def _snapshot(model: Any, outputs: dict[str, Any]) -> dict[str, Any]:
    """Everything compared after one iteration, by name."""
    state = {f"pred.{k}": v.detach().clone() for k, v in outputs.items()}
    for name, param in model.named_parameters():
        if param.grad is not None:
            state[f"grad.{name}"] = param.grad.detach().clone()
        state[f"param.{name}"] = param.detach().clone()
    for name, buf in model.named_buffers():
        state[f"buffer.{name}"] = buf.detach().clone()
    return state


def run_iterations(model: Any, inputs: dict[str, Any], iterations: int, seed: int,
                   step: Callable[..., Any] | None = None,
                   on_iteration: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Train ``model`` (called through ``step``, default the model itself) from the RNG
    state of ``seed``; return a snapshot after each iteration."""
    import torch

    call = model if step is None else step
    torch.manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    model.train()
    snapshots = []
    for _ in range(iterations):
        optimizer.zero_grad(set_to_none=True)
        outputs = call(**inputs)
        outputs["loss"].backward()
        optimizer.step()
        snapshots.append(_snapshot(model, outputs))
        on_iteration()
    return snapshots


def _to_fp64(model: Any, inputs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    import torch

    cast = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    return copy.deepcopy(model).to(torch.float64), cast


def tensor_error(*tensors: Any) -> float:
    """Largest absolute difference of the first two ``tensors``; nan if any of them holds a
    NaN, else inf if any holds an infinity (even where both agree: inf - inf is no error)."""
    import torch

    values = [t.detach().double() for t in tensors]
    if not values[0].numel():
        return 0.0
    if any(torch.isnan(v).any() for v in values):
        return math.nan
    if not all(torch.isfinite(v).all() for v in values):
        return math.inf
    return (values[0] - values[1].to(values[0].device)).abs().max().item()


def worse(a: float, b: float) -> float:
    """The larger error; nan wins (``max(0.0, nan)`` is 0.0)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def compare(ref: dict[str, Any], res: dict[str, Any], ref64: dict[str, Any]) -> tuple[str | None, float]:
    """First tensor of ``res`` that ``same`` rejects or that is not finite (None if all
    pass), and the largest absolute difference seen (nan/inf if any tensor holds one)."""
    from torch._dynamo.utils import same

    worst, first = 0.0, None
    for name, expected in ref.items():
        actual = res.get(name)
        if actual is None:  # a missing tensor fails, after any earlier failure
            first, worst = first or name, worse(worst, math.inf)
            continue
        fp64 = ref64[name].to(expected.device)
        error = tensor_error(expected, actual, fp64)
        worst = worse(worst, error)
        ok = math.isfinite(error) and same(expected, actual, fp64_ref=fp64, tol=TOLERANCE,
                                           equal_nan=False, log_error=lambda *a, **k: None)
        if not ok and first is None:
            first = name
    return first, worst


def _build(name: str, device: str, seed: int) -> tuple[Any, dict[str, Any]]:
    """``(model, inputs)``; :class:`SetupError` if the model cannot be built here."""
    import torch

    from .accuracy_models import MODELS

    try:
        return MODELS[name](torch.device(device), seed)
    except ImportError as exc:
        missing = f"{exc.name}, which is not installed" if isinstance(exc, ModuleNotFoundError) and exc.name \
            else f"a module that cannot be imported ({one_line(exc)})"
        hint = " (pip install 'npu-fixes[accuracy]')" if exc.name == "transformers" else ""
        raise SetupError(f"model {name} needs {missing}{hint}") from None
    except Exception as exc:  # noqa: BLE001 - before any training: not an accuracy result
        raise SetupError(f"model {name} cannot be built on {device}: {one_line(exc)}") from None


def check_setup(device: str, backend: Any) -> None:
    """Raise :class:`SetupError` if ``device`` is not usable here or ``backend`` is unknown."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SetupError("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    if device == "npu":
        try:
            import torch_npu  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            raise SetupError(f"--device npu: torch_npu cannot be imported ({one_line(exc)})") from None
        if not torch.npu.is_available():
            raise SetupError("--device npu: no NPU device here (torch.npu.is_available() is False)")
    if isinstance(backend, str):
        from torch._dynamo import list_backends
        from torch._dynamo.backends.registry import lookup_backend

        try:
            lookup_backend(backend)
        except Exception:  # noqa: BLE001
            debug = [b for b in ("eager", "aot_eager") if b in list_backends(exclude_tags=())]
            raise SetupError(f"--backend {backend}: unknown torch.compile backend "
                             f"(known: {', '.join([*list_backends(), *debug])})") from None


@contextlib.contextmanager
def recorded_rng_graphs() -> Iterator[list[RngGraph]]:
    """While open, every graph Inductor lowers that calls a Bernoulli op is recorded (see
    :class:`RngGraph`), with the reason it holds once lowered."""
    from torch._inductor.graph import GraphLowering

    from ..fixes.rng_capture_gate import bernoulli_ops

    ops = set(bernoulli_ops())
    graphs: list[RngGraph] = []
    compile_to_module = GraphLowering.compile_to_module

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = sorted({str(node.target) for node in self.module.graph.nodes if node.target in ops})
        if found:
            graphs.append(RngGraph(found, self.disable_cudagraphs_reason))
        return compile_to_module(self, *args, **kwargs)

    with mock.patch.object(GraphLowering, "compile_to_module", recorded):
        yield graphs


def check_model(name: str, device: str, iterations: int, seed: int, backend: str,
                mode: str | None, on_iteration: Callable[[], None] = lambda: None) -> ModelResult:
    """Train one model eagerly, in fp64 and compiled; compare after every iteration."""
    import torch

    start = time.perf_counter()
    torch._dynamo.reset()
    model, inputs = _build(name, device, seed)
    model64, inputs64 = _to_fp64(model, inputs)
    compiled_model = copy.deepcopy(model)
    step = torch.compile(compiled_model, backend=backend, mode=mode)
    # One run after the other: each starts from the same RNG state.
    eager = run_iterations(model, inputs, iterations, seed)
    fp64 = run_iterations(model64, inputs64, iterations, seed)
    with recorded_rng_graphs() as rng_graphs:
        compiled = run_iterations(compiled_model, inputs, iterations, seed, step, on_iteration)
    worst = 0.0
    for i, (ref, ref64, res) in enumerate(zip(eager, fp64, compiled, strict=True), start=1):
        failed, error = compare(ref, res, ref64)
        worst = worse(worst, error)
        if failed is not None:
            bad = tensor_error(ref[failed], res[failed], ref64[failed]) if failed in res else math.inf
            return ModelResult(name, False, i, worst, time.perf_counter() - start, Failure(i, failed, bad),
                               rng_graphs=rng_graphs)
    return ModelResult(name, True, iterations, worst, time.perf_counter() - start, rng_graphs=rng_graphs)


def checked(name: str, device: str, iterations: int, seed: int, backend: str, mode: str | None,
            on_iteration: Callable[[], None] = lambda: None) -> ModelResult:
    """:func:`check_model`, where a crash is that model's failure (a :class:`SetupError`,
    which is no accuracy result, propagates)."""
    start = time.perf_counter()
    try:
        return check_model(name, device, iterations, seed, backend, mode, on_iteration)
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - one model's crash is that model's failure
        return ModelResult(name, False, 0, float("nan"), time.perf_counter() - start, error=one_line(exc))


def failure_text(result: ModelResult) -> str:
    """`` (...)`` naming the first failing tensor and its max error, or the error."""
    if result.error:
        return f" ({result.error})"
    if result.failure:
        f = result.failure
        return f" (iteration {f.iteration}: {f.tensor}, max abs error {f.max_error:.3g})"
    return ""


def capture_text(result: ModelResult) -> str:
    """`` (...)`` where graphs that call Bernoulli ops are left to NPU graph capture, which
    fails on them ("Cannot call NPUGeneratorImpl::philox_engine_inputs during NPU graph
    capture" with ``mode="reduce-overhead"``); else empty."""
    open_graphs = [g for g in result.rng_graphs if g.capture_disabled is None]
    if not open_graphs:
        return ""
    ops = sorted({op for g in open_graphs for op in g.ops})
    return (f" (NPU graph capture would fail: {len(open_graphs)} of its graphs call {', '.join(ops)} "
            "as an eager fallback and are not kept out of capture)")


def json_number(value: float) -> float | str:
    """``value``, or ``"nan"``/``"inf"``/``"-inf"``: JSON has no NaN or Infinity."""
    return value if math.isfinite(value) else str(value)


def result_dict(result: ModelResult) -> dict[str, Any]:
    """``result`` as valid JSON data (non-finite errors as strings, see :func:`json_number`)."""
    data = dataclasses.asdict(result)
    data["max_error"] = json_number(result.max_error)
    if data["failure"] is not None:
        data["failure"]["max_error"] = json_number(result.failure.max_error)
    data["status"] = result.status
    return data


class Progress:
    """A one-line progress bar on a terminal (stderr); silent otherwise."""

    def __init__(self, total: int, stream: Any = sys.stderr) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.enabled = stream.isatty()
        self.label = ""

    def advance(self) -> None:
        self.done += 1
        self.draw()

    def draw(self) -> None:
        if self.enabled:
            filled = int(30 * self.done / max(self.total, 1))
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {self.label:40s}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")


def configure(npu_backend: str | None) -> None:
    """Settings of the harness's float32 training accuracy runs."""
    if npu_backend:  # before torch is imported: torch_npu reads it when its backend loads
        os.environ["TORCHINDUCTOR_NPU_BACKEND"] = npu_backend
    import torch
    from torch._inductor import config

    config.fallback_random = True  # compiled code draws the same random numbers as eager
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def load_interpreted(location: str, with_fixes: bool) -> Any:
    """Host-load the torch_npu at ``location`` (install dir, source tree or wheel) with its
    backend generating the kernels of the "cpu" device, run by Triton's interpreter
    (:mod:`npu_fixes.tools.interpret`); npu_fixes decides its fixes on that code unless
    ``with_fixes`` is false. Returns the backend's ``codegen.triton`` module;
    :class:`SetupError` where the code cannot be loaded."""
    import npu_fixes

    from . import host, interpret

    npu_fixes.registry().disarm()  # decided below, on the loaded code
    try:
        loaded = host.load(location)
    except (host.NotTorchNpu, host.RealTorchNpuLoaded) as exc:
        raise SetupError(f"--torch-npu {location}: {exc}") from None
    codegen = loaded.module("codegen.triton")
    if codegen is None:
        why = "; ".join(f"{name}: {error}" for name, error in loaded.errors.items()) or "no backend"
        raise SetupError(f"--torch-npu {location}: the backend cannot be loaded ({why})")
    try:
        interpret.activate(codegen)
    except Exception as exc:  # noqa: BLE001 - a layout the interpreter device does not know
        raise SetupError(f"--torch-npu {location}: the backend cannot be activated on CPU: "
                         f"{one_line(exc)}") from None
    if with_fixes:
        npu_fixes.apply()
    return codegen


def run_interpreted(models: list[str], location: str, iterations: int, seed: int, with_fixes: bool = True,
                    shuffle: int | None = None) -> tuple[list[ModelResult], list[str]]:
    """Check each model on CPU through the backend of the torch_npu at ``location``, its
    kernels run in Triton's interpreter, a launch's programs in row-major order or, with
    ``shuffle``, in an order drawn from that seed (a kernel whose result depends on the
    order then differs between seeds); a line per model on stderr. Returns the results
    and the fixes applied (or guarding) in that code."""
    import random

    import npu_fixes

    from . import interpret

    configure(None)
    codegen = load_interpreted(location, with_fixes)
    in_place = ("applied", "upgrade-needed", "guarded")
    applied = [r.name for r in npu_fixes.status() if r.state.value in in_place]
    for name in models:  # a missing package stops the run before any training
        _build(name, "cpu", seed)
    results = []
    for index, name in enumerate(models, start=1):
        with interpret.cpu_device(codegen, None if shuffle is None else random.Random(shuffle)):
            result = checked(name, "cpu", iterations, seed, "inductor", None)
        results.append(result)
        print(f"[{index}/{len(models)}] {name}: {result.status}{failure_text(result)}"
              f"{capture_text(result)} ({result.seconds:.1f} s)", file=sys.stderr, flush=True)
    return results, applied


def run(models: list[str], device: str, iterations: int, seed: int, backend: str, mode: str | None,
        npu_backend: str | None = None) -> list[ModelResult]:
    """Check each model; :class:`SetupError` (before any training) if the run cannot start."""
    configure(npu_backend)
    check_setup(device, backend)
    for name in models:  # tiny models: build each once, so a missing package stops nothing midway
        _build(name, device, seed)
    progress = Progress(len(models) * iterations)
    results = []
    for name in models:
        progress.label = name
        progress.draw()
        try:
            result = checked(name, device, iterations, seed, backend, mode, progress.advance)
        except SetupError:
            progress.close()
            raise
        results.append(result)
        progress.done = len(results) * iterations
        progress.draw()
    progress.close()
    return results
