"""``npu-fixes accuracy``: compiled vs eager training, as the reports' accuracy runs did.

For each model, N training iterations (forward, backward, SGD step) run eagerly and
under ``torch.compile`` from the same seed and initial state; after every iteration the
predictions, loss, gradients, updated parameters and buffers are compared with
``torch._dynamo.utils.same`` against an fp64 eager reference, the way PyTorch's own
benchmark harness checks training accuracy (tolerance 1e-2, no cosine similarity, NaN
never equal). Dropout stays on: Inductor's ``fallback_random`` makes compiled code call
the same ATen RNG ops in the same order as eager, so both draw identical random numbers.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .shim.fix import one_line

TOLERANCE = 1e-2  # the harness's training tolerance for Hugging Face models
LEARNING_RATE = 1e-2


@dataclasses.dataclass
class Failure:
    iteration: int
    tensor: str
    max_error: float


@dataclasses.dataclass
class ModelResult:
    name: str
    passed: bool
    iterations: int
    max_error: float
    seconds: float
    failure: Failure | None = None
    error: str | None = None

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


def compare(ref: dict[str, Any], res: dict[str, Any], ref64: dict[str, Any]) -> tuple[str | None, float]:
    """First tensor of ``res`` that ``same`` rejects (None if all pass), and the largest
    absolute difference seen."""
    from torch._dynamo.utils import same

    worst, first = 0.0, None
    for name, expected in ref.items():
        actual = res.get(name)
        if actual is None:  # a missing tensor fails, after any earlier failure
            first, worst = first or name, float("inf")
            continue
        error = (expected.double() - actual.double()).abs().max().item() if expected.numel() else 0.0
        worst = max(worst, error)
        ok = same(expected, actual, fp64_ref=ref64[name].to(expected.device), tol=TOLERANCE,
                  equal_nan=False, log_error=lambda *a, **k: None)
        if not ok and first is None:
            first = name
    return first, worst


def check_model(name: str, device: str, iterations: int, seed: int, backend: str,
                mode: str | None, on_iteration: Callable[[], None] = lambda: None) -> ModelResult:
    """Train one model eagerly, in fp64 and compiled; compare after every iteration."""
    import torch

    from .accuracy_models import MODELS

    start = time.perf_counter()
    torch._dynamo.reset()
    model, inputs = MODELS[name](torch.device(device), seed)
    model64, inputs64 = _to_fp64(model, inputs)
    compiled_model = copy.deepcopy(model)
    step = torch.compile(compiled_model, backend=backend, mode=mode)
    # One run after the other: each starts from the same RNG state.
    eager = run_iterations(model, inputs, iterations, seed)
    fp64 = run_iterations(model64, inputs64, iterations, seed)
    compiled = run_iterations(compiled_model, inputs, iterations, seed, step, on_iteration)
    worst = 0.0
    for i, (ref, ref64, res) in enumerate(zip(eager, fp64, compiled, strict=True), start=1):
        failed, error = compare(ref, res, ref64)
        worst = max(worst, error)
        if failed is not None:
            bad = (ref[failed].double() - res[failed].double()).abs().max().item() if failed in res else error
            return ModelResult(name, False, i, worst, time.perf_counter() - start, Failure(i, failed, bad))
    return ModelResult(name, True, iterations, worst, time.perf_counter() - start)


def failure_text(result: ModelResult) -> str:
    """`` (...)`` naming the first failing tensor and its max error, or the error."""
    if result.error:
        return f" ({result.error})"
    if result.failure:
        f = result.failure
        return f" (iteration {f.iteration}: {f.tensor}, max abs error {f.max_error:.3g})"
    return ""


def result_dict(result: ModelResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
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


def run(models: list[str], device: str, iterations: int, seed: int, backend: str, mode: str | None,
        npu_backend: str | None = None) -> list[ModelResult]:
    configure(npu_backend)
    progress = Progress(len(models) * iterations)
    results = []
    for name in models:
        progress.label = name
        progress.draw()
        try:
            result = check_model(name, device, iterations, seed, backend, mode, progress.advance)
        except Exception as exc:  # noqa: BLE001 - one model's crash is that model's failure
            result = ModelResult(name, False, 0, float("nan"), 0.0, error=one_line(exc))
        results.append(result)
        progress.done = len(results) * iterations
        progress.draw()
    progress.close()
    return results
