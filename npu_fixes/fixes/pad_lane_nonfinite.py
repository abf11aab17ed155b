"""pad-lane-nonfinite: a looped sum of ``g * (1 / x)`` or ``p * log(p)`` comes back NaN.

- **Defect**: a looped reduction holds its pad lanes (past the reduced length, loaded as the
  fill 0) at its identity with ``_acc = tl.where(mask, combine(_acc, value), _acc)``. The
  backend drops that select where it can prove ``value`` is the identity on pad lanes,
  following each value's pad-lane fact (a constant, "finite" or unknown) through the ops; an
  op it does not model is called finite whenever its operands are. Reciprocal, log, rsqrt,
  division and the like of the fill 0 are infinite, so ``g * x.reciprocal()`` is called 0 on
  pad lanes (0 times "finite"), the select goes, and 0 * inf = NaN enters the sum: the
  gradient of ``1 / x * c`` with respect to a scalar ``c`` (``1 / x`` is a reciprocal), an
  entropy ``(p * p.log()).sum(-1)``, whenever the reduced length is not a multiple of the block.
- **Where**: ``codegen.triton._pad_transform`` (read by name where a value's fact is made and
  where a load's fill is chosen).
- **Probe**: the live ``_pad_transform`` asked for the reciprocal, log and rsqrt of the pad
  value 0: is any of them called finite?
- **Fix**: an op the lattice does not model keeps its answer only where it maps every finite
  value to a finite one (sine, tanh, comparisons, rounding, ...); anything else is unknown, so
  the select of a sum through it stays (and no load fill is chosen for it). The lattice's
  constants are taken as float32 holds them, as the device computes: ``exp(100)`` is inf there,
  not 2.7e43, so 0 times it is not taken for 0; a NaN result is unknown.
"""

from __future__ import annotations

import math
import struct
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "_pad_transform"
#: The ops ``_pad_transform`` models itself (checked against each state's code).
MODELLED = frozenset({
    "constant", "add", "sub", "mul", "maximum", "minimum", "exp", "where", "to_dtype",
    "to_dtype_bitcast", "identity", "broadcast", "constant_to_device", "neg", "abs",
})
#: Ops whose value is finite for every finite operand: the lattice's default stands for them.
FINITE_TO_FINITE = frozenset({
    "sin", "cos", "tanh", "sigmoid", "erf", "erfc", "atan", "atan2", "relu", "floor", "ceil",
    "round", "trunc", "sign", "signbit", "floor_to_int", "ceil_to_int", "trunc_to_int",
    "round_to_int", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_and",
    "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not",
})
PROBED = ("reciprocal", "log", "rsqrt")


def _finite(fact: Any, finite: Any) -> bool:
    """Whether ``fact`` says finite: the lattice's ``finite`` fact or a finite constant."""
    return fact == finite or _constant(fact) and math.isfinite(fact[1])


def _constant(fact: Any) -> bool:
    return isinstance(fact, tuple) and len(fact) == 2


def _float32(fact: Any) -> Any:
    """A constant fact's value as float32 holds it (1e48 is inf); any other fact as it is."""
    if not _constant(fact):
        return fact
    try:
        return (fact[0], struct.unpack("f", struct.pack("f", fact[1]))[0])
    except OverflowError:  # past float32's range: an infinity there
        return (fact[0], math.copysign(math.inf, fact[1]))


def transformed(name: str, facts: list[Any], lattice: Callable[[str, list[Any]], Any], unknown: Any) -> Any:
    """The pad-lane fact of op ``name`` on operand ``facts``: ``lattice``'s own for the ops it
    models and those finite for finite operands, its constants taken and given as float32
    holds them (the device computes in float32; a NaN result is unknown), else ``unknown``."""
    if name not in MODELLED and name not in FINITE_TO_FINITE:
        return unknown
    fact = _float32(lattice(name, [_float32(f) for f in facts]))
    return unknown if _constant(fact) and math.isnan(fact[1]) else fact


def probe(module: types.ModuleType) -> Probe:
    """The live lattice asked for :data:`PROBED` ops of the pad value 0."""
    lattice, fin = getattr(module, TARGET), module._PAD_FIN
    finite = ", ".join(f"{name}(0)" for name in PROBED if _finite(lattice(name, [("c", 0.0)]), fin))
    if finite:
        return Probe(True, f"{finite} called finite on a reduction's pad lanes: "
                           "0 * inf is taken for 0 and the mask dropped")
    return Probe(False, f"{', '.join(f'{name}(0)' for name in PROBED)} not called finite on pad lanes")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    unknown = module._PAD_TOP

    def transform(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) != 2 or kwargs:
            return wrapped(*args, **kwargs)
        return transformed(args[0], list(args[1]), wrapped, unknown)

    patcher.wrap_path(module, TARGET, transform)


FIX = Fix(
    name="pad-lane-nonfinite",
    about=About(
        symptom=(
            "a looped sum of a product with a reciprocal, log or rsqrt (`(g * x.reciprocal()).sum()`, "
            "`(p * p.log()).sum(-1)`, the gradient of `1 / x * c` for a scalar `c`) comes back NaN when the "
            "reduced length is not a multiple of the block: masked lanes add 0 * inf"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=(
            "set `torch_npu._inductor.triton_experimental.codegen.triton.npu_elide_reduction_where = False` "
            "before compiling (every reduction keeps its mask)"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("name", "arg_facts")},
)
