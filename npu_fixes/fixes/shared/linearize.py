"""Linearize mode: whether a kernel is generated linearized (constant-index-shape,
rank-mismatch)."""

from __future__ import annotations

from typing import Any


def linearized(kernel: Any, namespace: dict[str, Any]) -> bool:
    """Whether ``kernel`` is generated in linearize mode: its own ``_npu_linearize`` where
    the backend keeps one per kernel (later releases), else the module switch."""
    return bool(getattr(kernel, "_npu_linearize", namespace.get("triton_codegen_linearize")))
