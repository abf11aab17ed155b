"""rsplit-bare-store: a split sum's partial kernel stores into the output, not its workspace row.

- **Defect**: the cross-core r-axis split turns a kernel into a partial stage by rewriting
  its source; one step redirects the result's store from the output to the core's workspace
  row, by the text ``tl.store(out_ptr0 + (``. A promoted reduction tree writes its store
  without those parentheses (``tl.store(out_ptr0 + tl.full([1, 1, 1], 0,
  tl.int32).broadcast_to(1, 1, XBLOCK), ...)``), which a sum under ``dynamic=True`` gets at
  the wheels: then every core stores its partial to the output, the workspace stays
  unwritten, and the combine kernel adds whatever it held. The token count of causal-LM
  training, ``(labels[..., 1:] != -100).sum()`` over 8 x 4096 compiled with
  ``dynamic=True``, came out as garbage (a negative number, or 3e10 for 22958), with no error.
- **Where**: ``codegen.triton.NPUTritonKernel._npu_rewrite_rsplit_partial_body``.
- **Probe**: does the live rewrite leave a partial kernel's store
  ``tl.store(out_ptr0 + tl.full(...).broadcast_to(...), ...)`` aimed at the output?
- **Fix**: before the rewrite, each store whose address is ``pointer + expression`` with the
  expression not in parentheses gets them (the same address), so the rewrite's own step
  redirects it to the workspace, in the form each state writes. Everything else is left to
  the wrapped method.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import partial_rewrite

TARGET = "NPUTritonKernel._npu_rewrite_rsplit_partial_body"
#: The partial stage of a full sum whose reduction tree was promoted, before the rewrite:
#: the header's slice bounds, the core's loop, the store as the promoted tree writes it.
PROBE_SOURCE = """\
def triton_unk_fused_sum_0(in_ptr0, out_ptr0, ws_ptr, xnumel, r0_numel, XBLOCK, R0_BLOCK):
    total_thread = 40
    group_id = tl.program_id(0)
    rsplit_nsplit = total_thread
    rsplit_id = group_id
    r0_0_per_core = (r0_numel + rsplit_nsplit - 1) // rsplit_nsplit
    r0_0_lo = rsplit_id * r0_0_per_core
    r0_0_hi = tl.minimum(r0_0_lo + r0_0_per_core, r0_numel)
    for i in range(group_size):
        _tmp2 = tl.full([R0_BLOCK, 1], 0, tl.float32)
        for r0_0inner in range(r0_0_lo, r0_0_hi, R0_BLOCK):
            r0_0 = r0_0inner + tl.arange(0, R0_BLOCK)[:, None]
            r0_0mask = r0_0 < r0_0_hi
            tmp0 = tl.load(in_ptr0 + (r0_0), r0_0mask, other=0.0)
            _tmp2 = _tmp2 + tmp0
        tmp2 = tl.sum(_tmp2, 0)[None, :]
        tl.store(out_ptr0 + tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1), tmp2, None)
"""


def parenthesized(line: str) -> str:
    """``line`` with the address of its ``tl.store(pointer + expression, ...)`` in parentheses
    where the expression is not already; any other line as it is."""
    stripped = line.lstrip()
    if not stripped.startswith("tl.store("):
        return line
    try:
        call = ast.parse(stripped).body[0].value  # type: ignore[attr-defined]
    except (SyntaxError, IndexError, AttributeError):
        return line
    address = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if not (isinstance(address, ast.BinOp) and isinstance(address.op, ast.Add)
            and isinstance(address.left, ast.Name)):
        return line
    right = address.right
    text = ast.get_source_segment(stripped, right)
    if text is None or stripped[: right.col_offset].endswith("("):
        return line
    indent = line[: len(line) - len(stripped)]
    return f"{indent}{stripped[:right.col_offset]}({text}){stripped[right.end_col_offset:]}"


def with_store_addresses_parenthesized(src: str) -> str:
    return "\n".join(parenthesized(line) for line in src.split("\n"))


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def partial_body(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        if args and isinstance(args[0], str):
            args = (with_store_addresses_parenthesized(args[0]), *args[1:])
        return wrapped(*args, **kwargs)

    patcher.wrap_path(module, TARGET, partial_body)


def probe(module: types.ModuleType) -> Probe:
    """Run the live rewrite on :data:`PROBE_SOURCE`: is its store still aimed at the output?"""
    src = partial_rewrite(module, PROBE_SOURCE)
    store = next((line.strip() for line in src.splitlines() if "tl.store(" in line), "no store")
    if "tl.store(out_ptr0 " in store:
        return Probe(True, f"the partial stage of a promoted split sum keeps its store on the output: "
                           f"{store} (the workspace stays unwritten)")
    return Probe(False, f"the partial stage of a promoted split sum stores to its workspace: {store}")


FIX = Fix(
    name="rsplit-bare-store",
    about=About(
        symptom=(
            "silently wrong split sums under `dynamic=True` at the wheels: the token count "
            "`(labels[..., 1:] != -100).sum()` over 8 x 4096 comes out as garbage (each core stores its "
            "partial to the output; the combine adds an unwritten workspace)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=(
            "`torch_npu._inductor.triton_experimental.config.rsplit_outer = False` for OUTER sums; "
            "compile without `dynamic=True`"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
