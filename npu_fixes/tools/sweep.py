"""``npu-fixes sweep``: the differential corpus (:mod:`.corpus`) compiled through a
torch_npu's backend on CPU, kernels in Triton's interpreter, compared with eager, as built
and with npu_fixes, sample by sample.

Worker processes (one per core) each host-load the backend once and run a chunk of
samples as built or with npu_fixes, printing one JSON line per sample; a worker that
dies or stops answering costs only its sample (outcome ``run-time-error``), the rest of
its chunk goes to a fresh one. A compiled sample that launched kernels and equals eager
runs again with each launch's programs in reverse order, so that a result that depends on
the order shows. A journal (:class:`Journal`) keeps every finished sample, so that a sweep
stopped part way goes on where it stopped.

Outcomes (:data:`OUTCOMES`): ``pass``; ``no-kernel`` (equal, but only fallbacks ran: the
backend generated nothing to judge); ``wrong`` (also a kernel constant its type cannot
hold); ``out-of-bounds`` (a kernel read or wrote outside its buffers: silent on a device);
``compile-error``; ``run-time-error``;
``harness-limit`` (what Triton's interpreter cannot run or judge, :data:`HARNESS_LIMITS`);
``skipped`` (eager itself fails or is not deterministic: no reference; or the compile
fails with Dynamo's own ``backend="eager"`` too, in a process that loads no torch_npu, with the
same error: no graph reached the backend's compiler).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from . import corpus, triage
from .outcomes import FAILING, OUTCOMES, SILENT

CONFIGS = ("built", "fixed")
TOLERANCE = {"float32": (1e-4, 1e-4), "bfloat16": (1.6e-2, 1e-2)}
#: A bfloat16 result within this many times its tolerance is the interpreter's rounding.
BF16_ROUNDING_SPAN = 8
#: PyTorch's accuracy rule for compiled low precision (``torch._dynamo.utils.same``): a result's
#: RMSE against float64 may be this many times eager's.
RMSE_MULTIPLIER = 3.0
#: A constant of the tanh form of gelu (sqrt(8/pi)) in which the loaders decompose it, and how
#: many times the tolerance that form may differ from the exact one (4.7 forward, 9.1 backward seen).
NPU_GELU_CONSTANT = "1.5957691216"
NPU_GELU_SPAN = 16


@dataclasses.dataclass(frozen=True)
class HarnessLimit:
    """What Triton's interpreter on CPU cannot run or judge, and why: an error it raises where
    a device would not (``pattern``, matched against the innermost error), or a difference
    it makes (no pattern: named by :func:`run_sample`)."""

    name: str
    pattern: str | None
    reason: str


HARNESS_LIMITS = (
    HarnessLimit(
        "zero-dim-tensor",
        r"invalid operands of type pointer<",
        "Inductor passes a 0-dim CPU tensor given to the compiled graph to kernels by value (as "
        "Dynamo makes one of a Python float it does not specialise, a CPU tensor on an NPU too); "
        "here every input is a CPU tensor, so a 0-dim tensor that is an NPU tensor on a device is "
        "taken for such a scalar: a kernel that writes it is refused, and one that fails while it "
        "reads a 0-dim input by value (`tmp3 = in_ptr1`) is not the device's kernel (Triton's "
        "interpreter refuses `block & (scalar <= c)`); an int64 one past int32 read by value reaches "
        "the kernel whole, where on a device it crosses the launcher's int32 boundary and npu_fixes' "
        "int64-past-int32 stops the launch (unravel_index of 9223372036854775806), so a wrong result "
        "there is not the device's. Answering otherwise would need telling Dynamo's floats from the "
        "program's tensors",
    ),
    HarnessLimit(
        "npu-gelu-form",
        None,
        f"every state's loader decomposes gelu in the tanh form (sqrt(8/pi)), bafc50684's to match "
        f"NPU eager, it says; the reference here is CPU eager's exact form: a result within "
        f"{NPU_GELU_SPAN} times the tolerance from a kernel of that form is not judged",
    ),
    HarnessLimit(
        "npu-dropout-scale-one",
        None,
        "at scale 1 every state's loader decomposes native_dropout_backward to the gradient without "
        "its mask, as the NPU's eager op computes it (a scale of 1 is a dropout probability of 0); CPU "
        "eager applies the mask. Dropout passes scale 1 only with p = 0, whose mask is all true and "
        "where the forms agree: a result equal to eager's with an all-true mask (its gradients equal "
        "to eager's) is not judged",
    ),
    HarnessLimit(
        "bf16-rounding",
        None,
        f"the interpreter casts to bfloat16 by truncation, a device rounds to nearest: a "
        f"bfloat16 result within {BF16_ROUNDING_SPAN} times bfloat16's tolerance is not judged, nor "
        f"one that is within it (or equal) once the interpreter rounds to nearest (a truncated "
        f"value can be amplified: exp after a cancellation)",
    ),
)


#: The interpreter's refusal of an integer constant its type cannot hold, which a device's
#: frontend truncates without a word: a wrong kernel, whatever the values it meets.
UNREPRESENTABLE = r"Python integer -?\d+ out of bounds for u?int(8|16|32)"


# --- one sample, in a worker ------------------------------------------------------------------


class ProgramOrder:
    """The order the interpreter runs a launch's programs in: row-major, or reversed."""

    reverse = False

    def shuffle(self, programs: list) -> None:
        if self.reverse:
            programs.reverse()


