"""reduction-dim-rewrite: the linearize pass rewrites the last argument of calls that are no reductions.

- **Defect**: once a kernel is linearized into more tensor slots, ``_apply_linearize``
  moves the dimension argument of reductions from the old last slot to the real one: on
  every line that holds ``tl.sum(``, ``tl.max(``, ... or ``triton_helpers.``, it replaces
  each ``, {old})`` with ``, {new})``. The replace is made on the whole line, so it also
  hits calls that are no reduction: a masked load's address clamp
  ``tl.maximum(... triton_helpers.div_floor_integer(...) ..., 0)`` becomes
  ``tl.maximum(..., 4)``, and lanes whose address is 1 to 3 load element 4. The backward of
  RoPE's interleaved rotation (``x[..., ::2]``, ``x[..., 1::2]``, ``torch.stack(...,
  -1).flatten(-2)``: a ``slice_backward`` of a stride-2 slice) comes out silently wrong
  (2.2 off at bafc50684 with every other fix). The code is at every state and both wheels; at
  8bfbb9ed1 the rotation is generated otherwise and is right.
- **Where**: ``codegen.triton.NPUTritonScheduling._apply_linearize``.
- **Probe**: does the live method's own code (unwrapped) hold that line-wide replace of
  ``, {old})`` on lines picked by ``triton_helpers.``, and is no layer of this fix around
  it? (Its code is about 1,000 lines over a whole kernel's state: it is read, not run.)
- **Fix**: the method runs unchanged, between two steps on the kernel's lines (body,
  compute, stores, post-loop combine and store): before it, on each line that names a
  reduction, every ``, N)`` that closes a call which is no reduction (a reduction: a
  ``tl`` reduction, or a ``triton_helpers`` function with a ``dim`` or ``axis``
  parameter) is written ``, N )``, which the replace does not match; after it, back to
  ``, N)``. Reductions' dimension arguments are rewritten as before; all other text is
  left as it was.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher

TARGET = "NPUTritonScheduling._apply_linearize"
BUFFERS = ("body", "compute", "stores", "post_loop_combine", "post_loop_store")
TL_REDUCTIONS = ("sum", "max", "min", "prod", "argmax", "argmin", "reduce", "xor_sum")
#: The tokens the method picks a line by.
LINE_TOKENS = (*(f"tl.{name}(" for name in TL_REDUCTIONS), "triton_helpers.")
_LAST_INT = re.compile(r", (\d+)\)")
_KEPT = re.compile(r", (\d+) \)")
_CALLEE = re.compile(r"[\w.]+$")


@functools.cache
def reductions() -> frozenset[str]:
    """The calls whose last integer argument is a reduction dimension: ``tl``'s reductions
    and the functions of Inductor's ``triton_helpers`` with a ``dim`` or ``axis`` parameter."""
    from torch._inductor.runtime import triton_helpers

    helpers = set()
    for name, fn in vars(triton_helpers).items():
        params = getattr(fn, "arg_names", None)
        if params is None and callable(fn):
            try:
                params = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                params = []
        if params and {"dim", "axis"} & set(params):
            helpers.add(f"triton_helpers.{name}")
    return frozenset({*(f"tl.{name}" for name in TL_REDUCTIONS), *helpers})


def callee(line: str, close: int) -> str:
    """The name called by the call whose closing parenthesis is ``line[close]``."""
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(line[i], 0)
        if depth == 0:
            found = _CALLEE.search(line[:i])
            return found.group(0) if found else ""
    return ""


def kept(line: str, reduction_calls: frozenset[str]) -> str:
    """``line`` with each ``, N)`` that closes a call which is no reduction written ``, N )``."""
    if not any(token in line for token in LINE_TOKENS):
        return line
    pieces, start = [], 0
    for match in _LAST_INT.finditer(line):
        close = match.end() - 1
        if callee(line, close) not in reduction_calls:
            pieces.append(line[start:close] + " ")
            start = close
    return "".join(pieces) + line[start:] if pieces else line


def restored(line: str) -> str:
    return _KEPT.sub(r", \1)", line)


def rewrite_lines(kernel: Any, rewrite: Callable[[str], str]) -> None:
    """Apply ``rewrite`` to each line (a string, or an object with a string ``line``) of the
    kernel's buffers that the method rewrites."""
    for name in BUFFERS:
        lines = getattr(getattr(kernel, name, None), "_lines", None) or []
        for i, entry in enumerate(lines):
            if isinstance(entry, str):
                lines[i] = rewrite(entry)
            elif isinstance(getattr(entry, "line", None), str):
                entry.line = rewrite(entry.line)


def _protecting(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    kernel = args[0] if args else kwargs.get("kernel")
    if kernel is None:
        return wrapped(*args, **kwargs)
    calls = reductions()
    rewrite_lines(kernel, lambda line: kept(line, calls))
    try:
        return wrapped(*args, **kwargs)
    finally:
        rewrite_lines(kernel, restored)


def line_wide_replace(method: Any) -> bool:
    """Whether ``method``'s code replaces ``, {old})`` by ``, {new})`` (f-strings) on lines it
    picks by the token ``triton_helpers.``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(method))))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        tokens = {c.value for c in ast.walk(node.test) if isinstance(c, ast.Constant)}
        if "triton_helpers." not in tokens:
            continue
        for call in ast.walk(node):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "replace" and len(call.args) == 2
                    and all(isinstance(a, ast.JoinedStr) for a in call.args)
                    and ast.unparse(call.args[0]).startswith("f', {")):
                return True
    return False


def layered(module: types.ModuleType) -> bool:
    """Whether a layer of this fix stands around the live method."""
    method = inspect.getattr_static(module.NPUTritonScheduling, TARGET.split(".")[1])
    while method is not None:
        if getattr(method, "_self_wrapper", None) is _protecting:
            return True
        method = getattr(method, "__wrapped__", None)
    return False


def probe(module: types.ModuleType) -> Probe:
    if not line_wide_replace(module.NPUTritonScheduling._apply_linearize):
        return Probe(False, "the linearize pass rewrites no reduction dimension on whole lines")
    if layered(module):
        return Probe(False, "the linearize pass's dimension rewrite runs with non-reduction calls kept")
    return Probe(True, "the linearize pass replaces ', {old})' on every line naming triton_helpers.: a "
                       "clamp tl.maximum(addr, 0) of a load's address becomes tl.maximum(addr, <slot>)")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, _protecting)


FIX = Fix(
    name="reduction-dim-rewrite",
    about=About(
        symptom=(
            "silently wrong gradients of RoPE's interleaved rotation (`x[..., ::2]`, `x[..., 1::2]`, "
            "`torch.stack(..., -1).flatten(-2)`): the linearize pass turns a load's address clamp "
            "`tl.maximum(addr, 0)` into `tl.maximum(addr, 4)`"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="rotate halves (`x[..., :d]`, `x[..., d:]`) instead of interleaved pairs",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("kernel", "node_schedule")},
)
