"""Reading a kernel line's Python syntax: the names an expression uses, the calls of one
Triton function in it, a load's mask (widened-load-inner-axis, widened-load-tail,
promoted-tile-mask, promoted-rtree-shape, permuted-full-reduction)."""

from __future__ import annotations

import ast


def names(node: ast.AST | None) -> set[str]:
    """Every name ``node`` uses (none for None)."""
    return set() if node is None else {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def calls(node: ast.AST, function: str) -> list[ast.Call]:
    """The calls of ``function`` (``"tl.load"``) in ``node``, outermost first."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == function]


def load_mask(load: ast.Call) -> ast.AST | None:
    """The mask of a ``tl.load`` call, given by position or by keyword; None where it has none."""
    if len(load.args) > 1:
        return load.args[1]
    return next((k.value for k in load.keywords if k.arg == "mask"), None)
