"""rsplit-slice-tail: a split reduction whose mask was dropped reads past each core's slice.

- **Defect**: the cross-core r-axis split gives each of the 40 cores the slice
  ``[lo, hi)`` of ``per_core = ceil(r0_numel / 40)`` elements and walks it in blocks of
  ``R0_BLOCK``. Inductor drops the reduction mask when ``r0_numel`` is a multiple of the
  largest block (``r0_mask = tl.full(..., True)``, loads unmasked), which holds for the
  whole range but not for a slice: ``per_core`` is not a multiple of ``R0_BLOCK``, so the
  last block of every slice runs on into the next core's slice (those elements are added
  twice) and the last core's past the end of the buffer. ``x.sum()`` of 2^20 ones gives
  1064960. Every full or OUTER sum whose reduction length is a multiple of 65536 is hit
  (``mean`` too): a loss or a gradient norm over 2^16 or more elements.
- **Where**: ``codegen.triton.NPUTritonKernel._npu_rewrite_rsplit_partial_body``, which
  turns the kernel's source into the partial stage (loop over the core's slice, mask
  ``< hi``, store to the workspace) and finds no mask to bound.
- **Probe**: does the rewrite leave a partial kernel (an unmasked loop over a slice of
  ``ceil(65536 / 40)``) as it is?
- **Fix**: after the rewrite, where the split axis's mask is the constant one, the slice
  length is rounded up to a multiple of the loop's block: ``per_core = (ceil(n / 40) +
  R0_BLOCK - 1) // R0_BLOCK * R0_BLOCK``. Every block then lies inside one slice, and the
  last slice ends at ``r0_numel``, which that block divides (the condition under which
  Inductor dropped the mask). Cores past the end get an empty slice and contribute the
  reduction's initial value, as with a masked tail. Kernels with a mask are left as they
  are.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import EVERYWHERE, NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.rsplit import partial_rewrite

TARGET = "NPUTritonKernel._npu_rewrite_rsplit_partial_body"
#: ``r0__per_core = (r0_numel + rsplit_nsplit - 1) // rsplit_nsplit`` (8bfbb9ed1: ``total_thread``)
_PER_CORE = re.compile(r"^(?P<indent>\s*)(?P<base>\w+)_per_core = \((?P<numel>\w+) \+ (?P<cores>\w+) - 1\) "
                       r"// (?P=cores)$", re.MULTILINE)

#: A partial kernel as the backend writes it for ``torch.ones(65536).sum()`` before the
#: rewrite: the header's slice bounds, then Inductor's loop with the mask dropped.
PROBE_SOURCE = """\
def triton_unk_fused_sum_0(in_ptr0, out_ptr0, ws_ptr, xnumel, r0_numel, XBLOCK, R0_BLOCK):
    total_thread = 40
    group_id = tl.program_id(0)
    xnumel = 1
    r0_numel = 65536
    group_base = 0
    group_size = 1
    rsplit_nsplit = total_thread
    rsplit_id = group_id
    r0__per_core = (r0_numel + rsplit_nsplit - 1) // rsplit_nsplit
    r0__lo = rsplit_id * r0__per_core
    r0__hi = tl.minimum(r0__lo + r0__per_core, r0_numel)
    for i in range(group_size):
        r0_base = tl.arange(0, R0_BLOCK)[:, None]
        _tmp2 = tl.full([R0_BLOCK, 1], 0, tl.float32)
        for r0_offset in range(0, r0_numel, R0_BLOCK):
            r0_index = r0_offset + r0_base
            r0_mask = tl.full([R0_BLOCK], True, tl.int1)[:, None]
            r0_0 = r0_index
            tmp0 = tl.load(in_ptr0 + (r0_0), None, eviction_policy='evict_first')
            tmp1 = tl.broadcast_to(tmp0, [R0_BLOCK, 1])
            tmp3 = _tmp2 + tmp1
            _tmp2 = tmp3
        tmp2 = tl.sum(_tmp2, 0)[None, :]
        tl.store(out_ptr0 + (tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)), tmp2, None)
"""


def aligned(src: str) -> str | None:
    """``src`` with its slice length rounded up to the loop's block, where the split axis
    walks its slice with a constant (dropped) mask; None where nothing changes."""
    match = _PER_CORE.search(src)
    if match is None:
        return None
    base, numel, cores = match["base"], match["numel"], match["cores"]
    loop = re.search(rf"for \w+ in range\({base}_lo, {base}_hi, (?P<step>\w+)\):", src)
    if loop is None or not re.search(rf"^\s*{base}mask = tl\.full\(", src, re.MULTILINE):
        return None
    step = loop["step"]
    line = (f"{match['indent']}{base}_per_core = "
            f"(({numel} + {cores} - 1) // {cores} + {step} - 1) // {step} * {step}")
    return src[:match.start()] + line + src[match.end():]


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def partial_body(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        src = wrapped(*args, **kwargs)
        return aligned(src) or src

    patcher.wrap_path(module, TARGET, partial_body)


def probe(module: types.ModuleType) -> Probe:
    """Run the live rewrite on :data:`PROBE_SOURCE`: does a block of the result run past its
    core's slice?"""
    src = partial_rewrite(module, PROBE_SOURCE)
    loop = next((line.strip() for line in src.splitlines() if "for r0_offset in" in line), "no loop")
    if aligned(src) is not None:
        return Probe(True, f"a split sum of 65536 with its mask dropped walks {loop} over slices of "
                           "ceil(65536 / 40), unmasked: each core's last block reads into the next slice")
    return Probe(False, f"the split sum of 65536 with its mask dropped is bounded: {loop}")


FIX = Fix(
    name="rsplit-slice-tail",
    about=About(
        symptom=(
            "silently wrong sums of 2^16, 2^17, ... elements: `x.sum()` of 2^20 ones gives 1064960 (each "
            "core's last block reads into the next core's slice)"
        ),
        present=EVERYWHERE,
        fixed_in=NOT_FIXED,
        workaround=(
            "`torch_npu._inductor.triton_experimental.config.rsplit_outer = False` for OUTER sums; none known"
            " for full sums"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
