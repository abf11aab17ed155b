"""The routing decision (Triton or PyTorch path) and the environment switches it reads.

Switches are read through ``os.environ`` at every call, so setting one at run time takes
effect at the next call.
"""

from __future__ import annotations

import os

from torch import Tensor

from ...shim import switches
from . import tuning
from .sharding import Shard

CE_CHECK = "NPU_FIXES_CE_CHECK"  # default off


def switch(name: str) -> bool | None:
    """A boolean ``NPU_FIXES*`` switch (the shim's words; unset or empty: None)."""
    value = os.environ.get(name)
    return None if not value else switches.flag(name, None, {name: value})


def _env_key(name: str) -> object:
    encode = getattr(os.environ, "encodekey", None)
    return encode(name) if encode is not None else None


_SWITCH_KEYS = (_env_key(switches.CE_FORCE_TRITON), _env_key(CE_CHECK))


def switches_unset() -> bool:
    """Neither cross-entropy switch is in the environment, asked at every eager call: a look in
    ``os.environ``'s own dict takes about 0.1 us, ``os.environ.get`` of a missing name 1.5 us
    (measured 9 us per call for the two reads on an H100 host). False where that dict cannot
    be found: then :func:`switch` decides."""
    data = getattr(os.environ, "_data", None)
    if data is None or None in _SWITCH_KEYS:
        return False
    return _SWITCH_KEYS[0] not in data and _SWITCH_KEYS[1] not in data


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def use_triton(inp: Tensor, width: int | None = None) -> bool:
    """Whether ``inp`` (already validated) takes the Triton path.

    ``NPU_FIXES_CE_FORCE_TRITON`` decides when set. Otherwise :func:`default_route`: NPU
    from ``tuning.NPU_MIN_TRITON_VOCAB`` vocabulary entries, CPU never (the Triton interpreter
    is only for tests), CUDA and other devices always (on an H200 Triton beat PyTorch at every
    size measured).
    ``width`` replaces ``inp.shape[-1]`` as the vocabulary width routed by: the ranks of a
    vocabulary-parallel group pass their largest slice, so that all take the same path.
    """
    force = switch(switches.CE_FORCE_TRITON)
    device = inp.device.type
    if force is not None:
        if force and device == "cpu" and not _interpreting():
            raise RuntimeError(
                "NPU_FIXES_CE_FORCE_TRITON=1 with CPU tensors needs the Triton interpreter "
                "(TRITON_INTERPRET=1 before triton is imported)"
            )
        return force
    return default_route(device, inp.shape[-1] if width is None else width, inp.shape[0] * inp.shape[1])


def default_route(device_type: str, width: int, rows: int) -> bool:
    """The default routing rule: Triton for ``rows`` rows of ``width`` logits on ``device_type``?"""
    if device_type == "cpu":
        return False
    if device_type == "npu":
        return width >= tuning.NPU_MIN_TRITON_VOCAB
    return True


def route(inp: Tensor, shard: Shard | None) -> bool:
    """Triton path? Sharded: decided by the group's largest slice, the same on every rank
    (the slice sizes were exchanged once, at the group's first call), so all ranks gather
    partials of one shape."""
    return inp.numel() > 0 and use_triton(inp, None if shard is None else shard.largest)
