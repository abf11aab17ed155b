"""triton36-launcher: kernel launchers that a triton-ascend 3.6 runtime can call.

- **Defect**: ``make_launcher`` reads the launch hooks from the compiled kernel's class
  (``binary.__class__.launch_enter_hook``), where triton-ascend 3.2.x keeps them; from 3.6
  on they live in ``triton.knobs.runtime``, and every launcher build fails with
  ``AttributeError: type object 'CompiledKernel' has no attribute 'launch_enter_hook'``.
  Past that, torch's ``triton_version_uses_attrs_dict()`` is true with such a Triton, and
  the branch it selects keeps the config's constexprs (``XBLOCK``, ``R0_BLOCK``) among the
  launcher's parameters and the arguments handed to the runner: the generated wrapper never
  passes them (``launcher() missing 1 required positional argument: 'XBLOCK'``).
- **Where**: ``npu_triton_heuristics.NPUTritonCompileResult.make_launcher``.
- **Probe**: the live ``make_launcher`` on a stand-in kernel whose class has no hooks, as
  3.6's has none, under the installed Triton; it finds the defect with a Triton of the 3.6
  generation (``triton.knobs`` present, no ``AttrsDescriptor``; stock Triton 3.6 is one).
  With triton-ascend 3.2.x (what the self-builds were made for) the probe finds nothing and
  nothing is changed.
- **Fix**: while ``make_launcher`` runs, the kernel's class answers the two hooks with
  ``triton.knobs.runtime``'s where it lacks them (set for the call only), and the function
  runs as a scoped copy that reads ``triton_version_uses_attrs_dict()`` as false (nothing
  global changes): it takes the branch that leaves every constexpr out, so the launcher
  takes and passes the runtime arguments only, the hooks it passes are the knobs', as the
  published wheel builds it for 3.6. The rsplit combine kernel, which imports
  ``AttrsDescriptor`` at codegen, is not covered (``rsplit_outer=False`` avoids it).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..shim.catalogue import EVERY_COMMIT, WHEEL, About
from ..shim.fix import Fix, Probe, one_line
from ..shim.patcher import Patcher
from ..shim.scoped import call_rebound, importing
from ..shim.stand_in_kernel import stand_in_result
from .shared.launcher import TARGET, reduction_kernel
from .shared.triton_generation import knobs_generation

HOOKS = ("launch_enter_hook", "launch_exit_hook")
#: Where ``make_launcher`` imports the Triton-generation switch from, and its name.
SWITCH_MODULE, SWITCH = "torch._inductor.utils", "triton_version_uses_attrs_dict"
#: Held while a kernel class carries the hooks we lent it.
_LENDING = threading.RLock()


#: The builtins of the scoped copy: its import of the switch answers False.
_BUILTINS = importing(SWITCH_MODULE, **{SWITCH: lambda: False})


@contextlib.contextmanager
def hooks_from_knobs(cls: type) -> Iterator[None]:
    """While open, ``cls`` has the two launch hooks of ``triton.knobs.runtime`` where it
    lacks them (deleted again at the end)."""
    from triton import knobs

    with _LENDING:
        lent = [hook for hook in HOOKS if not hasattr(cls, hook)]
        for hook in lent:
            setattr(cls, hook, getattr(knobs.runtime, hook))
        try:
            yield
        finally:
            for hook in lent:
                delattr(cls, hook)


def build_launcher(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """wrapt wrapper of ``make_launcher``: build the launcher as for a 3.6 runtime (see the
    module docstring)."""
    with hooks_from_knobs(type(instance.kernel)):
        return call_rebound("triton36-launcher", wrapped, {"__builtins__": _BUILTINS}, args, kwargs)


class _HooklessBinary(types.SimpleNamespace):
    """A stand-in compiled kernel whose class has no launch hooks, like 3.6's."""


def launcher_parameters(module: types.ModuleType, hooks_on_class: bool = False) -> list[str]:
    """The parameters of the launcher the live ``make_launcher`` (wrappers included) builds
    for a stand-in reduction kernel (``XBLOCK``/``R0_BLOCK`` constexpr) whose class has no
    launch hooks, as 3.6's, or, with ``hooks_on_class``, has them, as 3.2.x's."""
    binary = reduction_kernel()
    if not hooks_on_class:
        binary = _HooklessBinary(**vars(binary))
    result = stand_in_result(module, binary, {"XBLOCK": 1, "R0_BLOCK": 64}, {"grid_type": "Grid1D"})
    return list(inspect.signature(result.make_launcher()).parameters)


def probe(module: types.ModuleType) -> Probe:
    """Under a Triton of the 3.6 generation, build a launcher for a kernel whose class has
    no launch hooks: does it build, and does it leave the constexprs out?"""
    import triton

    if not knobs_generation():
        return Probe(False, f"triton {triton.__version__}: launch hooks on the kernel class "
                            "(the 3.2 generation the launcher reads them from)")
    seen = f"triton {triton.__version__} (hooks in triton.knobs): launcher for a kernel with XBLOCK"
    try:
        params = launcher_parameters(module)
    except AttributeError as exc:
        return Probe(True, f"{seen} not built: {one_line(exc)}")
    kept = [name for name in ("XBLOCK", "R0_BLOCK") if name in params]
    if kept:
        return Probe(True, f"{seen} takes {', '.join(kept)}, which its caller never passes")
    return Probe(False, f"{seen} takes the runtime arguments only")


def install(module: types.ModuleType, patcher: Patcher) -> None:
    patcher.wrap_path(module, TARGET, build_launcher)


FIX = Fix(
    name="triton36-launcher",
    about=About(
        symptom=(
            "with a Triton of the 3.6 generation no kernel launches: `AttributeError: type object "
            "'CompiledKernel' has no attribute 'launch_enter_hook'`"
        ),
        present=EVERY_COMMIT,
        fixed_in=WHEEL,
        workaround="use triton-ascend 3.2.x",
    ),
    module="torch_npu._inductor.triton_experimental.npu_triton_heuristics",
    targets=(TARGET,),
    probe=probe,
    install=install,
    signatures={TARGET: ()},
)
