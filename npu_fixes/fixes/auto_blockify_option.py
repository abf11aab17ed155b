"""auto-blockify-option: ``auto_blockify_size`` reaches the compiler as an option, not as a
kernel constant.

- **Defect**: ``npu_triton_config`` stores ``auto_blockify_size`` (a triton-ascend compile
  option that chunks a folded >65535-program grid) in ``Config.kwargs``, and
  ``_precompile_config`` hands every kwarg to ``ASTSource`` as a kernel constant: the
  compile stops with ``ValueError: 'auto_blockify_size' is not in list``. It triggers for
  1D pointwise kernels needing more than 65535 programs (about 2^29-2^30 elements, e.g. MLM
  logits of large vocabularies): on the default path from f8802037a on, and at every state
  with ``autotune_enhance=False``.
- **Where**: ``npu_triton_heuristics.npu_triton_config`` (makes the candidates),
  ``NPUCachingAutotuner._precompile_config`` (builds ``triton.compile``'s options),
  ``cached_autotune`` (dedups the candidates, hashes them for the autotune cache) and
  ``NPUCachingAutotuner._compile_small_block_fallback`` (rebuilds candidates from the first).
- **Probe**: does a candidate made with ``auto_blockify_size`` fail to compile through the
  live ``_precompile_config`` with the option in ``triton.compile``'s options (the real
  ``ASTSource``, a recording ``triton.compile``), or do two candidates differing only in it
  collapse in ``cached_autotune``, or does the small-block fallback drop it?
- **Fix**: the option moves from ``Config.kwargs`` to ``Config.extra_options`` (the slot
  that Inductor's autotune cache saves and restores); ``_precompile_config`` runs as a
  private copy whose ``triton.compile`` receives the config's extra options merged into
  its options; ``cached_autotune`` dedups and hashes with the extra options in the key (the
  hash of candidates without any is unchanged); the small-block fallback's candidates keep
  the first candidate's extra options. Configs without extra options take the unchanged
  code. Delivery is proven on CPU up to ``triton.compile``'s options: whether triton-ascend
  then honours the option is its business (its ``NPUOptions`` field of that name).
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import logging
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..shim.catalogue import About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from ..shim.scoped import ScopedAttributes, scoped_method, unbind, with_globals

CONFIG_FN = "npu_triton_config"
PRECOMPILE = "NPUCachingAutotuner._precompile_config"
AUTOTUNE = "cached_autotune"
FALLBACK = "NPUCachingAutotuner._compile_small_block_fallback"
OPTION = "auto_blockify_size"
#: Keys that are compile options of the backend, never kernel constants.
COMPILE_OPTIONS = frozenset({OPTION})
SLOT = "extra_options"  # the Config attribute Inductor's autotune cache saves and restores

PROBE_HINTS = {"x": 2**30}
PROBE_XBLOCK = 4096
PROBE_SIZE = 4

logger = logging.getLogger("npu_fixes")


# -- the rule ------------------------------------------------------------------------------


def split_options(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(kernel constants, compile options)`` of a config's kwargs, order kept."""
    constants = {k: v for k, v in kwargs.items() if k not in COMPILE_OPTIONS}
    options = {k: v for k, v in kwargs.items() if k in COMPILE_OPTIONS}
    return constants, options


def extra_options(cfg: Any) -> dict[str, Any]:
    """The compile options a config carries (empty where it has none)."""
    return dict(getattr(cfg, SLOT, None) or {})