def _fresh(value: Any, in_float64: bool = False) -> Any:
    """A copy of ``value`` with every tensor in a storage of its own, same layout and
    ``requires_grad``; floating tensors in float64 where ``in_float64``."""
    import torch
    from torch.utils._pytree import tree_map

    def copy(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        base = torch.empty(0, dtype=t.dtype)
        base.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())
        if in_float64 and t.is_floating_point():
            base = base.double()
        return base.requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else base

    return tree_map(copy, value)


def _evaluate(s: corpus.Sample, fn: Callable[..., Any], in_float64: bool = False) -> list[Any]:
    """The leaves of ``fn``'s result on fresh copies of the sample's inputs (floating ones in
    float64 where ``in_float64``), then for a backward sample the gradients of a seeded
    weighted sum of its floating outputs (weights bfloat16 values, the same in every precision)."""
    import torch
    from torch.utils._pytree import tree_leaves

    args, kwargs = _fresh(s.args, in_float64), _fresh(s.kwargs, in_float64)
    torch.manual_seed(1234)
    leaves = tree_leaves(fn(*args, **kwargs))
    if not s.backward:
        return [t.detach() if isinstance(t, torch.Tensor) else t for t in leaves]
    inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor) and a.requires_grad]
    outs = [o for o in leaves if isinstance(o, torch.Tensor) and o.requires_grad]
    torch.manual_seed(1)
    weights = [torch.randn(o.shape).to(torch.bfloat16).to(o.dtype) for o in outs]
    grads = (
        torch.autograd.grad(
            sum((o * w).sum() for o, w in zip(outs, weights, strict=True)), inputs, allow_unused=True
        )
        if outs and inputs
        else ()
    )
    return [*(t.detach() if isinstance(t, torch.Tensor) else t for t in leaves), *grads]


def _allowed(expected: Any) -> Any:
    """How far (in float64) each element may be off ``expected``, by its dtype's tolerance."""
    rtol, atol = TOLERANCE.get(str(expected.dtype).removeprefix("torch."), TOLERANCE["float32"])
    return atol + rtol * expected.double().abs()


def difference(expected: list[Any], actual: list[Any]) -> tuple[str | None, float]:
    """Why ``actual`` differs from ``expected`` (None if it does not) and, for a floating
    difference, how many times its tolerance the worst element is off (inf if not numeric)."""
    import torch

    if len(expected) != len(actual):
        return f"{len(actual)} results for {len(expected)}", math.inf
    worst, why = 0.0, None
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        tensors = isinstance(e, torch.Tensor), isinstance(a, torch.Tensor)
        if tensors != (True, True):
            both_nan = isinstance(e, float) and isinstance(a, float) and math.isnan(e) and math.isnan(a)
            if any(tensors) or not (both_nan or type(e) is type(a) and e == a):
                return f"result {i}: {a!r} for {e!r}", math.inf
            continue
        if e.shape != a.shape or e.dtype != a.dtype:
            return f"result {i}: {a.dtype}{list(a.shape)} for {e.dtype}{list(e.shape)}", math.inf
        if not e.is_floating_point():
            wrong = int((e != a).sum())
            if wrong:
                return f"result {i}: {wrong} of {e.numel()} elements differ", math.inf
            continue
        e64, a64 = e.double(), a.double()
        nan_mismatch = int((e64.isnan() != a64.isnan()).sum())
        if nan_mismatch:
            return f"result {i}: NaN at {nan_mismatch} elements where the other has none", math.inf
        both = ~e64.isnan()
        inf_mismatch = int(((e64 != a64) & both & (e64.isinf() | a64.isinf())).sum())
        if inf_mismatch:
            return f"result {i}: infinity differs at {inf_mismatch} elements", math.inf
        finite = both & e64.isfinite()
        if finite.any():
            ratio = (a64 - e64).abs() / _allowed(e)
            off = ratio[finite].max().item()
            if off > 1 and off > worst:
                worst = off
                count = int(((ratio > 1) & finite).sum())
                why = f"result {i}: {count} of {e.numel()} elements off, worst {off:.3g} times the tolerance"
    return why, worst


def _against_float64(expected: list[Any], actual: list[Any], reference: list[Any],
                     judge: Callable[[Any, Any, Any, Any], bool]) -> bool:
    """Whether each result of ``actual`` passes: anything but a floating tensor equal to
    eager's, a floating tensor of eager's shape where ``judge(eager, e64, a64, r64)`` holds
    (the last three in float64; ``reference``: eager run in float64)."""
    import torch

    for e, a, r in zip(expected, actual, reference, strict=True):
        if not (isinstance(e, torch.Tensor) and e.is_floating_point()):
            if difference([e], [a])[0] is not None:  # anything but a floating tensor: equal or not
                return False
            continue
        tensors = isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor)
        if not (tensors and e.shape == a.shape == r.shape and judge(e, e.double(), a.double(), r.double())):
            return False
    return True


