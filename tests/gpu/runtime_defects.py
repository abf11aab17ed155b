"""Defects 3-5 on real hardware (a CUDA GPU): the rules of npu_fixes against the failures.

a. launch-grid: the final-loss kernel's shape (in-place read-modify-write of
   ``in_out_ptr0[0]``, no address depends on ``program_id``) launched with the old rule's
   grid (48 programs, a 910B2's vector cores) and with the grid of ``clamped_programs``,
   ``--launches`` times each: how often is the result not what one program computes?
b. boundary-downcast: a real Triton kernel compiled for ``*i32`` that reads an in/out
   buffer and then masked-writes it (fastNLP's pattern), called through ``wrap_launcher``
   with int64 tensors: in/out contents, pure outputs, non-contiguous arguments; and the guard
   int64-past-int32 layered on it (a value past int32 stops the launch).
c. rng-capture-gate: ``torch.compile(mode="reduce-overhead")`` of a DeBERTa-like block whose
   dropout calls ``bernoulli_`` (``fallback_random=True``), with ``gate_table`` applied to
   stock Inductor's lowering table: is the graph captured, and do losses, dropout masks and
   gradients equal eager bit for bit? The same without the gate, for comparison.

    python -m tests.gpu.runtime_defects --out benchmarks/results/<date>_<commit>_<machine>/runtime_defects.txt

Prints one table per part, after the machine, GPU, torch and triton versions, writes the
text to ``--out`` and exits 1 if an expectation fails. The checks take a ``device``, so
the tests can also run (a) and (b) in Triton's interpreter on CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import platform
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import torch
import triton
import triton.language as tl

from npu_fixes.fixes.boundary_downcast import wrap_launcher
from npu_fixes.fixes.int64_past_int32 import BoundsWatch, Int64PastInt32, checked_arguments, checking
from npu_fixes.fixes.launch_grid import clamped_programs, clamps_grid
from npu_fixes.fixes.rng_capture_gate import bernoulli_ops, gate_table
from npu_fixes.fixes.shared.narrowing import boundary_plan


@dataclasses.dataclass
class Row:
    """One checked case: ``ok`` is None for a row that only informs."""

    case: str
    observed: str
    ok: bool | None

    def cells(self) -> list[str]:
        verdict = "-" if self.ok is None else ("yes" if self.ok else "NO")
        return [self.case, verdict, self.observed]


# --- a. scalar race ------------------------------------------------------------------------

OLD_RULE_PROGRAMS = 48  # pre-fix launcher: a zero-node Grid1D kernel gets grid_0 = vector cores
R0_NUMEL = 4096
R0_BLOCK = 256
START_LOSS, END_LOSS = 3.0, 1.0


@triton.jit
def qa_final_loss_kernel(in_out_ptr0, in_ptr0):
    """The QA head's ``total_loss = (start_loss + end_loss) / 2`` in place: ``in_out_ptr0``
    holds the start loss, ``in_ptr0`` the end loss; no address uses ``program_id``."""
    tmp0 = tl.load(in_out_ptr0)
    tmp1 = tl.load(in_ptr0)
    tl.store(in_out_ptr0, (tmp0 + tmp1) * 0.5)


@triton.jit
def summed_loss_kernel(in_out_ptr0, in_ptr0, R0_NUMEL: tl.constexpr, R0_BLOCK: tl.constexpr):
    """Every program sums ``in_ptr0`` and adds the sum to ``in_out_ptr0[0]`` in place."""
    acc = tl.zeros([R0_BLOCK], tl.float32)
    for r0_offset in range(0, R0_NUMEL, R0_BLOCK):
        r0_index = r0_offset + tl.arange(0, R0_BLOCK)
        acc += tl.load(in_ptr0 + r0_index, r0_index < R0_NUMEL, other=0.0)
    tmp0 = tl.load(in_out_ptr0)
    tl.store(in_out_ptr0, tmp0 + tl.sum(acc, 0))


@triton.jit
def occupy_kernel(sink_ptr, SPIN: tl.constexpr):
    """Background work for a busy device: programs of 1024 threads that spin for different
    lengths, so the slots they free (where another kernel's programs start) free one by
    one, not all at once."""
    pid = tl.program_id(0)
    acc = pid.to(tl.float32)
    for _ in range(SPIN + (pid * 37 % 64) * (SPIN // 16)):
        acc = acc * 0.999 + 1.0
    tl.store(sink_ptr + pid, acc)


def fixed_rule_programs(cores: int = OLD_RULE_PROGRAMS) -> int:
    """Programs that launch-grid's rule gives the final-loss kernel (Grid1D, 0 x nodes,
    ``xnumel=1``, ``XBLOCK=1``, not a reduction) on ``cores`` vector cores."""
    return clamped_programs(1, 1, cores) if clamps_grid(0, "Grid1D", True, False) else cores


@dataclasses.dataclass
class RaceResult:
    kernel: str
    programs: int
    launches: int
    wrong: int
    worst: float  # most programs' updates seen applied on top of each other in one result

    @property
    def rate(self) -> float:
        return self.wrong / self.launches


def scalar_race(programs: int, launches: int, device: str, kernel: str = "qa",
                busy: bool = False) -> RaceResult:
    """Launch ``kernel`` ("qa": the QA final loss, "sum": a reduction added in place)
    ``launches`` times from a fresh scalar, counting on the device the results that
    differ from one program's; one sync at the end. With ``busy`` (CUDA), background work
    on another stream fills every SM first, as other kernels do in a training step, so the
    programs start one by one as slots free up instead of all at the same instant."""
    if kernel == "qa":
        data = torch.full((1,), END_LOSS, device=device)
        start, correct = START_LOSS, (START_LOSS + END_LOSS) / 2
    else:
        data = torch.ones(R0_NUMEL, device=device)
        start, correct = 0.0, float(R0_NUMEL)
    scalar = torch.empty(1, device=device)
    wrong = torch.zeros(1, dtype=torch.int64, device=device)
    extreme = torch.full((1,), correct, device=device)
    side = torch.cuda.Stream() if busy else None
    fill_programs = 2 * torch.cuda.get_device_properties(device).multi_processor_count if busy else 0
    sink = torch.empty(fill_programs, device=device)
    for _ in range(launches):
        if side is not None:
            with torch.cuda.stream(side):
                occupy_kernel[(fill_programs,)](sink, SPIN=2048, num_warps=32)
        scalar.fill_(start)
        if kernel == "qa":
            qa_final_loss_kernel[(programs,)](scalar, data)
            torch.minimum(extreme, scalar, out=extreme)
        else:
            summed_loss_kernel[(programs,)](scalar, data, R0_NUMEL=R0_NUMEL, R0_BLOCK=R0_BLOCK)
            torch.maximum(extreme, scalar, out=extreme)
        wrong += scalar != correct
    if side is not None:
        side.synchronize()  # no background work left over for the next measurement
    value = extreme.item()
    # qa: k programs in a row leave END + (START - END) / 2**k; sum: k programs leave k * R0_NUMEL
    worst = (math.log2((START_LOSS - END_LOSS) / (value - END_LOSS)) if value > END_LOSS else float("inf")) \
        if kernel == "qa" else value / R0_NUMEL
    return RaceResult(kernel, programs, launches, int(wrong.item()), worst)


def race_rows(launches: int, device: str) -> list[Row]:
    """The QA final-loss kernel is checked; the summing variant (a long reduction before
    the read-modify-write) is shown for comparison."""
    rows = []
    cases = (("qa", False, "QA final loss, idle GPU (informative)"),
             ("sum", False, "summed loss, idle GPU (informative)"),
             ("qa", True, "QA final loss, busy GPU"))
    for kernel, busy, label in cases:
        old = scalar_race(OLD_RULE_PROGRAMS, launches, device, kernel, busy)
        new = scalar_race(fixed_rule_programs(), launches, device, kernel, busy)
        rows += [
            Row(f"{label}, old rule: grid {old.programs}", f"{old.wrong}/{old.launches} wrong "
                f"(rate {old.rate:.4f}), worst: {old.worst:g} programs' updates stacked",
                old.wrong > 0 if busy else None),
            Row(f"{label}, launch-grid rule: grid {new.programs}", f"{new.wrong}/{new.launches} wrong "
                f"(rate {new.rate:.4f})", new.programs == 1 and new.wrong == 0),
        ]
    return rows


# --- b. boundary downcast ------------------------------------------------------------------

DOWNCAST_MODULE = SimpleNamespace(_DTYPE_DOWNCAST_MAP={"*i64": (torch.int64, torch.int32)})
DEF_ARGS = ["in_out_ptr0", "in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]
DOWNCAST_ARGS = {"in_out_ptr0": "*i64", "in_ptr0": "*i64", "out_ptr0": "*i64"}
MUTATED = ["in_out_ptr0"]
XBLOCK = 64


@triton.jit
def halve_where_kernel(in_out_ptr0, in_ptr0, in_ptr1, out_ptr0, xnumel,
                       IO_S0: tl.constexpr, IO_S1: tl.constexpr, IN_S0: tl.constexpr,
                       IN_S1: tl.constexpr, XN1: tl.constexpr, XBLOCK: tl.constexpr):
    """On ``[xnumel // XN1, XN1]`` views with the strides baked in: ``out = in_out + in0``,
    then ``in_out //= 2`` written only where ``in1`` (elsewhere the input must survive)."""
    tl.static_assert(in_out_ptr0.dtype.element_ty == tl.int32)
    tl.static_assert(in_ptr0.dtype.element_ty == tl.int32)
    tl.static_assert(out_ptr0.dtype.element_ty == tl.int32)
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    x0 = xindex % XN1
    x1 = xindex // XN1
    tmp0 = tl.load(in_out_ptr0 + (IO_S0 * x1 + IO_S1 * x0), xmask)
    tmp1 = tl.load(in_ptr0 + (IN_S0 * x1 + IN_S1 * x0), xmask)
    tmp2 = tl.load(in_ptr1 + xindex, xmask)
    tl.store(out_ptr0 + xindex, tmp0 + tmp1, xmask)
    tl.store(in_out_ptr0 + (IO_S0 * x1 + IO_S1 * x0), tmp0 // 2, xmask & tmp2)


class LayoutMismatch(AssertionError):
    """The kernel was handed a tensor whose strides differ from the ones compiled in."""


def compiled_launcher(io: torch.Tensor, in0: torch.Tensor) -> Callable[..., None]:
    """A launcher for the kernel compiled against the layouts of ``io`` and ``in0`` (as
    Inductor bakes strides into a kernel). A real kernel would address a tensor of another
    layout wrongly, maybe out of bounds; this launcher raises LayoutMismatch instead."""
    io_strides, in_strides, ncols = io.stride(), in0.stride(), io.shape[1]

    def launcher(in_out_ptr0, in_ptr0, in_ptr1, out_ptr0, xnumel, stream=None):  # current stream
        for name, arg, strides in (("in_out_ptr0", in_out_ptr0, io_strides),
                                   ("in_ptr0", in_ptr0, in_strides)):
            if arg.stride() != strides:
                raise LayoutMismatch(f"{name}: kernel compiled for strides {strides}, got {arg.stride()}")
        halve_where_kernel[(triton.cdiv(xnumel, XBLOCK),)](
            in_out_ptr0, in_ptr0, in_ptr1, out_ptr0, xnumel,
            *io_strides, *in_strides, ncols, XBLOCK=XBLOCK,
        )

    launcher._npu_def_args = DEF_ARGS
    return launcher


Tensors = tuple[torch.Tensor, ...]


def downcast_call(io: torch.Tensor, in0: torch.Tensor, cond: torch.Tensor) -> Tensors:
    """Run the kernel through ``wrap_launcher`` on int64 ``io``/``in0`` (``io`` updated in
    place); return the new ``io`` and the pure output."""
    out = torch.full(io.shape, -1, dtype=torch.int64, device=io.device)
    launch = wrap_launcher(DOWNCAST_MODULE, compiled_launcher(io, in0), DOWNCAST_ARGS, MUTATED)
    launch(io, in0, cond, out, io.numel())
    return io, out


def downcast_eager(io: torch.Tensor, in0: torch.Tensor, cond: torch.Tensor) -> Tensors:
    return torch.where(cond, io // 2, io), io + in0


def _inputs(device: str, shape: tuple[int, int], seed: int = 0) -> Tensors:
    gen = torch.Generator().manual_seed(seed)
    io = torch.randint(0, 2**30, shape, generator=gen, dtype=torch.int64)
    in0 = torch.randint(0, 2**30, shape, generator=gen, dtype=torch.int64)
    cond = torch.rand(shape, generator=gen) < 0.5
    return io.to(device), in0.to(device), cond.to(device)


def _compare(label: str, got: torch.Tensor, want: torch.Tensor) -> tuple[str, bool]:
    bad = int((got != want).sum())
    return f"{label}: {'eager values' if bad == 0 else f'{bad}/{want.numel()} differ from eager'}", bad == 0


def _layout_row(case: str, io: torch.Tensor, in0: torch.Tensor, cond: torch.Tensor) -> Row:
    """Handled (eager values) or refused with an error naming the argument, never a kernel
    fed a temporary whose layout differs from the one it was compiled for."""
    want_io, want_out = downcast_eager(io.clone(), in0, cond)
    try:
        got_io, got_out = downcast_call(io, in0, cond)
    except LayoutMismatch as err:
        return Row(case, f"mishandled: the kernel got a temporary of another layout ({err})", False)
    except Exception as err:  # noqa: BLE001 - any other error is the wrapper refusing
        named = any(name in str(err) for name in DOWNCAST_ARGS)
        return Row(case, f"refused: {type(err).__name__}: {err}", named)
    io_text, io_ok = _compare("in/out", got_io, want_io)
    out_text, out_ok = _compare("out", got_out, want_out)
    return Row(case, f"{io_text}; {out_text}", io_ok and out_ok)


def in_out_row(device: str) -> Row:
    """fastNLP's failure: an in/out buffer read then masked-written must keep its input."""
    io, in0, cond = _inputs(device, (4, 96))
    want_io, _ = downcast_eager(io.clone(), in0, cond)
    got_io, _ = downcast_call(io, in0, cond)
    text, ok = _compare("in/out", got_io, want_io)
    unwritten = int((~cond).sum())
    return Row("in/out int64 -> *i32, masked write", f"{text} ({unwritten} elements not written)", ok)


def pure_output_row(device: str) -> Row:
    io, in0, cond = _inputs(device, (4, 96), seed=1)
    _, want_out = downcast_eager(io.clone(), in0, cond)
    _, got_out = downcast_call(io, in0, cond)
    text, ok = _compare("out", got_out, want_out)
    return Row("pure output int64 -> *i32", text, ok)


def transposed_row(device: str) -> Row:
    io, in0, cond = _inputs(device, (96, 4), seed=2)
    return _layout_row("transposed in/out and input (dense)", io.t(), in0.t(), cond.t().contiguous())


def gapped_row(device: str) -> Row:
    io, in0, cond = _inputs(device, (4, 192), seed=3)
    return _layout_row("strided in/out and input x[:, ::2]",
                       io[:, ::2], in0[:, ::2], cond[:, ::2].contiguous())


def overflow_row(device: str) -> Row:
    """The guard int64-past-int32 over ``wrap_launcher``: 2**31 in an input must stop the launch."""
    io, in0, cond = _inputs(device, (4, 96), seed=4)
    in0[1, 7] = 2**31
    launcher = compiled_launcher(io, in0)
    plan = boundary_plan(DOWNCAST_MODULE._DTYPE_DOWNCAST_MAP, launcher._npu_def_args, DOWNCAST_ARGS, MUTATED)
    watch = BoundsWatch()
    launch = checking(wrap_launcher(DOWNCAST_MODULE, launcher, DOWNCAST_ARGS, MUTATED), launcher._npu_def_args,
                      checked_arguments(plan), "downcast kernel", weakref.WeakSet(), watch)  # none allocated by a graph
    label = "int64-past-int32 guard, an input holds 2**31 (reported by the watch, the host not blocked)"
    try:
        launch(io, in0, cond, torch.empty_like(io), io.numel())
        watch.settle()  # where a step synchronises
    except Int64PastInt32 as err:
        return Row(label, f"raised: {err}", str(2**31) in str(err) and "'in_ptr0'" in str(err))
    return Row(label, "no error: the value was cut", False)


DOWNCAST_CHECKS = (in_out_row, pure_output_row, transposed_row, gapped_row, overflow_row)


# --- c. capture gate -----------------------------------------------------------------------

SEED = 1234
DROPOUT = 0.5  # the scale 1/(1-p) = 2 is exact


class XDropout(torch.nn.Module):
    """DeBERTa's XDropout: the mask comes from ``empty_like(x).bernoulli_(1 - p)``."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self.training:
            return x, None
        mask = (1 - torch.empty_like(x).bernoulli_(1 - DROPOUT)).to(torch.bool)
        return x.masked_fill(mask, 0) * (1 / (1 - DROPOUT)), mask


class DebertaLikeBlock(torch.nn.Module):
    """dense -> XDropout -> residual -> mean square loss; returns (loss, dropout mask).

    Inputs and weights are small integers, so every sum is exact and a compiled loss or
    gradient can equal eager bit for bit whatever order a fused kernel sums in.
    """

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(hidden, hidden, bias=False)
        self.dropout = XDropout()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h, mask = self.dropout(self.dense(x))
        h = h + x
        return (h * h).mean(), mask


def make_block(device: str) -> tuple[DebertaLikeBlock, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    block = DebertaLikeBlock()
    with torch.no_grad():
        block.dense.weight.copy_(torch.randint(-1, 2, block.dense.weight.shape, generator=gen))
    x = torch.randint(-1, 2, (16, 32), generator=gen).float()
    return block.to(device), x.to(device)


def train_steps(fn: Callable, block: DebertaLikeBlock, x: torch.Tensor, iterations: int) -> list[tuple]:
    """(loss, mask, weight gradient) of ``iterations`` forward+backward steps from SEED."""
    torch.manual_seed(SEED)
    steps = []
    for _ in range(iterations):
        torch.compiler.cudagraph_mark_step_begin()
        loss, mask = fn(x)
        loss.backward()
        steps.append((loss.detach().clone(), mask.clone(), block.dense.weight.grad.clone()))
        block.dense.weight.grad = None
    return steps


def first_difference(eager: list[tuple], compiled: list[tuple]) -> str | None:
    for i, (e, c) in enumerate(zip(eager, compiled, strict=True)):
        for what, a, b in zip(("loss", "mask", "grad"), e, c, strict=True):
            if not torch.equal(a, b):
                return f"iteration {i + 1}: {what} differs"
    return None


@contextlib.contextmanager
def counting_captures() -> Iterator[list[int]]:
    """Count CUDA graph captures (``torch.cuda.graph`` entered) while active."""
    count = [0]
    enter = torch.cuda.graph.__enter__

    def counted(self):
        count[0] += 1
        return enter(self)

    torch.cuda.graph.__enter__ = counted
    try:
        yield count
    finally:
        torch.cuda.graph.__enter__ = enter


@contextlib.contextmanager
def skip_messages() -> Iterator[list[str]]:
    """Collect Inductor's "skipping cudagraphs due to ..." log messages while active (on
    ``cudagraphs_log``; older releases log them on ``perf_hint_log``)."""
    from torch._inductor import cudagraph_utils

    names = ("cudagraphs_log", "perf_hint_log")
    loggers = [getattr(cudagraph_utils, n) for n in names if hasattr(cudagraph_utils, n)]
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    for log in loggers:
        log.addHandler(handler)
    try:
        yield messages
    finally:
        for log in loggers:
            log.removeHandler(handler)


@dataclasses.dataclass
class CaptureResult:
    stock: list[str]  # the Bernoulli overloads that stock Inductor's lowering table holds
    gated: list[str]  # those the gate rule replaced
    train_captures: int
    train_skips: int
    skip_messages: list[str]
    difference: str | None  # first compiled/eager difference over the iterations
    iterations: int
    plain_captures: int  # the same block in eval mode (no bernoulli), 3 calls
    plain_skips: int


def capture_run(device: str, iterations: int, gate: bool) -> CaptureResult:
    """Compile the block with mode="reduce-overhead" and fallback_random, with or without
    the gate on stock Inductor's lowering table (restored afterwards)."""
    from torch._dynamo.utils import counters
    from torch._inductor import config
    from torch._inductor import lowering as L

    torch._dynamo.reset()
    saved = {op: L.lowerings[op] for op in bernoulli_ops() if op in L.lowerings}

    def skips() -> int:
        return counters["inductor"]["cudagraph_skips"]

    try:
        gated = [str(op) for op in gate_table(L.lowerings)] if gate else []
        block, x = make_block(device)
        eager = train_steps(block, block, x, iterations)
        compiled = torch.compile(block, mode="reduce-overhead")
        with config.patch(fallback_random=True, force_disable_caches=True), \
                counting_captures() as captures, skip_messages() as messages:
            before = skips()
            steps = train_steps(compiled, block, x, iterations)
            train_captures, train_skips = captures[0], skips() - before
            block.eval()
            with torch.no_grad():
                for _ in range(3):
                    torch.compiler.cudagraph_mark_step_begin()
                    compiled(x)
            plain_captures, plain_skips = captures[0] - train_captures, skips() - before - train_skips
    finally:
        L.lowerings.update(saved)
        torch._dynamo.reset()
    return CaptureResult([str(op) for op in saved], gated, train_captures, train_skips, messages,
                         first_difference(eager, steps), iterations, plain_captures, plain_skips)


def capture_rows(result: CaptureResult, gate: bool) -> list[Row]:
    """Rows for one run; only the gated run has expectations."""
    tag = "gate" if gate else "no gate"
    reason = next((m for m in result.skip_messages if "bernoulli" in m), None)
    rows = [
        Row(f"{tag}: training graph (bernoulli_)",
            f"{result.train_captures} captures, cudagraph_skips +{result.train_skips}"
            + (f"; log: {reason}" if reason else ""),
            (result.train_captures == 0 and result.train_skips > 0 and reason is not None) if gate else None),
        Row(f"{tag}: eval graph (no bernoulli)",
            f"{result.plain_captures} captures, cudagraph_skips +{result.plain_skips}",
            (result.plain_captures > 0 and result.plain_skips == 0) if gate else None),
        Row(f"{tag}: loss, mask, grad vs eager x{result.iterations}",
            "bit for bit equal" if result.difference is None else result.difference,
            (result.difference is None) if gate else None),
    ]
    if gate:
        absent = [str(op) for op in bernoulli_ops() if str(op) not in result.stock]
        absent_text = ", ".join(absent) or "none"
        rows.insert(0, Row("gate: Bernoulli lowerings gated",
                           f"{', '.join(result.gated)} (not in the stock table: {absent_text})",
                           bool(result.gated) and result.gated == result.stock))
    return rows


# --- report --------------------------------------------------------------------------------

def render(title: str, rows: list[Row]) -> str:
    cells = [["case", "ok", "observed"], *(row.cells() for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(2)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}" for r in cells]
    return "\n".join([title, *lines])


def header() -> str:
    return (f"machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} cpus), "
            f"GPU: {torch.cuda.get_device_name()}, "
            f"Python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
            f"triton {triton.__version__}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("--launches", type=int, default=20_000, help="launches per grid in (a)")
    parser.add_argument("--iterations", type=int, default=20, help="training iterations in (c)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")

    sections = [
        (f"a. scalar race: final-loss kernel, {args.launches} launches per grid",
         race_rows(args.launches, "cuda")),
        ("b. boundary downcast: *i32 kernel through wrap_launcher, int64 CUDA tensors",
         [check("cuda") for check in DOWNCAST_CHECKS]),
        (f"c. capture gate: reduce-overhead, fallback_random, {args.iterations} iterations",
         capture_rows(capture_run("cuda", args.iterations, gate=True), gate=True)
         + capture_rows(capture_run("cuda", args.iterations, gate=False), gate=False)),
    ]
    failed = [row.case for _, rows in sections for row in rows if row.ok is False]
    text = "\n\n".join([header(), *(render(title, rows) for title, rows in sections),
                        f"expectations failed: {', '.join(failed)}" if failed else "all expectations met"])
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
