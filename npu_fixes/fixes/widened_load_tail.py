"""widened-load-tail: the widened loads of strided slices and selects read past their buffer.

- **Defect**: to read a strided run in one contiguous burst, the backend's codegen widens a
  load and keeps the lanes it needs with ``extract_slice``, in two forms, each measured from
  the selected element rather than from the row's start:

  - a load at stride k (``x[:, 1::2]``, RoPE's odd lanes, ``grid[..., 1]``): k times as many
    lanes from the first selected element, masked by ``k*offset + lane < k*numel``, so on the
    last block up to k-1 lanes past the last selected element;
  - a select of element c of rows of K (``x[:, 1:2] * y``): K lanes from element c, masked by
    the row only, so the last row's lanes reach c elements past it.

  Past the buffer's end (``grid_sample``): a load outside every buffer in Triton's
  interpreter; a device reads whatever lies there.
- **Where**: ``codegen.triton.NPUTritonKernel._emit_strided_slice_extract`` (the lines it
  returns; its parameters differ between states) and ``._maybe_rewrite_select_lane_load``
  (the kernel body it rewrites).
- **Probe**: the live ``_emit_strided_slice_extract`` on a CPU kernel, asked to widen
  ``tl.load(in_ptr0 + (1 + 2*x0), x0mask)`` (element 1 of rows of 2): does its mask admit,
  on the last block, a lane past the last selected element? (The select form is shown by
  the test programs, not probed.)
- **Fix**: each widened load ends at the last element it needs: the stride-k mask becomes
  ``k*offset + lane < k*numel - (k-1)``; a select of element c of rows of K also masks
  ``lane < K - c``. Only lanes that ``extract_slice`` drops are masked off, so every kept
  value and the contiguous burst stay.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.codegen_kernel import cpu_kernel

TARGET = "NPUTritonKernel._emit_strided_slice_extract"
SELECT = "NPUTritonKernel._maybe_rewrite_select_lane_load"
#: ``_es_lane0 = tl.arange(0, 2)[None, :]``: the lanes of a widened select.
_LANES = re.compile(r"^\s*(?P<lane>_es_lane\d+) = tl\.arange\(0, (?P<width>\d+)\)")
#: ``_es_smask0 = (2*x0offset + _es_slane0) < 2*x0numel``: the widened mask as emitted.
_MASK = re.compile(r"^(?P<head>\s*_es_smask\d+ = \((?P<k>\d+)\*\w+ \+ _es_slane\d+\) < )(?P<end>\d+\*\w+)$")
PROBE_LINE = "    tmp0 = tl.load(in_ptr0 + (1 + 2*x0), x0mask)"
PROBE_NUMEL, PROBE_BLOCK = 5, 4


def bounded(lines: list[str]) -> list[str]:
    """The rule for a widened stride-k load: each mask ``... < k*numel`` ends at the last selected element
    (``< k*numel - (k-1)``); any other line unchanged."""
    out = []
    for line in lines:
        match = _MASK.match(line) if isinstance(line, str) else None
        k = int(match["k"]) if match else 1
        out.append(f"{match['head']}{match['end']} - {k - 1}" if match and k > 1 else line)
    return out


def _constant(node: ast.AST) -> int | None:
    """The value of an address expression with every name (pointer, index) at 0, or None."""
    zeroed = ast.Expression(ast.fix_missing_locations(_Zeroed().visit(copy.deepcopy(node))))
    try:
        value = eval(compile(zeroed, "<address>", "eval"), {"__builtins__": {}})  # noqa: S307 - names zeroed
    except Exception:  # noqa: BLE001 - an address this rule does not read
        return None
    return value if isinstance(value, int) else None


class _Zeroed(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Constant(0), node)


def _bound_select(line: str, widths: dict[str, int]) -> str:
    """``line``, a widened select's load ``tl.load(ptr + (addr) + _es_laneN, mask, ...)``
    (``tl.load(ptr + (addr + _es_laneN), ...)`` at 8bfbb9ed1), with its lanes masked to
    ``_es_laneN < K - c`` (c: the address's constant modulo the row's K); unchanged where
    the line is not that or c is 0."""
    indent = line[: len(line) - len(line.lstrip())]
    try:
        statement = ast.parse(line.strip())
    except SyntaxError:
        return line
    calls = (n for n in ast.walk(statement) if isinstance(n, ast.Call))
    load = next((n for n in calls if ast.unparse(n.func) == "tl.load"), None)
    pointer = load.args[0] if load is not None and load.args else None
    lanes = sorted({n.id for n in ast.walk(pointer) if isinstance(n, ast.Name) and n.id in widths}) \
        if pointer is not None else []
    if len(lanes) != 1:
        return line
    lane, width = lanes[0], widths[lanes[0]]
    constant = _constant(pointer)
    if constant is None or constant % width == 0:
        return line
    bound = f"{lane} < {width - constant % width}"
    if bound in line:  # bounded by an earlier pass over the body
        return line
    if len(load.args) > 1:
        load.args[1] = ast.parse(f"({ast.unparse(load.args[1])}) & ({bound})", mode="eval").body
    else:
        load.args.append(ast.parse(bound, mode="eval").body)
    return indent + ast.unparse(statement)


def bounded_selects(lines: list[Any]) -> list[Any]:
    """The rule for a kernel body: every widened select's load ends at its row's end."""
    widths: dict[str, int] = {}
    out = []
    for line in lines:
        if isinstance(line, str):
            match = _LANES.match(line)
            if match:
                widths[match["lane"]] = int(match["width"])
            elif "_es_full" in line and widths:
                line = _bound_select(line, widths)
        out.append(line)
    return out


def _widened(module: types.ModuleType) -> list[str] | None:
    """The live method's lines for :data:`PROBE_LINE` on a CPU kernel (None: not widened).
    The method takes the load as text (pointer, address, the rest) at 8bfbb9ed1, as parsed
    ASTs and the recorded index later."""
    with cpu_kernel(module) as (kernel, x0):
        method, name = kernel._emit_strided_slice_extract, str(x0)
        geometry = (name, 0, 1, {0: name}, {name: "real_block_x0"}, "[:]", "0", 0)
        if "ptr" in inspect.signature(method).parameters:
            return method("    ", "tmp0", "in_ptr0", f"1 + 2*{name}", f"{name}mask", *geometry)
        parsed = module._npu_parse_tl_load_assignment(PROBE_LINE)
        if parsed is None:
            return None
        indent, lhs, value_ast, load_ast = parsed
        target = {"index": 1 + 2 * x0, "pointer": "in_ptr0", "lane": 2}
        return method(indent, lhs, value_ast, load_ast, target, *geometry)


def overread(lines: list[str]) -> int | None:
    """How far past the last selected element (index ``1 + 2*(numel-1)``) the widened load
    of :data:`PROBE_LINE` reads on the last block of :data:`PROBE_BLOCK` rows (None where
    the lines are not understood)."""
    mask = next((line.split(" = ", 1)[1] for line in lines if "_es_smask" in line.split(" = ", 1)[0]), None)
    load = next((line for line in lines if "tl.load(" in line), None)
    address = re.search(r"tl\.load\(in_ptr0 \+ \((?P<expr>[^,]+)\), ", load or "")
    if mask is None or address is None:
        return None
    offset = (PROBE_NUMEL - 1) // PROBE_BLOCK * PROBE_BLOCK  # the last block
    names = {"x0offset": offset, "x0numel": PROBE_NUMEL}
    read = [eval(address["expr"], {}, names | {"_es_slane0": lane})  # noqa: S307 - our probe's own text
            for lane in range(2 * PROBE_BLOCK) if eval(mask, {}, names | {"_es_slane0": lane})]  # noqa: S307
    return max(read) - (1 + 2 * (PROBE_NUMEL - 1)) if read else 0


def probe(module: types.ModuleType) -> Probe:
    """The live widening of a stride-2 load of element 1."""
    lines = _widened(module)
    past = None if lines is None else overread(lines)
    if past is None:
        return Probe(False, "the stride-2 select load is not widened as this fix knows")
    if past > 0:
        mask = next(line.strip() for line in lines if "_es_smask" in line)
        return Probe(True, f"widened mask {mask!r} admits a lane {past} element past the last selected one")
    return Probe(False, "the widened load ends at the last selected element")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def emit(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        lines = wrapped(*args, **kwargs)
        return bounded(lines) if isinstance(lines, list) else lines

    def rewrite(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        instance.body._lines = bounded_selects(instance.body._lines)
        return result

    patcher.wrap_path(module, TARGET, emit)
    patcher.wrap_path(module, SELECT, rewrite)


FIX = Fix(
    name="widened-load-tail",
    about=About(
        symptom=(
            "a strided slice or a select (`x[:, 1::2]`, `grid[..., 1]`, `x[:, 1:2] * y`, `grid_sample`) "
            "reads past its buffer on the last block or row: garbage read where nothing lies"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround="set `torch_npu._inductor.triton_experimental.config.select_extract_slice = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET, SELECT),
    probe=probe,
    install=install,
)