def closer_to_float64(expected: list[Any], actual: list[Any], reference: list[Any]) -> bool:
    """Whether every element of ``actual`` off ``expected`` (eager in the sample's precision)
    by more than its tolerance is at least as close as eager's to ``reference`` (eager in
    float64): Inductor computes bfloat16 in float32, where eager rounds each step."""

    def closer(e: Any, e64: Any, a64: Any, r64: Any) -> bool:
        off = ~((a64 - e64).abs() <= _allowed(e)) & ~(e64.isnan() & a64.isnan())
        return bool(((a64 - r64).abs() <= (e64 - r64).abs())[off].all())

    return _against_float64(expected, actual, reference, closer)


def within_rmse_of_eager(expected: list[Any], actual: list[Any], reference: list[Any]) -> bool:
    """PyTorch's own accuracy rule for compiled low-precision results (its ``same`` with a
    float64 reference): each floating result's root-mean-square error against
    ``reference`` at most :data:`RMSE_MULTIPLIER` times eager's, plus a tenth of the
    tolerance; where ``reference`` is not finite, ``actual`` equals it; anything else equal."""
    import torch

    def within(e: Any, e64: Any, a64: Any, r64: Any) -> bool:
        finite = r64.isfinite()
        if not torch.equal(a64[~finite].nan_to_num(), r64[~finite].nan_to_num()) or a64[finite].isnan().any():
            return False
        if not finite.any():
            return True
        eager, compiled = ((t[finite] - r64[finite]).square().mean().sqrt().item() for t in (e64, a64))
        return compiled <= RMSE_MULTIPLIER * eager + TOLERANCE["bfloat16"][1] / 10

    return _against_float64(expected, actual, reference, within)


def _innermost(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def _error_text(exc: BaseException) -> str:
    message = str(exc).split("\nException raised from ", 1)[0]  # a C++ error's stack follows
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1].strip() if lines else ''}"[:300]


def _limit(text: str) -> HarnessLimit | None:
    return next((h for h in HARNESS_LIMITS if h.pattern and re.search(h.pattern, text)), None)


def _compile_stage(exc: BaseException) -> bool:
    """Whether ``exc`` stopped the compile (Dynamo, Inductor or the kernel's own frontend)."""
    from torch._dynamo.exc import BackendCompilerFailed, TorchDynamoException

    inner = _innermost(exc)
    return (
        isinstance(exc, (BackendCompilerFailed, TorchDynamoException))
        or type(exc).__name__ == "InductorError"
        or isinstance(inner, (NameError, SyntaxError))
        or type(inner).__name__ == "CompilationError"
    )


def _judge(s: corpus.Sample, expected: list[Any], actual: list[Any],
           float64: dict | None = None) -> tuple[str | None, float, dict]:
    """:func:`difference`, where a bfloat16 sample's result off eager counts as equal when
    :func:`closer_to_float64` against eager run in float64, or :func:`within_rmse_of_eager`
    (then the third item is the detail saying so, else empty). ``float64``: where the
    float64 result is kept between the judgements of one sample."""
    why, off = difference(expected, actual)
    if why is None or ":bfloat16:" not in s.id:
        return why, off, {}
    float64 = {} if float64 is None else float64
    try:
        if "reference" not in float64:
            float64["reference"] = _evaluate(s, s.fn, in_float64=True)
        reference = float64["reference"]
    except Exception:  # noqa: BLE001 - no float64 reference: judged as before
        return why, off, {}
    if len(reference) == len(expected) == len(actual) and closer_to_float64(expected, actual, reference):
        return None, 0.0, {"detail": f"closer to float64 than eager: {why}"}
    if len(reference) == len(expected) == len(actual) and within_rmse_of_eager(expected, actual, reference):
        return None, 0.0, {"detail": f"within PyTorch's accuracy rule against float64: {why}"}
    return why, off, {}


def _input_tensors(s: corpus.Sample) -> list[Any]:
    """The tensors among the inputs of ``s``."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [a for a in tree_leaves((s.args, s.kwargs)) if isinstance(a, torch.Tensor)]


def _by_value(s: corpus.Sample, kernels: list[str], past_int32: bool = False) -> bool:
    """Whether ``s`` has a 0-dim tensor input (with ``past_int32``: an int64 one holding a value
    int32 cannot hold) and one of ``kernels`` reads an input by value."""
    import torch

    low, high = torch.iinfo(torch.int32).min, torch.iinfo(torch.int32).max
    zero_dim = any(a.dim() == 0 and (not past_int32 or a.dtype == torch.int64 and not low <= a.item() <= high)
                   for a in _input_tensors(s))
    return zero_dim and any(re.search(r"^\s*tmp\d+ = in_ptr\d+\s*$", k, re.M) for k in kernels)


def _npu_dropout_form(s: corpus.Sample, expected: list[Any], actual: list[Any]) -> bool:
    """Whether ``s`` is ``native_dropout_backward`` at scale 1 and ``actual`` is the NPU's
    eager form, which every loader follows: the result of eager given an all-true mask, and
    the gradients of eager with the sample's own mask (the autograd formula, in both)."""
    import torch

    if not s.id.startswith("opinfo:native_dropout_backward:") or len(s.args) != 3 or s.args[2] != 1.0:
        return False
    unmasked = dataclasses.replace(s, args=(s.args[0], torch.ones_like(s.args[1]), s.args[2]), backward=False)
    result = _evaluate(unmasked, s.fn)
    return difference([*result, *expected[len(result):]], actual)[0] is None


