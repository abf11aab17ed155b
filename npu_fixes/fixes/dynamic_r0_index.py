"""dynamic-r0-index: a reduction over sizes known only at run time stops the compile with
``NameError: name 'r0_index' is not defined``.

- **Defect**: ``rtree_real_block`` (on by default) replaces a reduction tree's flat loop by
  loops over its nodes and deletes ``r0_index``; it drops each node's definition from
  ``r0_index`` (``r0_1 = r0_index // 152``) by its text, `` // `` or `` % ``. With dynamic
  shapes Inductor prints that division as ``triton_helpers.div_floor_integer(r0_index, ks0)``
  (a modulo as ``triton_helpers.remainder_integer``), which the test misses: the line stays,
  overwrites the node's loop index and reads the deleted ``r0_index`` (a view reshaped to
  sizes passed as arguments, then ``mean``, under ``dynamic=True``).
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines``.
- **Probe**: the live function on a dynamic promoted body holding a node's definition in
  each form: does it drop ``r0_1 = r0_index // ks0`` and keep the ``div_floor_integer``
  one? (The wheels' function refuses a body without the kernel's records of its reduction
  loops, from which it writes the definitions itself: not defective.)
- **Fix**: before the function runs, a body line that defines a node of the tree as
  ``div_floor_integer``/``remainder_integer`` of ``r0_index`` and a size is written with
  `` // ``/`` % `` (the same value: the index and the sizes are not negative), so the
  function drops it as it drops the static form.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.promoted import TARGET, definitions_from_passes, looped_sum, rewrite_body, two_node_lines

#: Inductor's printing of a floor division and a modulo whose signs it cannot prove.
_OPERATORS = {"div_floor_integer": "//", "remainder_integer": "%"}


def plain_definition(line: str, prefix: str) -> str | None:
    """``line`` written with ``//``/``%`` where it defines a node of tree ``prefix`` as
    ``triton_helpers.div_floor_integer(<prefix>index, K)`` (or ``remainder_integer``); None
    for any other line."""
    pattern = (rf"(\s*)({re.escape(prefix)}\d+) = triton_helpers\.(div_floor_integer|remainder_integer)"
               rf"\(({re.escape(prefix)}index),\s*(\w+)\)\s*")
    match = re.fullmatch(pattern, line)
    if match is None:
        return None
    indent, node, helper, index, size = match.groups()
    return f"{indent}{node} = {index} {_OPERATORS[helper]} {size}"


def install(module: types.ModuleType, patcher: Patcher) -> None:
    signature = inspect.signature(getattr(module, TARGET))

    def apply_lines(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        bound = signature.bind(*args, **kwargs).arguments
        rewrite_body(bound["kernel"], lambda line: plain_definition(line, bound["prefix"]))
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, apply_lines)


def _kept(module: types.ModuleType, definition: str) -> bool:
    """Does the live function keep ``definition`` in a dynamic promoted body of two nodes?"""
    body = looped_sum("tmp1", [definition, "tmp0 = tl.load(in_ptr0 + (r0_0 + ks0*r0_1), r0_mask, other=0.0)",
                               "_tmp1 = _tmp1 + tmp0"])
    lines = two_node_lines(module, body, dynamic=True)
    return any(line.strip() == definition for line in lines)


def probe(module: types.ModuleType) -> Probe:
    printed = "r0_1 = triton_helpers.div_floor_integer(r0_index,  ks0)"
    if definitions_from_passes(module):  # the wheels: the loop is rebuilt from the kernel's own records
        return Probe(False, "the promoted rewrite writes the nodes' definitions from the kernel's reduction "
                            "passes, not from the body's text")
    if _kept(module, "r0_1 = r0_index // ks0"):
        return Probe(False, "the promoted rewrite leaves a node's definition from r0_index to earlier passes")
    if _kept(module, printed):
        return Probe(True, f"the promoted rewrite drops `r0_1 = r0_index // ks0` but keeps `{printed}`, "
                           "which reads the r0_index it deletes (NameError when the kernel is compiled; "
                           "workaround: dynamic=False)")
    return Probe(False, f"the promoted rewrite drops a node's definition in both forms (`{printed}`)")


FIX = Fix(
    name="dynamic-r0-index",
    about=About(
        symptom="a reduction over sizes known only at run time (`dynamic=True`) stops the compile: "
                "`NameError: name 'r0_index' is not defined`",
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="compile with `dynamic=False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
