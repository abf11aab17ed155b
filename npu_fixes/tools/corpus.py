"""The differential corpus of ``npu-fixes sweep``: samples compiled through a backend and
compared with eager.

A sample is named by an id from which it is rebuilt anywhere, in any process:

- ``opinfo:<op>:<variant>:<dtype>:<fwd|bwd>:<static|dynamic>:<n>``: the n-th sample input
  of an op of PyTorch's OpInfo database (``op_db``, shipped with torch), its inputs drawn
  from seed 0 as OpInfo draws them; ``bwd`` compiles the op and takes the gradients of a
  weighted sum of its floating outputs;
- ``gen:<seed>``: a program of :func:`generated`, drawn from its seed: view, permute,
  reshape and slice chains, ``slice_scatter``, reductions over chosen dims at sizes around
  the split and block thresholds, epilogues after reductions, 64-bit and bool accumulators,
  masks, sizes passed as arguments under ``dynamic=True``.

:func:`script` prints any sample as a self-contained program that compares compiled and
eager results.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

from . import training_corpus

#: Dtypes the OpInfo part draws, where an op takes them on CPU.
DTYPES = ("float32", "bfloat16", "int64", "bool")
#: Ops whose results are undefined (uninitialised memory): no result to compare.
UNDEFINED_RESULTS = frozenset(
    {
        "empty",
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "empty_strided",
        "empty_permuted",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.alpha_dropout",
        "nn.functional.feature_alpha_dropout",
    }
)


@dataclasses.dataclass(frozen=True)
class Sample:
    """A rebuilt sample: ``fn(*args, **kwargs)``, compiled with ``dynamic``; ``backward``:
    compare the gradients of ``weighted_sum(fn(...))`` with respect to the floating
    tensors of ``args`` as well."""

    id: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    dynamic: bool
    backward: bool
    #: Python source that builds ``fn``, ``args`` and ``kwargs`` (for :func:`script`).
    source: str


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which part of the corpus: OpInfo samples per op and dtype, the dtypes, the
    directions and shape modes, how many generated programs, and a cap on their size; by
    default, the whole corpus."""

    per_op: int = 5
    dtypes: tuple[str, ...] = DTYPES
    backward: bool = True
    dynamic: bool = True
    programs: int = 200
    max_numel: int = 1 << 20
    ops: tuple[str, ...] = ()  # OpInfo op names (full names); empty: every op
    training: bool = True  # the training-step family (training_corpus.py)

    def label(self) -> str:
        ops = f"{len(self.ops)} OpInfo ops" if self.ops else "every OpInfo op"
        return (
            f"{ops}, up to {self.per_op} samples per op and dtype ({', '.join(self.dtypes)}; "
            f"{'forward and backward' if self.backward else 'forward'}; "
            f"{'static and dynamic' if self.dynamic else 'static'} shapes), "
            f"{self.programs} generated programs (at most {self.max_numel} elements, about a quarter dynamic)"
            f"{f', {len(training_corpus.PROGRAMS)} training-step programs' if self.training else ''}"
        )


#: Ops of the part CI runs: those the whole corpus found failing at some state, and the
#: reductions, views and scatters the backend's defects live in.
CI_OPS = (
    "all",
    "amax",
    "amin",
    "aminmax",
    "argmax",
    "as_strided",
    "as_strided_scatter",
    "broadcast_to",
    "cat",
    "cross",
    "cumsum",
    "diagonal",
    "diagonal_copy",
    "diagonal_scatter",
    "erf",
    "expand",
    "expand_copy",
    "gather",
    "grid_sampler_2d",
    "index_reduce",
    "index_select",
    "logaddexp",
    "masked_scatter",
    "max",
    "mean",
    "native_dropout_backward",
    "nn.functional.binary_cross_entropy",
    "nn.functional.cross_entropy",
    "nn.functional.embedding",
    "nn.functional.gelu",
    "nn.functional.glu",
    "nn.functional.grid_sample",
    "nn.functional.layer_norm",
    "nn.functional.nll_loss",
    "norm",
    "permute",
    "prod",
    "repeat_interleave",
    "reshape",
    "select_scatter",
    "slice_scatter",
    "softmax",
    "sum",
    "torch.ops.aten._safe_softmax.default",
    "trace",
    "tril_indices",
    "var",
    "where",
    "xlogy",
)
#: The part of the corpus CI runs at three states (``tests/test_sweep.py``).
CI = Selection(
    per_op=1,
    dtypes=("float32", "int64"),
    backward=False,
    dynamic=False,
    programs=40,
    max_numel=1 << 17,
    ops=CI_OPS,
)
FULL = Selection()