def _off_recompiled(s: corpus.Sample, expected: list[Any], order: ProgramOrder, setting: Any) -> float:
    """How many times its tolerance ``s`` compiled again under ``setting`` (a context) is off
    eager, as :func:`run_sample` judges it in both program orders (0: judged equal; inf: it
    fails otherwise)."""
    import torch

    torch._dynamo.reset()
    try:
        with setting:
            compiled = torch.compile(s.fn, backend="inductor", dynamic=s.dynamic, fullgraph=False)
            float64: dict = {}
            for reverse in (False, True):
                order.reverse = reverse
                why, off, _ = _judge(s, expected, _evaluate(s, compiled), float64)
                if why is not None:
                    return off
        return 0.0
    except Exception:  # noqa: BLE001 - it fails otherwise: not this difference
        return math.inf
    finally:
        order.reverse = False
        torch._dynamo.reset()


def _dynamo_eager_error(s: corpus.Sample) -> str | None:
    """The error of ``s`` compiled by Dynamo alone (``backend="eager"``), None if it runs."""
    import torch

    torch._dynamo.reset()
    try:
        _evaluate(s, torch.compile(s.fn, backend="eager", dynamic=s.dynamic, fullgraph=False))
    except Exception as exc:  # noqa: BLE001 - the answer
        return _error_text(_innermost(exc))
    finally:
        torch._dynamo.reset()
    return None


class WithoutABackend:
    """:func:`_dynamo_eager_error` asked of a process of its own that loads no torch_npu (kept
    while this one lives): where it is the error the backend's compile met, the backend never
    got a graph and nothing of it can be judged. Not asked here, since a loader changes
    PyTorch's dispatch for the whole process: the loaders take Python's decomposition kernels
    off ``upsample_nearest*d`` and ``upsample_bilinear2d``, so Dynamo alone fails on their
    symbolic sizes where it does not without the backend."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None

    def error(self, s: corpus.Sample) -> str | None:
        if self._process is None or self._process.poll() is not None:
            env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", NPU_FIXES="0", OMP_NUM_THREADS="1")
            self._process = subprocess.Popen(
                [sys.executable, "-m", "npu_fixes.tools.sweep", WITHOUT_A_BACKEND], env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(s.id + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the process without a backend exited ({self._process.wait()}) on {s.id}")
        return json.loads(line)["error"]


WITHOUT_A_BACKEND = "--without-a-backend"
_WITHOUT_A_BACKEND = WithoutABackend()


def _answer_without_a_backend() -> None:
    """The other end of :class:`WithoutABackend`: a sample id per line in, its error out."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    out = _own_stdout()
    for line in sys.stdin:
        out.write(json.dumps({"error": _dynamo_eager_error(corpus.sample(line.strip()))}) + "\n")
        out.flush()


