"""modular-fold-bound: a modulo or division the backend takes for a no-op is dropped, and the
kernel reads the wrong elements (or past its input).

- **Defect**: ``_fold_trivial_modular_indexing`` drops ``ModularIndexing(base, 1, m)`` (and
  turns ``FloorDiv(base, d)`` into 0) where ``base`` at every loop variable's last value is
  below ``m``. That is the largest value of ``base`` only where ``base`` grows with each
  variable; a ``base`` holding a modulo does not:
  ``x.reshape(6, 3).t().reshape(2, 9).t().reshape(2, 9).sum(0)`` indexes its input with
  ``3*((x0//2 + 9*(x0 % 2)) % 6) + (x0//2 + 9*(x0 % 2))//6``; at ``x0 = 8`` the base is 4, below
  6, so both are folded away though the base reaches 13: ``3*(x0//2) + 27*(x0 % 2)``, which
  reads past the 18 elements. The published wheels' method is the same (the probe's index is
  folded wrongly there too), though that program compiles right there: no program seen here
  reaches it at the wheels.
- **Where**: ``codegen.triton.NPUTritonKernel._fold_trivial_modular_indexing``.
- **Probe**: the live method on that index in a CPU kernel with ``x0`` in ``[0, 9)``: does the
  result differ from the index at some ``x0``?
- **Fix**: before the method runs, each modulo or division whose base does not grow with every
  loop variable (it holds a modulo, or a negative coefficient) and whose base Inductor's value
  ranges cannot bound below the modulus or divisor is hidden from it, and put back after.
  Bases that grow with each variable are left to the method, whose test is right for them.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernel._fold_trivial_modular_indexing"


def grows(expr: Any, loop_vars: set) -> bool:
    """Whether ``expr`` does not decrease as any of ``loop_vars`` (non-negative) grows: sums and
    products of such terms with positive constants, sizes, and floor divisions by sizes."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv

    if not expr.free_symbols & loop_vars:
        return not (expr.is_Number and expr < 0)
    if isinstance(expr, sympy.Symbol):
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(grows(arg, loop_vars) for arg in expr.args)
    if isinstance(expr, FloorDiv):
        return grows(expr.args[0], loop_vars) and not expr.args[1].free_symbols & loop_vars
    return False


def bounded_below(base: Any, limit: Any, var_ranges: Mapping[Any, Any]) -> bool:
    """Whether Inductor's value ranges prove ``base < limit`` for loop variables in their
    ranges (``[0, length)``, lengths known at compile time)."""
    import sympy
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    lengths = {v: var_ranges[v] for v in base.free_symbols if v in var_ranges}
    if not all(isinstance(length, (int, sympy.Integer)) for length in lengths.values()):
        return False  # a length known only at run time: no bound proven here
    ranges = {v: ValueRanges(0, length - 1) for v, length in lengths.items()}
    try:
        upper = bound_sympy(base, ranges).upper
        return bool(sympy.Lt(upper, limit))
    except (TypeError, ValueError):  # an upper bound sympy cannot compare with the limit
        return False


def unsafe_atoms(index: Any, var_ranges: Mapping[Any, Any]) -> list[Any]:
    """The modulos (divisor 1) and divisions of ``index`` whose base neither grows with every
    loop variable nor is bounded below the modulus or divisor."""
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    loop_vars = set(var_ranges)
    unsafe = []
    for atom in index.atoms(ModularIndexing, FloorDiv):
        base, limit = (atom.args[0], atom.args[2]) if isinstance(atom, ModularIndexing) else atom.args
        if isinstance(atom, ModularIndexing) and atom.args[1] != 1:
            continue
        if not grows(base, loop_vars) and not bounded_below(base, limit, var_ranges):
            unsafe.append(atom)
    return unsafe


def fold_safely(fold: Callable[[Any], Any], kernel: Any, index: Any) -> Any:
    """``fold(index)`` with the :func:`unsafe_atoms` of ``index`` hidden from it behind fresh
    symbols, put back after."""
    import sympy

    unsafe = unsafe_atoms(index, kernel.var_ranges()) if isinstance(index, sympy.Basic) else []
    if not unsafe:
        return fold(index)
    # the outermost first: an inner atom hidden first would change the outer one's text
    unsafe.sort(key=lambda atom: -sympy.count_ops(atom))
    hidden = {atom: sympy.Dummy(f"npu_fixes_hidden{i}", integer=True, nonnegative=True)
              for i, atom in enumerate(unsafe)}
    masked = index.xreplace(hidden)
    return fold(masked).xreplace({symbol: atom for atom, symbol in hidden.items()})


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def fold(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if len(args) != 1 or kwargs:
            return wrapped(*args, **kwargs)
        return fold_safely(wrapped, instance, args[0])

    patcher.wrap_path(module, TARGET, fold)


def probe_index(x0: Any) -> Any:
    """The input index of ``x.reshape(6, 3).t().reshape(2, 9).t().reshape(2, 9).sum(0)``'s
    first row, over ``x0`` in ``[0, 9)``."""
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    base = FloorDiv(x0, 2) + 9 * ModularIndexing(x0, 1, 2)
    return FloorDiv(base, 6) + 3 * ModularIndexing(base, 1, 6)


def probe(module: types.ModuleType) -> Probe:
    with cpu_kernel(module, 9) as (kernel, x0):
        index = probe_index(x0)
        folded = kernel._fold_trivial_modular_indexing(index)
        values = [(int(index.subs(x0, i)), int(folded.subs(x0, i))) for i in range(9)]
    wrong = [i for i, (want, got) in enumerate(values) if want != got]
    if wrong:
        want, got = values[wrong[0]]
        return Probe(True, f"{index} is folded to {folded}: at x0 = {wrong[0]} it reads element {got}, "
                           f"not {want}")
    return Probe(False, f"the fold keeps {index} equal at every x0 in [0, 9) ({folded})")


FIX = Fix(
    name="modular-fold-bound",
    about=About(
        symptom="a chain of reshapes and transposes reads the wrong elements or past its input "
                "(`x.reshape(6, 3).t().reshape(2, 9).t().reshape(2, 9).sum(0)`), with no error",
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="none known",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
