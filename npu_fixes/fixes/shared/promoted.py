"""The promoted-reduction rewrite: run the live ``_npu_apply_promoted_rtree_lines`` on a few
lines, and edit kernel-body lines around it (permuted-full-reduction, promoted-rtree-shape,
dynamic-r0-index, mixed-leaf-xmask, dualview-fold-definition, promoted-tile-mask)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

TARGET = "_npu_apply_promoted_rtree_lines"


def spliced(line: str, edits: Sequence[tuple[int, int, str]]) -> str | None:
    """``line`` with each ``(start, end, text)`` edit made, columns counted in the line
    without its indent (as ``ast`` gives them); None where there is no edit."""
    if not edits:
        return None
    stripped = line.lstrip()
    code = stripped.encode()  # the offsets count UTF-8 bytes
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text.encode() + code[end:]
    return line[:len(line) - len(stripped)] + code.decode()


def rewrite_body(kernel: Any, rewrite: Callable[[str], str | None]) -> None:
    """Replace each line of ``kernel.body._lines`` (plain lines and Inductor's deferred lines
    alike) by ``rewrite(line)`` where that is not None."""
    lines = kernel.body._lines
    for i, raw in enumerate(lines):
        text = raw if isinstance(raw, str) else getattr(raw, "line", None)
        new = rewrite(text) if isinstance(text, str) else None
        if new is not None:
            lines[i] = new if isinstance(raw, str) else raw._new_line(new)


def promoted_lines(module: types.ModuleType, lines: Sequence[str], combined_mask: str, collapsed_shape: str,
                   collapsed_dim: int, post_resize: str, r_slots: Sequence[int], slot_tokens: Sequence[str],
                   leaves: Sequence[str] = (), *, with_passes: bool = False, **extra: Any) -> list[str]:
    """What the live function makes of the body ``lines`` for one promoted tree (reduction
    slots ``r_slots``, each slot's block extent in ``slot_tokens``, free nodes ``leaves``;
    ``extra``: its keyword arguments ``dynamic``, ``loop_nodes``, ``slot_bcast``), called with
    the arguments its caller gives it (the parameters each state has). ``with_passes``: the
    kernel holds a record of one reduction pass, without index aliases, for each flat loop of
    the body (the wheels' function rebuilds each loop from such a record and refuses a body
    without them); otherwise none."""
    func = getattr(module, TARGET)
    loops = sum(line.lstrip().startswith("for r0_offset in range(") for line in lines) if with_passes else 0

    def passes(prefix: str) -> tuple:
        return tuple(types.SimpleNamespace(scope_id=i, reduction_prefixes=(prefix,),
                                           reduction_index_aliases=()) for i in range(loops))

    body = types.SimpleNamespace(body=types.SimpleNamespace(_lines=list(lines)), index_to_str=str,
                                 _reduction_loop_passes_for_prefix=passes)
    params = inspect.signature(func).parameters
    optional = {"leaf_names": list(leaves),
                "real_sizes": ["1" if s in r_slots else t for s, t in enumerate(slot_tokens)],
                "slot_block_tokens": list(slot_tokens)}
    blocks = [f"{leaf}_blk" for leaf in leaves]
    func(body, "r0_", [], blocks, [], combined_mask, collapsed_shape, collapsed_dim, post_resize,
         list(r_slots), len(slot_tokens), **{k: v for k, v in optional.items() if k in params}, **extra)
    return [raw if isinstance(raw, str) else raw.line for raw in body.body._lines]


def promoted_rewrite(module: types.ModuleType, line: str, combined_mask: str, collapsed_shape: str,
                     collapsed_dim: int, post_resize: str, r_slots: Sequence[int],
                     slot_tokens: Sequence[str], leaves: Sequence[str] = ()) -> str:
    """:func:`promoted_lines` of the one line ``line``."""
    (out,) = promoted_lines(module, [line], combined_mask, collapsed_shape, collapsed_dim, post_resize,
                            r_slots, slot_tokens, leaves)
    return out.strip()


def two_node_lines(module: types.ModuleType, lines: Sequence[str], *, dynamic: bool = False,
                   with_passes: bool = False) -> list[str]:
    """:func:`promoted_lines` of ``lines`` for a reduction to one value over two promoted
    nodes, ``r0_1`` (outer) and ``r0_0``; ``dynamic``: sizes known at run time, each node in
    a tiled loop of its own."""
    extra: dict[str, Any] = {}
    if dynamic:
        slots = {0: "[:, None, None]", 1: "[None, :, None]"}
        loop_nodes = [("r0_1", 0, None, "r0_1numel"), ("r0_0", 1, None, "r0_0numel")]
        extra = {"dynamic": True, "loop_nodes": loop_nodes, "slot_bcast": slots.__getitem__}
    return promoted_lines(module, lines, "r0_1mask & r0_0mask", "[r0_1_blk*r0_0_blk, 1]", 0,
                          "[None, None, :]", [0, 1], ["r0_1_blk", "r0_0_blk", "1"], leaves=["r0_1", "r0_0"],
                          with_passes=with_passes, **extra)


def looped_sum(accumulator: str, loop_lines: Sequence[str]) -> list[str]:
    """A reduction body over both promoted nodes of :func:`two_node_lines`: one r0 loop of
    ``loop_lines`` (which add into ``_<accumulator>``), then the sum into ``accumulator``."""
    return [f"    _{accumulator} = tl.full([r0_1_blk, r0_0_blk, 1], 0, tl.float32)",
            "    for r0_offset in range(0, r0_numel, R0_BLOCK):",
            "        r0_index = r0_offset + r0_base",
            "        r0_mask = r0_index < r0_numel",
            *(f"        {line}" for line in loop_lines),
            f"    {accumulator} = tl.sum(_{accumulator}, 0)[None, None, :]"]


def definitions_from_passes(module: types.ModuleType) -> bool:
    """Whether the live rewrite writes the reduction nodes' definitions from the kernel's
    records of its reduction loops (the wheels: it refuses a body without them), not from
    the body's own lines."""
    body = ["    for r0_offset in range(0, r0_numel, R0_BLOCK):", "        r0_index = r0_offset + r0_base",
            "        r0_1 = r0_index // 8", "        r0_0 = r0_index % 8"]
    try:
        two_node_lines(module, body)
    except RuntimeError as exc:
        if "reduction-pass metadata" not in str(exc):
            raise
        return True
    return False