def _own_stdout() -> Any:
    """A stream on this process's standard output; whatever else prints there (compiled or
    native code, file descriptor 1) goes to stderr from now on."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def run_sample(s: corpus.Sample, launches: list, order: ProgramOrder) -> dict[str, Any]:
    """One sample compiled through the active backend and compared with eager."""
    import torch
    from torch._inductor import config

    from .interpret import OutOfBounds, bfloat16_rounded_to_nearest

    try:
        expected = _evaluate(s, s.fn)
        again = _evaluate(s, s.fn)
    except Exception as exc:  # noqa: BLE001 - no reference: not part of the corpus here
        return {"outcome": "skipped", "detail": f"eager fails: {_error_text(exc)}"}
    if difference(expected, again)[0] is not None:
        return {"outcome": "skipped", "detail": "eager is not deterministic"}
    torch._dynamo.reset()
    first = len(launches)
    compiled = torch.compile(s.fn, backend="inductor", dynamic=s.dynamic, fullgraph=False)
    record: dict[str, Any] = {}
    try:
        order.reverse = False
        actual = _evaluate(s, compiled)
        record["kernels"] = len(launches) - first
        float64: dict = {}
        why, off, accepted = _judge(s, expected, actual, float64)
        if why is None and record["kernels"]:
            order.reverse = True
            why, off, accepted_reversed = _judge(s, expected, _evaluate(s, compiled), float64)
            accepted = accepted or accepted_reversed
            if why is not None:
                why = f"programs in reverse order: {why}"
    except Exception as exc:  # noqa: BLE001 - the outcome
        inner = _innermost(exc)
        text = _error_text(inner)
        if not isinstance(inner, OutOfBounds) and _WITHOUT_A_BACKEND.error(s) == text:
            return {"outcome": "skipped", "detail": f"fails with backend='eager' too: {text}"}
        record["kernels"] = len(launches) - first
        record["detail"] = text
        record["kernel_sources"] = [launch.source for launch in launches[first:][-1:]]
        limit = _limit(text)
        if limit is None and _by_value(s, record["kernel_sources"]):
            limit = next(h for h in HARNESS_LIMITS if h.name == "zero-dim-tensor")
        if isinstance(inner, OutOfBounds):
            record["outcome"] = "out-of-bounds"
        elif re.search(UNREPRESENTABLE, text):  # refused here, truncated by a device's frontend
            record |= {"outcome": "wrong", "detail": f"a kernel constant its type cannot hold ({text})"}
        elif limit is not None:
            record |= {"outcome": "harness-limit", "limit": limit.name}
        else:
            record["outcome"] = "compile-error" if _compile_stage(exc) else "run-time-error"
        return record
    finally:
        order.reverse = False
        torch._dynamo.reset()
    if why is None:
        return record | {"outcome": "pass" if record["kernels"] else "no-kernel"} | accepted
    record["detail"] = why
    if not why.startswith("programs in reverse order") and _npu_dropout_form(s, expected, actual):
        return record | {"outcome": "harness-limit", "limit": "npu-dropout-scale-one"}
    if ":bfloat16:" in s.id and (off <= BF16_ROUNDING_SPAN or _off_recompiled(
            s, expected, order, bfloat16_rounded_to_nearest()) <= BF16_ROUNDING_SPAN):
        return record | {"outcome": "harness-limit", "limit": "bf16-rounding"}
    if off <= NPU_GELU_SPAN and any(NPU_GELU_CONSTANT in launch.source for launch in launches[first:]):
        return record | {"outcome": "harness-limit", "limit": "npu-gelu-form"}
    if _by_value(s, [launch.source for launch in launches[first:]], past_int32=True):
        return record | {"outcome": "harness-limit", "limit": "zero-dim-tensor"}
    casts = config.patch(emulate_precision_casts=True)
    if ":bfloat16:" in s.id and not _off_recompiled(s, expected, order, casts):
        record["detail"] = f"{why}; {triage.EQUAL_WITH_PRECISION_CASTS}"
    return record | {"outcome": "wrong"}


def end_with_the_sweep() -> None:
    """End this worker process once the sweep that started it is gone, killed too: the sweep
    gives it a standard input it never writes, whose read returns only when the sweep's end of
    it closes."""

    def watch() -> None:
        sys.stdin.read()
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


@contextlib.contextmanager
def interpreted_backend(location: str, with_fixes: bool) -> Iterator[tuple[list, ProgramOrder]]:
    """The backend at ``location`` set up as every sweep worker runs it (host-loaded, npu_fixes
    deciding its fixes unless ``with_fixes`` is false, kernels in Triton's interpreter): yields
    the launches it records and the order of their programs, for :func:`run_sample`."""
    import logging
    import warnings

    import torch

    from . import accuracy, interpret

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    torch.set_num_threads(1)
    accuracy.configure(None)
    codegen = accuracy.load_interpreted(location, with_fixes)
    order = ProgramOrder()
    with interpret.cpu_device(codegen, order) as launches:
        yield launches, order


def _record(sample_id: str, launches: list, order: ProgramOrder) -> dict[str, Any]:
    """Sample ``sample_id``'s record: drawn, run and judged, with the seconds it took."""
    started = time.perf_counter()
    try:
        s = corpus.sample(sample_id)
    except Exception as exc:  # noqa: BLE001 - a sample that cannot be drawn here
        record = {"outcome": "skipped", "detail": f"cannot be built: {_error_text(exc)}"}
    else:
        record = run_sample(s, launches, order)
        del launches[:]
    return record | {"id": sample_id, "seconds": round(time.perf_counter() - started, 3)}


def worker(location: str, with_fixes: bool, ids: Sequence[str]) -> None:
    """Run ``ids`` through the backend at ``location``, one JSON line per sample on stdout."""
    out = _own_stdout()
    with interpreted_backend(location, with_fixes) as (launches, order):
        for sample_id in ids:
            out.write(json.dumps(_record(sample_id, launches, order)) + "\n")
            out.flush()


def reproduce(location: str, sample_id: str) -> dict[str, Any]:
    """Sample ``sample_id`` through the backend at ``location`` as a sweep worker runs it, in
    this process: with npu_fixes, or as built where ``NPU_FIXES`` is off (what
    :func:`show` prints calls this)."""
    from ..shim import switches

    with interpreted_backend(location, switches.master_on()) as (launches, order):
        return _record(sample_id, launches, order)


def show(location: str, sample_id: str) -> str:
    """Sample ``sample_id`` as a program that runs it as the sweep did: through the backend of
    the torch_npu at ``location``, compared with eager (the sample's own code in a comment)."""
    s = corpus.sample(sample_id)
    source = "\n".join(f"#   {line}".rstrip() for line in s.source.rstrip().splitlines())
    return (
        f"# npu-fixes sweep sample {sample_id}\n"
        f"# Through the triton_experimental backend of the torch_npu at {location}, as the sweep ran it\n"
        "# (host-loaded on this CPU, kernels in Triton's interpreter), compared with eager: prints the\n"
        "# sample's record. With npu_fixes; NPU_FIXES=0 for the backend as built. The sample"
        f"{' (dynamic shapes)' if s.dynamic else ''}{', forward and backward' if s.backward else ''}:\n"
        f"{source}\n"
        "import json\nimport os\n\n"
        'os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")\n'
        "from npu_fixes.tools import sweep  # noqa: E402\n\n"
        f"print(json.dumps(sweep.reproduce({location!r}, {sample_id!r}), indent=2))\n"
    )


# --- the sweep ---------------------------------------------------------------------------------


class WorkerFailed(RuntimeError):
    """A worker process that exits before its first result: the backend cannot be run here."""


@dataclasses.dataclass
class Unit:
    config: str
    ids: list[str]


#: The module a worker process runs (``python -m``); tests name a stand-in.
WORKER = "npu_fixes.tools.sweep"


def _lines(stream: Any, into: queue.Queue) -> None:
    """Each line of ``stream`` put into ``into``, then None at its end."""
    for line in stream:
        into.put(line)
    into.put(None)


def _run_unit(unit: Unit, location: str, timeout: float, done: Callable[[str, str, dict], None]) -> None:
    """Run ``unit`` in worker processes until every sample has a record: a worker that
    exits or answers nothing for ``timeout`` seconds costs the sample it was running, a
    fresh one takes the rest; :class:`WorkerFailed` where one exits before any result."""
    pending = list(unit.ids)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", OMP_NUM_THREADS="1")
    if unit.config == "built":
        env["NPU_FIXES"] = "0"
    else:  # with npu_fixes whatever the caller's NPU_FIXES says (NPU_FIXES_DISABLE is kept)
        env.pop("NPU_FIXES", None)
    while pending:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
            json.dump({"location": location, "with_fixes": unit.config == "fixed", "ids": pending}, spec)
        proc = subprocess.Popen(
            [sys.executable, "-m", WORKER, spec.name],
            env=env,
            stdin=subprocess.PIPE,  # never written: see end_with_the_sweep
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        results: queue.Queue = queue.Queue()
        errors: collections.deque = collections.deque(maxlen=50)
        readers = [
            threading.Thread(target=_lines, args=(proc.stdout, results), daemon=True),
            threading.Thread(target=errors.extend, args=(proc.stderr,), daemon=True),
        ]
        for reader in readers:
            reader.start()
        answered = timed_out = False
        try:
            while pending:
                try:
                    line = results.get(timeout=timeout)
                except queue.Empty:
                    timed_out = True
                    break
                if line is None:
                    break
                try:
                    record = json.loads(line)
                    sample_id = record.pop("id")
                    pending.remove(sample_id)
                except (ValueError, KeyError, AttributeError):
                    continue  # not a result line
                answered = True
                done(unit.config, sample_id, record)
        finally:
            try:  # a worker whose output ended is exiting: its own status, unless it hangs there
                proc.wait(timeout=0 if timed_out else 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdin.close()
            for reader in readers:
                reader.join(timeout=5)
            os.unlink(spec.name)
        if not pending:
            return
        if not answered and not timed_out and proc.returncode != 0:
            raise WorkerFailed(
                f"a worker exited ({proc.returncode}) before any result: {_last_error(errors)}"
            )
        stuck = pending.pop(0)
        why = (
            f"no result within {timeout:.0f} s"
            if timed_out
            else f"the worker exited ({proc.returncode}): {_last_error(errors)}"
        )
        done(unit.config, stuck, {"outcome": "run-time-error", "detail": why})


def _last_error(lines: Sequence[str]) -> str:
    meaningful = [line.strip() for line in lines if line.strip()]
    return meaningful[-1][:300] if meaningful else "no message"


@dataclasses.dataclass
class Report:
    location: str
    selection: str
    #: sample id -> config -> record
    records: dict[str, dict[str, dict]]
    #: how many of the records were taken from a journal, not run by this sweep
    from_journal: int = 0

    def counts(self, config: str) -> Counter:
        return Counter(r[config]["outcome"] for r in self.records.values())

    def failing(self, config: str = "fixed") -> list[str]:
        return [i for i, r in self.records.items() if r[config]["outcome"] in FAILING]

    def regressions(self) -> list[str]:
        """Samples that pass as built and, with npu_fixes, fail (a failing outcome) or are
        skipped (their compile fails even without the backend)."""
        lost = (*FAILING, "skipped")
        return [i for i, r in self.records.items()
                if r["built"]["outcome"] in ("pass", "no-kernel") and r["fixed"]["outcome"] in lost]

    def worse(self) -> list[str]:
        """Samples that fail loudly as built (an error) and silently with npu_fixes."""
        loud = ("compile-error", "run-time-error")
        return [i for i, r in self.records.items()
                if r["built"]["outcome"] in loud and r["fixed"]["outcome"] in SILENT]

    def unexplained(self) -> list[str]:
        """Samples failing with npu_fixes that no class of :mod:`.triage` explains."""
        return [i for i in self.failing() if triage.classify(self.records[i]["fixed"]) is None]

    def silent(self) -> list[str]:
        return [i for i, r in self.records.items() if r["fixed"]["outcome"] in SILENT]

    def as_dict(self) -> dict[str, Any]:
        return {
            "torch_npu": self.location,
            "corpus": self.selection,
            "samples": len(self.records),
            "from_journal": self.from_journal,
            "counts": {c: dict(self.counts(c)) for c in CONFIGS},
            "silent_with_npu_fixes": self.silent(),
            "regressions": self.regressions(),
            "worse": self.worse(),
            "unexplained": self.unexplained(),
            "classes": {
                i: getattr(triage.classify(self.records[i]["fixed"]), "name", None) for i in self.failing()
            },
            "records": self.records,
        }


def _tree_digest(folder: Path, pattern: str) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.glob(pattern)):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(root: str) -> dict[str, str]:
    """What a sample's records depend on: the backend's sources under ``root`` (the folder
    holding ``torch_npu/``), npu_fixes' own sources, and the versions of torch and Triton."""
    import torch
    import triton

    package = Path(__file__).resolve().parents[1]
    return {"torch_npu": _tree_digest(Path(root) / "torch_npu" / "_inductor", "**/*.py"),
            "npu_fixes": _tree_digest(package, "**/*.py"),
            "torch": torch.__version__, "triton": triton.__version__}


class JournalError(ValueError):
    """The journal cannot be taken: damaged in the middle, or not to be read or written."""


class JournalMismatch(JournalError):
    """The journal holds a sweep of another torch_npu, npu_fixes, torch or Triton."""


class Journal:
    """A file of finished samples, one JSON line each (``{"id", "config", "record"}``) after a
    first line with the :func:`fingerprint` they were made with; appended to as samples
    finish, so that nothing finished is lost when a sweep stops."""

    def __init__(self, path: str | os.PathLike[str], fingerprint: dict[str, str]) -> None:
        self.path, self.fingerprint = Path(path), fingerprint
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict[str, dict]]:
        """Sample id -> config -> record of what the journal holds (empty where it does not
        exist yet: it is created with the fingerprint). A last line cut short by a stop is
        left out; :class:`JournalMismatch` where it was made with another fingerprint,
        :class:`JournalError` where a line in the middle is not a record or the file cannot be
        read or written."""
        try:
            return self._load()
        except OSError as exc:
            raise JournalError(f"{self.path}: {exc.strerror or exc}") from None

    def _load(self) -> dict[str, dict[str, dict]]:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"fingerprint": self.fingerprint}) + "\n")
            return {}
        text = self.path.read_text()
        lines = text.splitlines()
        try:
            made_with = json.loads(lines[0])["fingerprint"] if lines else None
        except (ValueError, KeyError, TypeError):
            made_with = None
        if made_with != self.fingerprint:
            made = made_with if isinstance(made_with, dict) else {}
            differ = ", ".join(sorted(k for k, v in self.fingerprint.items() if made.get(k) != v))
            raise JournalMismatch(f"{self.path} holds a sweep made with another {differ}; "
                                  "name a new journal file")
        records: dict[str, dict[str, dict]] = {}
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                records.setdefault(entry["id"], {})[entry["config"]] = entry["record"]
            except (ValueError, KeyError, TypeError) as exc:
                if number == len(lines):  # the line being written when the sweep stopped: dropped
                    self.path.write_text(text[: text.rstrip("\n").rfind("\n") + 1])
                    break
                raise JournalError(f"{self.path}, line {number}: not a sample's record ({exc})") from None
        else:
            if not text.endswith("\n"):
                with self.path.open("a") as f:
                    f.write("\n")
        return records

    def append(self, config: str, sample_id: str, record: dict) -> None:
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps({"id": sample_id, "config": config, "record": record}) + "\n")