def with_options(options: Mapping[str, Any] | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """``triton.compile``'s options with a config's extra options merged in (theirs win)."""
    return {**(options or {}), **extra}


def config_key(cfg: Any) -> tuple:
    """What makes two candidates the same: kwargs, warps, stages and extra options."""
    return (
        *sorted(cfg.kwargs.items()),
        ("num_warps", cfg.num_warps),
        ("num_stages", cfg.num_stages),
        *sorted(extra_options(cfg).items()),
    )


def unique_configs(configs: Iterable[Any]) -> list[Any]:
    """The candidates without repeats under :func:`config_key`, first one kept."""
    seen: set[tuple] = set()
    kept = []
    for cfg in configs:
        key = config_key(cfg)
        if key not in seen:
            seen.add(key)
            kept.append(cfg)
    return kept


def hash_configs(configs: Iterable[Any]) -> str:
    """Autotune-cache hash of the candidates: Inductor's line per candidate, followed by its
    extra options where it has some (so lists without any hash as before)."""
    hasher = hashlib.sha256()
    for cfg in configs:
        line = f"{sorted(cfg.kwargs.items())} {cfg.num_warps} {cfg.num_stages}"
        extra = extra_options(cfg)
        if extra:
            line += f" {sorted(extra.items())}"
        hasher.update(f"{line}\n".encode())
    return hasher.hexdigest()


# -- the wrappers ------------------------------------------------------------------------


def _call_rebound(wrapped: Any, overrides: Callable[[dict], dict], args: tuple, kwargs: dict) -> Any:
    """Call the bound method ``wrapped`` as a private copy whose body reads
    ``overrides(its globals)`` in place of those globals; unchanged if it cannot be copied."""
    function, owner = unbind(wrapped)
    try:
        copy = with_globals(function, overrides(function.__globals__))
    except (TypeError, KeyError, AttributeError) as exc:
        logger.warning("npu_fixes: auto-blockify-option: %s; %s ran unchanged", exc, function.__name__)
        return wrapped(*args, **kwargs)
    return copy.__get__(owner, type(owner))(*args, **kwargs)


def make_config(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``npu_triton_config``: compile options leave the kwargs for ``extra_options``."""
    cfg = wrapped(*args, **kwargs)
    constants, options = split_options(cfg.kwargs)
    if options:
        cfg.kwargs = constants
        setattr(cfg, SLOT, {**extra_options(cfg), **options})
    return cfg


def _config_arg(args: tuple, kwargs: dict) -> Any:
    return args[0] if args else kwargs["cfg"]


def precompile(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_precompile_config``: a config with extra options is compiled by a copy whose
    ``triton.compile`` gets them merged into its options."""
    extra = extra_options(_config_arg(args, kwargs))
    if not extra:
        return wrapped(*args, **kwargs)

    def overrides(namespace: dict) -> dict:
        triton = namespace["triton"]

        def compile_with_options(src: Any, *rest: Any, **more: Any) -> Any:
            if len(rest) >= 2:  # options given by position: (target, options)
                rest = (rest[0], with_options(rest[1], extra), *rest[2:])
            else:
                more["options"] = with_options(more.get("options"), extra)
            return triton.compile(src, *rest, **more)

        return {"triton": ScopedAttributes(triton, compile=compile_with_options)}

    return _call_rebound(wrapped, overrides, args, kwargs)


def _configs_arg(args: tuple, kwargs: dict) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("configs", ())


def autotune(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``cached_autotune``: where a candidate has extra options, dedup and hash with them."""
    configs = _configs_arg(args, kwargs)
    if not isinstance(configs, (list, tuple)) or not any(extra_options(cfg) for cfg in configs):
        return wrapped(*args, **kwargs)
    try:
        copy = with_globals(wrapped, {"unique_configs": unique_configs, "hash_configs": hash_configs})
    except TypeError as exc:
        logger.warning("npu_fixes: auto-blockify-option: %s; cached_autotune ran unchanged", exc)
        return wrapped(*args, **kwargs)
    return copy(*args, **kwargs)


def small_block_fallback(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_compile_small_block_fallback``: the rebuilt candidates keep the extra options of
    the first candidate, from which they are made."""
    configs = getattr(instance, "configs", None)
    extra = extra_options(configs[0]) if configs else {}
    if not extra:
        return wrapped(*args, **kwargs)

    def overrides(namespace: dict) -> dict:
        config_class = namespace["Config"]

        def config_keeping_options(*a: Any, **k: Any) -> Any:
            cfg = config_class(*a, **k)
            setattr(cfg, SLOT, dict(extra))
            return cfg

        return {"Config": config_keeping_options}

    return _call_rebound(wrapped, overrides, args, kwargs)


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, CONFIG_FN, make_config)
    patcher.wrap_path(module, PRECOMPILE, precompile)
    patcher.wrap_path(module, AUTOTUNE, autotune)
    patcher.wrap_path(module, FALLBACK, small_block_fallback)


# -- the probe -----------------------------------------------------------------------------


def _probe_kernel(in_ptr0, out_ptr0, xnumel, XBLOCK):  # noqa: N803 - a kernel's signature
    """Stand-in kernel: only its parameters are read."""


_PROBE_FN = {"arg_names": ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"], "constexprs": [3],
             "__name__": "probe_kernel"}
_PROBE_SIGNATURE = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}


def _no_driver_switch() -> None:
    """Stand-in for Inductor's ``set_driver_to_gpu``: the probe selects no device driver."""


def _probe_builtins() -> dict[str, Any]:
    """Builtins for a probed copy: its local imports see a no-op GPU driver switch, and a
    stand-in ``MLIRCompilationError`` where the installed triton has none (stock triton)."""
    real_import = builtins.__import__

    def scoped_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                      level: int = 0) -> Any:
        module = real_import(name, globals, locals, fromlist, level)
        swaps: dict[str, Any] = {}
        if "triton_helpers" in (fromlist or ()) and hasattr(module, "triton_helpers"):
            helpers = module.triton_helpers
            swaps["triton_helpers"] = ScopedAttributes(helpers, set_driver_to_gpu=_no_driver_switch)
        if "MLIRCompilationError" in (fromlist or ()) and not hasattr(module, "MLIRCompilationError"):
            swaps["MLIRCompilationError"] = type("MLIRCompilationError", (Exception,), {})
        return ScopedAttributes(module, **swaps) if swaps else module

    return {**vars(builtins), "__import__": scoped_import}


