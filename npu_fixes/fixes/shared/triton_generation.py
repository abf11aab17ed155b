"""The Triton generation: whether the installed Triton is of the 3.6 generation
(triton36-launcher, triton36-combine-attrs)."""

from __future__ import annotations


def knobs_generation() -> bool:
    """Whether the installed Triton is of the 3.6 generation: launch hooks in
    ``triton.knobs.runtime`` and no ``AttrsDescriptor`` (3.2.x has the class, no knobs)."""
    try:
        from triton import knobs
    except ImportError:
        return False
    import triton.backends.compiler as backends
    import triton.compiler.compiler as compiler

    return hasattr(knobs, "runtime") and not any(hasattr(m, "AttrsDescriptor") for m in (backends, compiler))
