"""Fused operators for the NPU training stack (imports torch; Triton only when a kernel runs)."""

from .cross_entropy import parallel_cross_entropy

__all__ = ["parallel_cross_entropy"]
