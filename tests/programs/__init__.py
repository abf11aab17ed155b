"""Test programs, each run in a fresh interpreter by ``tests.conftest.run_program``.

A module here holds the programs of one test module, as functions taking keyword
arguments (JSON values) and returning a JSON-able result, and ends with
``if __name__ == "__main__": main(globals())``. ``main`` calls the program named on the
command line and prints its result as the last line of stdout. Nothing here imports
npu_fixes: each program decides when it does (its hooks arm at that moment).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def standalone(tool: str):
    """``npu_fixes/tools/<tool>.py`` (``host`` or ``interpret``: stdlib imports only) loaded as
    a module of its own, without the npu_fixes package."""
    name = f"npu_fixes_{tool}_standalone"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "npu_fixes" / "tools" / f"{tool}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def standalone_host():
    """``npu_fixes/tools/host.py`` loaded as a module of its own (see :func:`standalone`)."""
    return standalone("host")


def host_load(location: str):
    """Host-load the torch_npu tree (or wheel) at ``location``; returns its ``HostLoad``."""
    return standalone_host().load(location)


def backend_targets(targets: dict[str, list[str]]) -> dict[str, object]:
    """Fix name -> the object its first target names right now (None where it cannot be
    resolved), for ``targets`` = fix name -> [module, dotted target]."""
    import inspect

    found = {}
    for name, (module, dotted) in targets.items():
        owner = sys.modules.get(module)
        *path, attr = dotted.split(".")
        try:
            for part in path:
                owner = getattr(owner, part)
            found[name] = inspect.getattr_static(owner, attr)
        except AttributeError:
            found[name] = None
    return found


def backend_states() -> dict[str, str]:
    """The state ``npu_fixes.status()`` reports now for each torch_npu backend fix."""
    import npu_fixes

    fixes = npu_fixes.registry().fixes
    return {r.name: r.state.value for r in npu_fixes.status() if fixes[r.name].module.startswith("torch_npu.")}


def probes_now(names) -> dict[str, bool]:
    """Fix name -> whether its live probe sees the defect on what its target module holds now."""
    import npu_fixes

    fixes = npu_fixes.registry().fixes
    return {n: fixes[n].probe(sys.modules[fixes[n].module]).defective for n in names}


def innermost(exc: BaseException) -> str:
    """``Type: last line of the message`` of the error at the bottom of a chain (Triton's
    interpreter and IR frontend wrap the kernel's own, Inductor's ``InductorError`` holds it
    as ``inner_exception``)."""
    while (inner := exc.__cause__ or getattr(exc, "inner_exception", None)) is not None:
        exc = inner
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[-1][:300]}"


def main(namespace: dict) -> None:
    """Run ``namespace[argv[1]](**json.loads(argv[2]))`` and print its result as JSON (a
    program returning None prints nothing)."""
    name = sys.argv[1]
    kwargs = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    result = namespace[name](**kwargs)
    if result is not None:
        print(json.dumps(result, default=str))


def before_and_after(fix, mod, battery) -> tuple[dict, object]:
    """``fix``'s probe verdict (``[defective, detail]``) and ``battery()`` before and after
    installing it where the probe says needed, as the registry decides; returns them under
    ``probe_before``, ``before``, ``probe_after``, ``after`` with the Patcher that holds
    the install (to restore)."""
    from npu_fixes.shim.patcher import Patcher

    result = {}
    probe = fix.probe(mod)
    result["probe_before"] = [probe.defective, probe.detail]
    result["before"] = battery()
    patcher = Patcher()
    if probe.defective:
        fix.FIX.install(mod, patcher)
    probe = fix.probe(mod)
    result["probe_after"] = [probe.defective, probe.detail]
    result["after"] = battery()
    return result, patcher


def method_before_and_after(fix, mod, cls, name: str, battery) -> dict:
    """:func:`before_and_after` for a fix that replaces method ``name`` of ``cls``, then the
    install undone: also whether the install replaced the method (``patched``) and the
    restore put the original back (``restored``)."""
    original = vars(cls)[name]
    result, patcher = before_and_after(fix, mod, battery)
    result["patched"] = vars(cls)[name] is not original
    patcher.restore()
    result["restored"] = vars(cls)[name] is original
    return result


def interpreted(codegen, fn, *args, runtime: str = "3.2", dynamic: bool | None = None) -> dict:
    """``torch.compile(fn, dynamic=dynamic)(*args)`` after a Dynamo reset, its kernels run on
    the interpreter device of the backend's ``codegen`` module (launchers built for
    triton-ascend ``runtime``): ``{"result", "launches"}``, or ``{"error"}`` (the innermost
    one) where the compile or a kernel fails."""
    import torch

    from npu_fixes.tools import interpret

    torch._dynamo.reset()
    try:
        with interpret.cpu_device(codegen, runtime=runtime) as launches:
            return {"result": torch.compile(fn, dynamic=dynamic)(*args), "launches": launches}
    except Exception as exc:  # noqa: BLE001 - recorded
        return {"error": innermost(exc)}


def step_equals_eager(codegen, step, fn, atol: float) -> bool | str:
    """``step(torch.compile(fn))`` against ``step(fn)`` (each a sequence of tensors: a loss,
    gradients), the compiled one after a Dynamo reset, its kernels on the interpreter device
    of ``codegen``: True where every tensor is close within ``atol``, False where one is not,
    else the innermost error."""
    import torch

    from npu_fixes.tools import interpret

    want = step(fn)
    torch._dynamo.reset()
    try:
        with interpret.cpu_device(codegen):
            got = step(torch.compile(fn))
    except Exception as exc:  # noqa: BLE001 - recorded
        return innermost(exc)
    return all(torch.allclose(a, b, atol=atol) for a, b in zip(got, want, strict=True))


def against_eager(codegen, programs: dict, judge, dynamic: bool | None = None) -> dict:
    """label -> ``judge(compiled result, eager result)`` for each ``label -> (fn, args)`` of
    ``programs`` compiled by :func:`interpreted` (``dynamic`` as given), or the error."""
    out = {}
    for label, (fn, args) in programs.items():
        run = interpreted(codegen, fn, *args, dynamic=dynamic)
        out[label] = run["error"] if "error" in run else judge(run["result"], fn(*args))
    return out


def judged_by_the_sweep(codegen, sample_ids) -> dict:
    """Sample id -> ``[outcome, detail]``, as ``npu-fixes sweep`` judges each of ``sample_ids``
    through the backend of ``codegen``, kernels on the interpreter device."""
    from npu_fixes.tools import corpus, interpret, sweep

    order = sweep.ProgramOrder()
    out = {}
    with interpret.cpu_device(codegen, order) as launches:
        for sample_id in sample_ids:
            record = sweep.run_sample(corpus.sample(sample_id), launches, order)
            del launches[:]
            out[sample_id] = [record["outcome"], record.get("detail", "")]
    return out


def interpreted_with_npu_fixes(name: str, location: str, run_all) -> dict:
    """``run_all(codegen)`` through the backend at ``location``, its kernels on the
    interpreter device, without and with npu_fixes (:func:`with_npu_fixes` for fix ``name``)."""
    codegen = host_load(location).modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(codegen)
    return with_npu_fixes(name, codegen, lambda: run_all(codegen))


def with_npu_fixes(name: str, codegen, battery) -> dict:
    """Fix ``name``'s probe (``[defective, detail]``) and ``battery()`` as built (the program
    started with ``NPU_FIXES=0``), then with ``npu_fixes.apply()``: the fix's state,
    ``battery()`` again, the probe, and whether ``npu_fixes.undo()`` brings the defect back."""
    import npu_fixes

    fix = npu_fixes.registry().fixes[name]
    probed = sys.modules.get(fix.module, codegen)  # the fix's own module, host-loaded
    first = fix.probe(probed)
    result = {"probe_before": [first.defective, first.detail], "before": battery()}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["state"] = {r.name: r.state.value for r in npu_fixes.status()}[name]
    result["after"] = battery()
    result["probe_after"] = fix.probe(probed).defective
    result["undone"] = npu_fixes.undo() > 0 and fix.probe(probed).defective
    return result