def _units(ids: Iterable[str], records: dict[str, dict[str, dict]], per_worker: int) -> list[Unit]:
    """For each config, the ids without a record of it, in chunks of ``per_worker``; the
    configs' chunks taken in turn, so that a sweep stopped part way leaves both records of
    most samples it finished, not one config's."""
    chunks = []
    for config in CONFIGS:
        todo = [i for i in ids if config not in records[i]]
        chunks.append([Unit(config, todo[i : i + per_worker]) for i in range(0, len(todo), per_worker)])
    return [unit for turn in itertools.zip_longest(*chunks) for unit in turn if unit is not None]


def sweep(
    location: str,
    ids: Sequence[str],
    label: str,
    jobs: int,
    timeout: float,
    root: str | None = None,
    chunk: int = 1000,
    progress: Callable[[int, int], None] = lambda done, total: None,
    journal: Journal | None = None,
) -> Report:
    """Every sample of ``ids`` (a corpus described by ``label``) through the backend at
    ``location`` as built and with npu_fixes, ``jobs`` workers at a time, each on up to
    ``chunk`` samples (a worker's start, host loading the backend, takes about 5 seconds: a
    chunk of 200 samples took about 50); the workers load it from ``root`` where given (the
    folder holding its ``torch_npu/``, a wheel extracted once).
    With a ``journal``, what it holds already is taken from it, and each new record is added
    to it."""
    from concurrent.futures import ThreadPoolExecutor

    known = journal.load() if journal else {}
    records: dict[str, dict[str, dict]] = {i: dict(known.get(i, {})) for i in ids}
    lock, total = threading.Lock(), len(ids) * len(CONFIGS)
    resumed = sum(len(r) for r in records.values())
    finished = [resumed]
    per_worker = max(1, min(chunk, math.ceil((total - finished[0]) / max(jobs, 1))))
    units = _units(ids, records, per_worker)

    def done(config: str, sample_id: str, record: dict) -> None:
        with lock:
            records[sample_id][config] = record
            if journal:
                journal.append(config, sample_id, record)
            finished[0] += 1
            progress(finished[0], total)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_unit, u, root or location, timeout, done) for u in units]
        try:
            for future in futures:
                future.result()
        except WorkerFailed:
            pool.shutdown(cancel_futures=True)
            raise
    return Report(location, label, records, resumed)


