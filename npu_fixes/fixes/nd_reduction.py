"""nd-reduction (guard): ND tiled reductions need a torch_npu upgrade; the guard says so.

- **Defect**: with the non-default ``torch._inductor.config.triton.tile_reductions=True``
  a reduction over two or more dims gets one size hint per reduction tree
  (``{'x': .., 'r0_': .., 'r1_': ..}``). The backend's reduction heuristic handles only
  two hints and stops with a bare ``NotImplementedError: size_hints: {'x': .., 'r0_': ..,
  'r1_': ..}``; past it, ``_apply_linearize`` gives both reduction trees one tensor slot
  and Triton fails with ``Cannot broadcast ... [2,2,1], [2,1,2]``.
- **Where**: ``npu_triton_heuristics.reduction`` (the heuristic half, guarded here) and
  ``codegen.triton.NPUTritonScheduling._apply_linearize`` (inline slot numbering).
- **Probe**: call the live heuristic with three size hints (``cached_autotune`` replaced by a
  scoped stand-in, nothing compiled): ``NotImplementedError`` = defective.
- **Fix**: none at run time. The slot numbering sits inline in ``_apply_linearize``, so
  mending the heuristic alone would only move the failure to the Triton compile. Guard:
  where the probe finds the defect, ``reduction`` is wrapped; when a call with two or more
  reduction size hints raises ``NotImplementedError``, :class:`NdReductionUnsupported`
  (a ``NotImplementedError``, hence a ``RuntimeError``) is raised in its place, chained to
  the original, naming the setting and the upgrade. Every other call, result and exception
  passes through untouched. The guard acts at the heuristic rather than refusing the
  setting up front: with ``tile_reductions=True`` reductions over one dim still get two
  hints and work on these states; only the kernels that would fail are stopped, at the
  point where they would have failed.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe, one_line
from ..shim.patcher import Patcher
from ..shim.scoped import with_globals

TARGET = "reduction"
SETTING = "torch._inductor.config.triton.tile_reductions"
UPGRADE = (
    "upgrade torch_npu to a build at or after e1863287d (any build from 2026-08-13 on) "
    "or the published 2.13.0 wheel"
)
#: Size hints of a reduction over two dims, as tile_reductions=True produces them.
PROBE_HINTS = {"x": 2, "r0_": 2, "r1_": 2}


class NdReductionUnsupported(NotImplementedError):
    """An ND tiled reduction reached a torch_npu build that cannot compile it."""


def reduction_prefixes(size_hints: object) -> list[str]:
    """The reduction trees named in a heuristic's size hints (``r0_``, ``r1_``, ...)."""
    if not isinstance(size_hints, Mapping):
        return []
    return [key for key in size_hints if isinstance(key, str) and key.startswith("r")]


def is_nd_reduction(size_hints: object) -> bool:
    """Whether the hints describe a reduction over more than one reduction tree."""
    return len(reduction_prefixes(size_hints)) >= 2


def refusal(size_hints: Mapping[str, Any]) -> str:
    """The guard's message for an ND reduction the heuristic could not take."""
    return (
        f"this torch_npu build cannot compile a reduction tiled over "
        f"{len(reduction_prefixes(size_hints))} reduction dims (size_hints {dict(size_hints)}), "
        f"which only {SETTING}=True produces: set it to False (the default) or {UPGRADE} "
        "(npu_fixes nd-reduction)"
    )


def guarded_error(size_hints: object, exc: BaseException) -> NdReductionUnsupported | None:
    """The clear error to raise in place of ``exc``, or None to let ``exc`` through."""
    if isinstance(exc, NdReductionUnsupported) or not isinstance(exc, NotImplementedError):
        return None
    if not is_nd_reduction(size_hints):
        return None
    assert isinstance(size_hints, Mapping)
    return NdReductionUnsupported(refusal(size_hints))


def _size_hints(args: tuple, kwargs: dict) -> object:
    return args[0] if args else kwargs.get("size_hints")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    def guard(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except NotImplementedError as exc:
            clear = guarded_error(_size_hints(args, kwargs), exc)
            if clear is None:
                raise
            raise clear from exc

    patcher.wrap_path(module, TARGET, guard)


class _Configs:
    """What the scoped ``cached_autotune`` stand-in returns: the configs it was given."""

    def __init__(self, configs: Any) -> None:
        self.configs = configs


def call_heuristic(module: types.ModuleType, size_hints: Mapping[str, int]) -> Any:
    """Call the live ``reduction`` heuristic (wrappers included) with autotuning replaced
    by a stand-in that returns the candidate configs; nothing is compiled or cached."""
    heuristic = with_globals(inspect.getattr_static(module, TARGET),
                             {"cached_autotune": lambda size_hints, configs, **kw: _Configs(configs)})
    triton_meta = {"signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32",
                                 **{f"{p}numel": "i32" for p in reduction_prefixes(size_hints)}},
                   "constants": {}}
    return heuristic(dict(size_hints), triton_meta=triton_meta, inductor_meta={})


def probe(module: types.ModuleType) -> Probe:
    """Call the live heuristic with the size hints of a two-dim tiled reduction."""
    try:
        result = call_heuristic(module, PROBE_HINTS)
    except NdReductionUnsupported:
        return Probe(True, f"guard on: ND reductions ({SETTING}=True) stop with a clear error; "
                           f"no run-time repair: {UPGRADE}")
    except NotImplementedError as exc:
        return Probe(True, f"reduction heuristic raises '{one_line(exc)}' on three size hints "
                           f"({SETTING}=True; past it 'Cannot broadcast ... [2,2,1], [2,1,2]'); "
                           f"fixed upstream in e1863287d, no run-time repair: {UPGRADE}, or keep "
                           "tile_reductions off")
    except Exception as exc:  # noqa: BLE001 - a different failure is not this defect
        return Probe(False, f"reduction heuristic with three size hints raised {one_line(exc)}, "
                            "not the known NotImplementedError")
    count = len(result.configs) if isinstance(result, _Configs) else "?"
    return Probe(False, f"reduction heuristic takes three size hints (candidate configs: {count})")


FIX = Fix(
    name="nd-reduction",
    about=About(
        symptom=(
            "`NotImplementedError: size_hints: {'x': .., 'r0_': .., 'r1_': ..}`, then `Cannot broadcast` "
            "(only with `triton.tile_reductions=True`)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da"}),
        fixed_in="e1863287d",
        workaround="leave `torch._inductor.config.triton.tile_reductions` off (the default)",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ("size_hints", "reduction_hint", "triton_meta", "filename", "inductor_meta")},
    repairable=False,
)
