"""alias-size-args: a size a reduction index alias names is missing from the kernel's signature.

- **Defect**: the published wheels write the definition of each reduction index a range-tree
  fold replaced (an alias: ``r0_2 = r0_0 + r0_1*ks1*ks1``) while ``codegen_kernel`` runs the
  body's last rewrites, after it has taken the kernel's arguments for its ``def`` line and
  signature. Printing the alias registers a size its address had not needed (here ``s10``,
  as ``ks1``, where the address used only ``ps0 = s10*s10``): the wrapper's call passes that
  size, the compiled kernel does not take it, and the launch stops with ``TypeError:
  launcher() got multiple values for argument 'stream'`` (OpInfo ``masked.std``/``masked.var``
  backward under ``dynamic=True``).
- **Where**: ``codegen.triton.NPUTritonKernel.codegen_kernel`` (the aliases:
  ``_npu_reduction_index_alias_plans``).
- **Probe**: the live ``codegen_kernel`` on a CPU kernel with one alias over a size symbol
  the kernel has not registered: is that size among the kernel's arguments when it takes
  them for the signature? (the call stops there).
- **Fix**: before ``codegen_kernel``, each alias's expression is printed once as the body's
  rewrite prints it (``index_to_str``), which registers its sizes: the signature takes them.
  Kernels without aliases are generated unchanged.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import NOT_FIXED, WHEELS, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_reduction_kernel

TARGET = "NPUTritonKernel.codegen_kernel"
PLANS = "_npu_reduction_index_alias_plans"


class _Signature(Exception):
    """Stops the probe's ``codegen_kernel`` where it takes the kernel's arguments."""


def register_alias_sizes(kernel: Any) -> None:
    """Print every reduction index alias of ``kernel`` as its body's rewrite will."""
    for aliases in (getattr(kernel, PLANS, None) or {}).values():
        for alias in aliases:
            kernel.index_to_str(alias.expr)


def probe(module: types.ModuleType) -> Probe:
    """``codegen_kernel`` of a CPU reduction kernel whose one alias names ``s7``, stopped
    where it takes the kernel's arguments: is ``s7`` among them?"""
    import sympy

    size = sympy.Symbol("s7", integer=True, positive=True)
    with cpu_reduction_kernel(module) as kernel:
        if not isinstance(getattr(kernel, PLANS, None), dict):
            return Probe(False, "the kernel keeps no reduction index aliases")
        low, high = (sympy.Symbol(n, integer=True, nonnegative=True) for n in ("r0_0", "r0_1"))
        alias = types.SimpleNamespace(name="r0_2", expr=low + high * size, dependencies=("r0_0", "r0_1"))
        kernel._npu_reduction_index_alias_plans = {"r0_": (alias,)}
        seen: list[bool] = []

        def python_argdefs() -> Any:
            seen.append(size in kernel.args.sizevars)
            raise _Signature

        kernel.args.python_argdefs = python_argdefs
        kernel._npu_linearize = False  # this stand-in's trees give no block hints
        try:
            kernel.codegen_kernel()
        except _Signature:
            pass
    if seen == [False]:
        return Probe(True, "the kernel's arguments are taken before its alias r0_2 = r0_0 + r0_1*s7 "
                           "registers s7: the call passes a size the kernel does not take")
    return Probe(False, f"the alias's size is among the kernel's arguments when they are taken ({seen})")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def with_alias_sizes(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        register_alias_sizes(instance)
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, with_alias_sizes)


FIX = Fix(
    name="alias-size-args",
    about=About(
        symptom=(
            "`TypeError: launcher() got multiple values for argument 'stream'` under `dynamic=True` "
            "(`torch.masked` std/var backward): a size a reduction index alias names is passed to a kernel "
            "that does not take it"
        ),
        present=frozenset(WHEELS),
        fixed_in=NOT_FIXED,
        workaround="compile with `dynamic=False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
