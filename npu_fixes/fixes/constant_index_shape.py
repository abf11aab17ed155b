"""constant-index-shape: a constant load/store index is rank-one in linearize mode.

- **Defect**: PyTorch 2.13's ``TritonKernel.indexing`` gives a constant index in a rank-N
  kernel an all-singleton shape (``tl.full([1, 1], 0, ...)``, expand ``[1, 1]``). The
  linearize post-pass of ``NPUTritonKernel.indexing`` only reshapes the ``[XBLOCK]`` form
  older PyTorch produced, and never the CSE shape (``expand_shape``), so a scalar read by
  constant index keeps ``[1, 1]`` (``tmp2 = tl.broadcast_to(tmp1, [1, 1])``). In a
  linearized reduction whose tile is rank one, ``scalar + [R0_BLOCK]`` becomes ``[1,
  R0_BLOCK]`` and the kernel build fails: ``Cannot broadcast, rank mismatch`` (generated
  on CPU at 8bfbb9ed1: ``(x + x[3]).sum()``).
- **Where**: ``codegen.triton.NPUTritonKernel.indexing``.
- **Probe**: does the linearized ``indexing`` keep the shape ``[1, 1]`` / ``(1, 1)`` that the
  base indexing gives a constant index ``0``? (a stand-in kernel whose base indexing returns
  exactly that).
- **Fix**: the method runs unchanged; when it took its linearize branch (linearize on, an
  ``IndexingOptions`` result, no ``override_mask``) and :func:`rank_one` accepts the call,
  the result's emitted shape becomes ``[1]`` and its CSE shape ``(1,)``; index text and
  masks are kept. An explicit ``copy_shape`` is left alone.
- **Not repaired**: an integer-like index that is not a sympy ``Integer`` (``Identity(3)``)
  under a load mask. The pre-fix post-pass decides its load-mask broadcast by
  ``isinstance(index, sympy.Integer)`` and may broadcast such an index to the dense
  shape, which the fixed release does not; that happens inside the method, and the
  repair leaves these results as they are (a rank-one shape would contradict a
  broadcast index).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import code_globals, scoped_method
from .shared.linearize import linearized

TARGET = "NPUTritonKernel.indexing"
RANK_ONE = ("[1]", (1,))  # emitted shape, CSE shape


def integer_like(index: Any) -> bool:
    """A sympy ``Integer``, or an integer sympy expression without free symbols."""
    import sympy

    if not isinstance(index, sympy.Expr):
        return False
    return isinstance(index, sympy.Integer) or bool(index.is_integer and not index.free_symbols)


def rank_one(index: Any, copy_shape: Any, has_load_mask: bool) -> bool:
    """Whether a linearized constant index gets the rank-one shape :data:`RANK_ONE`.

    Only integer-like indexes without an explicit ``copy_shape`` do. An integer-like index
    that is not a sympy ``Integer`` under a load mask does not: the pre-fix code may have
    broadcast it to the dense shape already (see "Not repaired" above).
    """
    import sympy

    if copy_shape is not None or not integer_like(index):
        return False
    return isinstance(index, sympy.Integer) or not has_load_mask


def _bind(instance: Any, args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``(kernel, index)`` of one ``indexing`` call, bound or through the class (its
    other parameters are keyword-only)."""
    if instance is None:  # called through the class with the kernel first
        instance, args = args[0], args[1:]
    return instance, (args[0] if args else kwargs["index"])


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def indexing(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        kernel, index = _bind(instance, args, kwargs)
        namespace = code_globals(wrapped, vars(module))
        options_cls = namespace.get("IndexingOptions")
        if options_cls is None or not isinstance(result, options_cls) or kwargs.get("override_mask"):
            return result
        if not linearized(kernel, namespace):
            return result
        if not rank_one(index, kwargs.get("copy_shape"), getattr(kernel, "_load_mask", None) is not None):
            return result
        if (result.expand_str, result.expand_shape) == RANK_ONE:
            return result
        return dataclasses.replace(result, expand_str=RANK_ONE[0], expand_shape=RANK_ONE[1])

    patcher.wrap_path(module, TARGET, indexing)


# -- probe -------------------------------------------------------------------------------
def base_result() -> Any:
    """What PyTorch 2.13's ``TritonKernel.indexing`` gives the constant index 0 in a
    two-slot kernel (an x and a reduction tree, no copy_shape, no load mask)."""
    import sympy
    from torch._inductor.codegen.triton import IndexingOptions
    from torch.utils._ordered_set import OrderedSet

    return IndexingOptions("tl.full([1, 1], 0, tl.int32)", OrderedSet(), "[1, 1]", False,
                           sympy.Integer(0), expand_shape=(1, 1))


def standin_kernel(module: types.ModuleType, base: Any) -> Any:
    """A kernel of a probe-local subclass whose base ``indexing`` (the ``super()`` that
    ``NPUTritonKernel.indexing`` calls) returns ``base``; no range trees, no load mask."""
    from torch._inductor.codegen.triton import TritonKernel

    class _CannedBase(TritonKernel):
        def indexing(self, index: Any, **kwargs: Any) -> Any:
            return base

    class _ProbeKernel(module.NPUTritonKernel, _CannedBase):  # MRO: NPU, canned, Triton
        def filter_masks(self, mask_vars: Any) -> None:
            pass

    kernel = object.__new__(_ProbeKernel)
    kernel.range_trees, kernel._load_mask, kernel._npu_linearize = [], None, True
    return kernel


def probe(module: types.ModuleType) -> Probe:
    """Run the live ``indexing`` (linearize on) for the constant index 0 over a base
    result shaped ``[1, 1]`` / ``(1, 1)`` and look at the shapes it hands on."""
    import sympy

    kernel = standin_kernel(module, base_result())
    indexing = scoped_method(module.NPUTritonKernel, "indexing",
                             kernel, {"triton_codegen_linearize": True})
    result = indexing(sympy.Integer(0))
    shapes = (getattr(result, "expand_str", None), tuple(getattr(result, "expand_shape", None) or ()))
    if shapes != RANK_ONE:
        return Probe(True, f"constant index 0 keeps shape {shapes[0]} / {shapes[1]} in linearize mode")
    return Probe(False, "constant index 0 gets shape [1] / (1,) in linearize mode")


FIX = Fix(
    name="constant-index-shape",
    about=About(
        symptom=(
            "kernel build fails: `Cannot broadcast, rank mismatch` (a scalar read by a constant index in a "
            "linearized reduction, e.g. `(x + x[3]).sum()`)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a"}),
        fixed_in="5ff81d9c5",
        workaround="none known: upgrade torch_npu",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    # no signature pin: later releases add ``**kwargs`` to ``indexing``; the wrapper reads
    # only ``index`` and the keyword-only ``copy_shape`` / ``override_mask``
)