def main(argv: Sequence[str]) -> None:
    """Worker entry: ``python -m npu_fixes.tools.sweep SPEC.json``, or ``--without-a-backend``
    (:class:`WithoutABackend`)."""
    if argv[0] == WITHOUT_A_BACKEND:
        return _answer_without_a_backend()
    with open(argv[0]) as f:
        spec = json.load(f)
    end_with_the_sweep()
    worker(spec["location"], spec["with_fixes"], spec["ids"])


def summary(report: Report) -> str:
    """The counts per outcome as built and with npu_fixes, then every sample that fails with
    npu_fixes (first those that pass as built), each with its class."""
    width = max(len(o) for o in OUTCOMES)
    counts = {c: report.counts(c) for c in CONFIGS}
    lines = [
        f"torch_npu at {report.location}",
        f"corpus: {report.selection}; {len(report.records)} samples",
        "",
        f"{'outcome':{width}}  as built  with npu_fixes",
    ]
    lines += [f"{o:{width}}  {counts['built'][o]:8d}  {counts['fixed'][o]:13d}" for o in OUTCOMES]
    repaired: dict[str, list[str]] = collections.defaultdict(list)
    still = set(report.failing())
    for sample_id in report.failing("built"):
        if sample_id not in still:
            repaired[report.records[sample_id]["built"]["outcome"]].append(sample_id)
    if repaired:
        lines += ["", f"fail as built, not with npu_fixes ({sum(map(len, repaired.values()))}), "
                  "by their outcome as built:"]
        lines += [f"  {outcome} ({len(ids)}): {', '.join(ids)}" for outcome, ids in sorted(repaired.items())]
    regressions, worse = report.regressions(), report.worse()
    others = [i for i in report.failing() if i not in regressions and i not in worse]
    for title, ids in (
        ("passes as built, fails with npu_fixes", regressions),
        ("an error as built, silently wrong with npu_fixes", worse),
        ("fails with npu_fixes", others),
    ):
        if ids:
            lines += ["", f"{title} ({len(ids)}), by class:"]
            by_class = collections.defaultdict(list)
            for sample_id in ids:
                known = triage.classify(report.records[sample_id]["fixed"])
                by_class[known.name if known else "UNEXPLAINED"].append(sample_id)
            for name, members in sorted(by_class.items()):
                lines.append(f"  {name} ({len(members)}):")
                lines += [f"    {i}: {report.records[i]['fixed']['outcome']}: "
                          f"{report.records[i]['fixed'].get('detail', '')}" for i in members]
    classes = {triage.classify(report.records[i]["fixed"]) for i in report.failing()} - {None}
    if classes:
        lines += ["", "known classes:"]
        lines += [f"  {c.name}: {c.verdict}" for c in sorted(classes, key=lambda c: c.name)]
    limits = Counter(r["fixed"]["limit"] for r in report.records.values() if "limit" in r["fixed"])
    if limits:
        lines += ["", "not judged with npu_fixes (limits of Triton's interpreter on CPU):"]
        lines += [
            f"  {name}: {n} samples: {next(h.reason for h in HARNESS_LIMITS if h.name == name)}"
            for name, n in limits.most_common()
        ]
    lines += ["", "npu-fixes sweep --show ID [--torch-npu PATH] prints a sample as a program that runs it "
              "through this backend, as here."]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