# --- OpInfo -------------------------------------------------------------------------------


@functools.cache
def _op_db() -> dict[tuple[str, str], Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return {(op.name, op.variant_test_name or "-"): op for op in op_db}


def op_names() -> set[str]:
    """The names of the OpInfo ops."""
    return {name for name, _ in _op_db()}


@functools.lru_cache(maxsize=16)
def _op_samples(key: tuple[str, str], dtype_name: str, backward: bool) -> tuple[Any, ...]:
    """The samples of op ``key`` (name, variant) in a dtype, drawn from seed 0; kept for the
    next ids, which are of the same op (ids come op by op), and never changed (each run
    copies its inputs)."""
    import torch

    op = _op_db()[key]
    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    return tuple(op.sample_inputs("cpu", dtype, requires_grad=backward))


def opinfo_ids(selection: Selection) -> Iterator[str]:
    """The OpInfo sample ids of ``selection``, op by op."""
    import torch

    for (name, variant), op in sorted(_op_db().items()):
        if name in UNDEFINED_RESULTS or (selection.ops and name not in selection.ops):
            continue
        supported = {str(d).removeprefix("torch.") for d in op.supported_dtypes("cpu")}
        for dtype in selection.dtypes:
            if dtype not in supported:
                continue
            floating = getattr(torch, dtype).is_floating_point
            directions = ["fwd"] + (
                ["bwd"] if selection.backward and floating and op.supports_autograd else []
            )
            for direction in directions:
                try:
                    drawn = _op_samples((name, variant), dtype, direction == "bwd")
                    count = min(selection.per_op, len(drawn))
                except Exception:  # noqa: BLE001 - an op whose samples cannot be drawn here has none
                    continue
                for mode in ("static", "dynamic") if selection.dynamic else ("static",):
                    for n in range(count):
                        yield f"opinfo:{name}:{variant}:{dtype}:{direction}:{mode}:{n}"


def _opinfo_sample(sample_id: str) -> Sample:
    fields = sample_id.split(":")
    if len(fields) != 7:
        raise ValueError("an OpInfo id has 7 fields")
    _, name, variant, dtype, direction, mode, n = fields
    for field, value, allowed in (
        ("dtype", dtype, DTYPES),
        ("direction", direction, ("fwd", "bwd")),
        ("shape mode", mode, ("static", "dynamic")),
    ):
        if value not in allowed:
            raise ValueError(f"{field} {value!r} is none of {', '.join(allowed)}")
    if (name, variant) not in _op_db():
        raise ValueError(f"no OpInfo op {name!r} of variant {variant!r}")
    if not n.isdigit():
        raise ValueError(f"sample number {n!r} is no number")
    op, backward = _op_db()[(name, variant)], direction == "bwd"
    samples = _op_samples((name, variant), dtype, backward)
    if int(n) >= len(samples):
        raise ValueError(f"{name} has {len(samples)} samples in {dtype} {direction}, not {int(n) + 1}")
    sample = samples[int(n)]
    args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
    process = sample.output_process_fn_grad  # the identity unless the op says otherwise

    def fn(*a: Any, **k: Any) -> Any:
        return process(op(*a, **k))

    suffix = "" if variant == "-" else f" (variant {variant})"
    source = (
        f"# OpInfo {name}{suffix}: sample {n} of op.sample_inputs('cpu', torch.{dtype}"
        f"{', requires_grad=True' if backward else ''}) after torch.manual_seed(0)\n"
        "from torch.testing._internal.common_methods_invocations import op_db\n"
        f"op = next(o for o in op_db if o.name == {name!r} and (o.variant_test_name or '-') == {variant!r})\n"
        f"torch.manual_seed(0)\n"
        f"s = list(op.sample_inputs('cpu', torch.{dtype}, requires_grad={backward}))[{n}]\n"
        "fn = lambda *a, **k: s.output_process_fn_grad(op(*a, **k))\n"
        "args, kwargs = (s.input, *s.args), dict(s.kwargs)\n"
    )
    return Sample(sample_id, fn, args, kwargs, mode == "dynamic", backward, source)


# --- generated programs -------------------------------------------------------------------

#: Sizes around the split and block thresholds (numbers of elements of a program's input).
_SIZES = [2**k + d for k in range(11, 21) for d in (-1, 0, 1)] + [
    3,
    5,
    6,
    7,
    9,
    13,
    17,
    31,
    33,
    63,
    65,
    127,
    129,
]


def _factor(numel: int, rng: random.Random) -> list[int]:
    """A random 2-3 dimensional shape of ``numel`` elements (1 and ``numel`` allowed)."""
    divisors = [d for d in range(1, min(numel, 4096) + 1) if numel % d == 0]
    first = rng.choice(divisors)
    rest = numel // first
    if rng.random() < 0.5:
        return [first, rest]
    divisors = [d for d in range(1, min(rest, 4096) + 1) if rest % d == 0]
    second = rng.choice(divisors)
    return [first, second, rest // second]


def _view_step(shape: list[int], rng: random.Random) -> tuple[str, list[int]] | None:
    """One view step on ``y`` of ``shape``: the statement and the shape after it."""
    rank = len(shape)
    kind = rng.choice(["reshape", "permute", "transpose", "slice", "select", "t", "unsqueeze_flatten"])
    if kind == "reshape":
        numel = 1
        for s in shape:
            numel *= s
        new = _factor(numel, rng)
        return f"y = y.reshape({', '.join(map(str, new))})", new
    if kind == "permute" and rank >= 2:
        perm = list(range(rank))
        rng.shuffle(perm)
        return f"y = y.permute({', '.join(map(str, perm))})", [shape[p] for p in perm]
    if kind == "transpose" and rank >= 2:
        a, b = rng.sample(range(rank), 2)
        new = list(shape)
        new[a], new[b] = new[b], new[a]
        return f"y = y.transpose({a}, {b})", new
    if kind == "t" and rank == 2:
        return "y = y.t()", shape[::-1]
    if kind == "slice":
        dim = rng.randrange(rank)
        if shape[dim] < 2:
            return None
        start, step = rng.randrange(shape[dim] // 2 + 1), rng.choice([1, 2, 3])
        new = list(shape)
        new[dim] = len(range(start, shape[dim], step))
        index = ", ".join([":"] * dim + [f"{start}::{step}"])
        return f"y = y[{index}]", new
    if kind == "select" and rank >= 2:
        dim = rng.randrange(rank)
        i = rng.randrange(shape[dim])
        return f"y = y.select({dim}, {i})", shape[:dim] + shape[dim + 1 :]
    if kind == "unsqueeze_flatten" and rank >= 2:
        dim = rng.randrange(rank - 1)
        new = shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2 :]
        return f"y = y.flatten({dim}, {dim + 1})", new
    return None


_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "argmax")
#: Epilogues after a reduction (its result made a number first: a bool ``amax`` has no ``-``).
_EPILOGUES = (
    "r = r * 2 + 1",
    "r = r.float() - r.float().mean()",
    "r = r.float()\n    r = torch.where(r > 0, r, -r)",
)
_INPUT_DTYPES = ("float32", "float32", "float32", "int64", "int32", "bool")


@dataclasses.dataclass(frozen=True)
class Program:
    """A generated program: ``source`` defines ``program(x, n0, ...)``; ``inputs`` are the
    statements that build ``args``; ``dynamic``: compiled with ``dynamic=True``."""

    source: str
    inputs: tuple[str, ...]
    dynamic: bool
    numel: int


def generated(seed: int) -> Program:
    """Program ``seed``: an input of a size around a threshold, up to three view steps,
    maybe a mask and a ``slice_scatter``, maybe a reduction (over some dims or all, kept
    dims or not) and an epilogue."""
    rng = random.Random(seed)
    numel = rng.choice(_SIZES)
    start = _factor(numel, rng)
    dtype = rng.choice(_INPUT_DTYPES)
    dynamic = rng.random() < 0.25
    shape, lines, size_args = list(start), [], []
    for _ in range(rng.randrange(4)):
        step = _view_step(shape, rng)
        if step is None:
            continue
        line, shape = step
        if dynamic and line.startswith("y = y.reshape(") and rng.random() < 0.5:  # sizes as arguments
            names = [f"n{len(size_args) + i}" for i in range(len(shape))]
            size_args += zip(names, shape, strict=True)
            line = f"y = y.reshape({', '.join(names)})"
        lines.append(line)
    if dtype != "bool" and rng.random() < 0.25:  # a mask, as labels != -100
        lines.append(rng.choice(["y = (y != 0)", "y = torch.where(y > 0, y, 0)"]))
    if rng.random() < 0.2:
        dim = rng.randrange(len(shape))
        if shape[dim] >= 2:
            begin, stride = rng.randrange(shape[dim] // 2), rng.choice([1, 2])
            view = ", ".join([":"] * dim + [f"{begin}::{stride}"])
            lines.append(
                f"y = torch.slice_scatter(y, torch.ones_like(y[{view}]), {dim}, {begin}, None, {stride})"
            )
    reduction = rng.choice((*_REDUCTIONS, None))
    if reduction is None:
        lines.append(
            rng.choice(["return y * 2", "return y.contiguous()", "return y + 1", "return y.clone()"])
        )
    else:
        dims = sorted(rng.sample(range(len(shape)), rng.randrange(1, len(shape) + 1)))
        keep = rng.random() < 0.3
        one = f"{dims[0]}, keepdim={keep}"
        over = "" if rng.random() < 0.25 else f"{dims}, keepdim={keep}"
        lines.append(
            {
                "sum": f"r = y.sum({over})",
                "amax": f"r = y.amax({over})",
                "amin": f"r = y.amin({over})",
                "mean": f"r = y.float().mean({over})",
                "prod": f"r = y.prod({one if over else ''})",
                "argmax": f"r = y.float().argmax({one if over else ''})",
            }[reduction]
        )
        if rng.random() < 0.5:
            lines.append(rng.choice(_EPILOGUES))
        lines.append("return r")
    params = ", ".join(["x", *(name for name, _ in size_args)])
    source = f"def program({params}):\n    y = x\n" + "".join(f"    {line}\n" for line in lines)
    size = tuple(start)
    make = {"float32": f"x = torch.randn({size})", "bool": f"x = torch.rand({size}) > 0.5"}.get(
        dtype, f"x = torch.randint(-5, 6, {size}, dtype=torch.{dtype})"
    )
    values = "".join(f", {value}" for _, value in size_args)
    return Program(source, ("torch.manual_seed(0)", make, f"args = (x{values},)"), dynamic, numel)


def _from_source(sample_id: str, source: str, inputs: tuple[str, ...], dynamic: bool,
                 backward: bool) -> Sample:
    """The sample of our own ``source`` (defines ``program``) with ``inputs`` (build ``args``)."""
    import torch

    scope: dict[str, Any] = {"torch": torch}
    exec(source, scope)  # noqa: S102 - our own program
    for line in inputs:
        exec(line, scope)  # noqa: S102
    script = source + "fn, kwargs = program, {}\n" + "".join(f"{line}\n" for line in inputs)
    return Sample(sample_id, scope["program"], scope["args"], {}, dynamic, backward, script)


def _generated_sample(sample_id: str) -> Sample:
    program = generated(int(sample_id.split(":")[1]))
    return _from_source(sample_id, program.source, program.inputs, program.dynamic, False)


def generated_ids(selection: Selection) -> Iterator[str]:
    """The first ``selection.programs`` seeds whose program has at most ``max_numel`` elements."""
    seeds = (seed for seed in itertools.count() if generated(seed).numel <= selection.max_numel)
    return (f"gen:{seed}" for seed in itertools.islice(seeds, selection.programs))


# --- the corpus -----------------------------------------------------------------------------


def _training_sample(sample_id: str) -> Sample:
    name = sample_id.split(":", 1)[1]
    if name not in training_corpus.PROGRAMS:
        raise ValueError(f"no training-step program {name!r}")
    program = training_corpus.PROGRAMS[name]
    return _from_source(sample_id, program.source, program.inputs, program.dynamic, program.backward)


def ids(selection: Selection) -> list[str]:
    """Every sample id of ``selection``: the OpInfo part, the generated programs, then the
    training-step family."""
    training = [f"train:{name}" for name in training_corpus.PROGRAMS] if selection.training else []
    return [*opinfo_ids(selection), *generated_ids(selection), *training]


def sample(sample_id: str) -> Sample:
    """The sample ``sample_id`` rebuilt (``ValueError`` for an id no corpus holds)."""
    kind, _, seed = sample_id.partition(":")
    try:
        if kind == "opinfo":
            return _opinfo_sample(sample_id)
        if kind == "gen" and seed.isdigit():
            return _generated_sample(sample_id)
        if kind == "train":
            return _training_sample(sample_id)
        why = "unknown form"
    except ValueError as exc:
        why = str(exc)
    raise ValueError(
        f"{sample_id!r} is no sample id of the corpus ({why}; ids are opinfo:<op>:<variant>:<dtype>:"
        "<fwd|bwd>:<static|dynamic>:<n>, gen:<seed> or train:<name>)"
    )