def _compile_options(module: types.ModuleType, cfg: Any) -> dict[str, Any]:
    """Run the live ``_precompile_config`` on ``cfg`` for a stand-in autotuner, with the real
    ``ASTSource`` and a ``triton.compile`` that records its options (and compiles nothing)."""
    import triton

    seen: list[dict[str, Any]] = []

    def record(src: Any, target: Any = None, options: Any = None) -> Any:
        seen.append(dict(options or {}))
        return types.SimpleNamespace()

    cls = module.NPUCachingAutotuner
    autotuner = types.SimpleNamespace(
        fn=types.SimpleNamespace(fn=_probe_kernel, **_PROBE_FN),
        triton_meta={"signature": dict(_PROBE_SIGNATURE), "constants": {}, "configs": [{}]},
        inductor_meta={"kernel_name": "npu_fixes_probe"},
        device_props=types.SimpleNamespace(type="npu", index=0, cc="Ascend910B", warp_size=None),
    )
    scoped = {"triton": ScopedAttributes(triton, compile=record), "__builtins__": _probe_builtins()}
    scoped_method(cls, "_precompile_config", autotuner, scoped)(cfg)
    return seen[0]


def _kept_candidates(module: types.ModuleType, configs: list[Any]) -> list[Any]:
    """The candidates the live ``cached_autotune`` hands to the autotuner (caching off)."""

    def autotuner(fn: Any, **kwargs: Any) -> list[Any]:
        return kwargs["configs"]

    run = with_globals(inspect.getattr_static(module, AUTOTUNE), {"NPUCachingAutotuner": autotuner})
    decorate = run(dict(PROBE_HINTS), configs, triton_meta={}, heuristic_type=None,
                   filename="npu_fixes_probe", inductor_meta={"force_disable_caches": True})
    return decorate(types.SimpleNamespace(fn=_probe_kernel, **_PROBE_FN))


def _fallback_options(module: types.ModuleType, template: Any) -> list[dict[str, Any]]:
    """The extra options of each candidate the live small-block fallback rebuilds from
    ``template`` (each handed to a recording stand-in for ``_precompile_config``)."""
    seen: list[dict[str, Any]] = []

    def record(cfg: Any) -> Any:
        seen.append(extra_options(cfg))
        return cfg

    cls = module.NPUCachingAutotuner
    holder = types.SimpleNamespace(configs=[template], size_hints=dict(PROBE_HINTS),
                                   _precompile_config=record)
    scoped_method(cls, "_compile_small_block_fallback", holder, {"__builtins__": _probe_builtins()})()
    return seen


def probe(module: types.ModuleType) -> Probe:
    """Make a huge 1D candidate with ``auto_blockify_size`` through the live config
    function, compile it through the live ``_precompile_config`` (real ``ASTSource``,
    recording ``triton.compile``), hand it and its plain twin to the live
    ``cached_autotune``, and rebuild small-block candidates from it."""
    make = module.npu_triton_config
    cfg = make(dict(PROBE_HINTS), PROBE_XBLOCK, auto_blockify_size=PROBE_SIZE)
    held = "kwargs" if OPTION in cfg.kwargs else SLOT if OPTION in extra_options(cfg) else "nowhere"
    try:
        options = _compile_options(module, cfg)
    except ValueError as exc:  # the real ASTSource on a kernel constant the kernel lacks
        return Probe(True, f"{OPTION}={PROBE_SIZE} rides Config.{held}: ASTSource raised ValueError: {exc}")
    if options.get(OPTION) != PROBE_SIZE:
        return Probe(True, f"{OPTION}={PROBE_SIZE} (Config.{held}) never reaches triton.compile's options")
    kept = _kept_candidates(module, [make(dict(PROBE_HINTS), PROBE_XBLOCK), cfg])
    if len(kept) != 2:
        return Probe(True, f"cached_autotune keeps {len(kept)} of 2 candidates differing only in {OPTION}")
    rebuilt = _fallback_options(module, cfg)
    if not rebuilt or any(extra.get(OPTION) != PROBE_SIZE for extra in rebuilt):
        return Probe(True, f"the small-block fallback drops {OPTION}: its candidates carry {rebuilt[:1]}")
    return Probe(False, f"{OPTION}={PROBE_SIZE} rides Config.{held} into triton.compile's options; "
                        "dedup and fallback keep it")


FIX = Fix(
    name="auto-blockify-option",
    about=About(
        symptom=(
            "`ValueError: 'auto_blockify_size' is not in list` (1D pointwise kernels needing more than 65535 "
            "programs)"
        ),
        present=frozenset({"8bfbb9ed1", "95c9094da", "f8802037a", "5ff81d9c5"}),
        fixed_in="bafc50684",
        workaround=(
            "before f8802037a: keep `autotune_enhance` on (the default); from f8802037a: none known: upgrade "
            "torch_npu"
        ),
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(CONFIG_FN, PRECOMPILE, AUTOTUNE, FALLBACK),
    probe=probe,
    install=install,
    signatures={
        CONFIG_FN: ("size_hints", "x", "y", "z", "num_stages", "num_elements_per_warp", "min_elem_per_thread",
                    OPTION),
        PRECOMPILE: ("cfg",),
        AUTOTUNE: ("size_hints", "configs", "triton_meta", "heuristic_type", "filename", "inductor_meta",
                   "custom_kernel"),
        FALLBACK: (),
    },
)
