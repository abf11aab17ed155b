"""Programs of tests/fixes/test_launch_grid.py (and test_scalar_reduction_grid.py, which
runs the same battery)."""

from __future__ import annotations

import itertools
import os

from tests.programs import host_load, main

XNUMELS = (0, 1, 2, 7, 47, 48, 49, 100, 1000, 10**6)
KERNELS = {  # arg names, constexpr positions
    "pointwise": (["in_out_ptr0", "xnumel", "XBLOCK"], [2]),
    "pointwise-2in": (["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"], [3]),
    "reduction": (["in_ptr0", "out_ptr0", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"], [4, 5]),
    "no-xnumel": (["in_out_ptr0", "ks0", "XBLOCK"], [2]),
    "rsplit": (["in_ptr0", "ws_ptr", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"], [4, 5]),
}
RECIPE = {"lines": ["nb = (xnumel + XBLOCK - 1) // XBLOCK"], "factors": ["nb"]}


def build(m, kernel, meta, xblock, cores, a5=False):
    """A real launcher of ``m`` (the host-loaded npu_triton_heuristics) from a stand-in
    binary, with the runner that records the grids it is asked for."""
    from unittest import mock

    from npu_fixes.shim.stand_in_kernel import stand_in_binary, stand_in_result

    names, constexprs = KERNELS[kernel]
    binary = stand_in_binary(names, constexprs)
    consts = {n: (xblock if n == "XBLOCK" else 4) for i, n in enumerate(names) if i in constexprs}
    result = stand_in_result(m, binary, consts, meta)
    with mock.patch.object(m, "get_npu_vector_core_count", return_value=cores), \
         mock.patch.object(m.device_props, "is_a5", return_value=a5):
        launcher = result.make_launcher()
    assert result.inductor_meta is meta
    return launcher, binary.run


def fingerprint(launcher):
    """The launcher's type name and a hash of its code."""
    import hashlib

    code = launcher.__code__
    parts = (code.co_code, code.co_consts, code.co_names, code.co_varnames,
             tuple(type(d).__name__ for d in launcher.__defaults__ or ()))
    return [type(launcher).__name__, hashlib.sha256(repr(parts).encode()).hexdigest()]


def run_case(m, kernel, meta, xblock, cores, a5=False):
    """One launcher launched over every ``XNUMELS`` value: the grids and its fingerprint."""
    import inspect

    launcher, runner = build(m, kernel, meta, xblock, cores, a5)
    params = [p for p in inspect.signature(launcher).parameters if p != "stream"]
    params = params[: params.index("runner")] if "runner" in params else params
    for xnumel in XNUMELS:
        launcher(*[xnumel if "numel" in p else 3 if p.startswith("ks") else None for p in params], None)
    return {"grids": runner.grids, "code": fingerprint(launcher)}


def battery(m):
    """Real launchers from stand-in binaries over metadata x kernel shape x XBLOCK x core
    count, each launched over several xnumel values: case -> grids and code fingerprint."""
    out = {}
    metas = {}
    for gt, nodes in itertools.product(("Grid1D", "Grid2D", "Grid3D", None), (0, 1, 2, None)):
        meta = {} if gt is None else {"grid_type": gt}
        if nodes is not None:
            meta["npu_num_x_nodes"] = nodes
        metas[f"{gt}/{nodes}"] = meta
    metas["1D/0/no-linearize"] = {"grid_type": "Grid1D", "npu_num_x_nodes": 0, "npu_linearize": False}
    metas["1D/1/no-linearize"] = {"grid_type": "Grid1D", "npu_num_x_nodes": 1, "npu_linearize": False}
    metas["1D/0/rsplit-partial"] = {"grid_type": "Grid1D", "npu_num_x_nodes": 0, "npu_rsplit_partial": True}
    metas["1D/0/store-cubin"] = {"grid_type": "Grid1D", "npu_num_x_nodes": 0, "store_cubin": True}
    metas["1D/0/extra-arg"] = {"grid_type": "Grid1D", "npu_num_x_nodes": 0, "extra_launcher_args": ["ks9"]}
    for (label, meta), kernel, xblock, cores in itertools.product(
            metas.items(), KERNELS, (1, 8, 64), (40, 48)):
        out[f"{label}|{kernel}|{xblock}|{cores}"] = run_case(m, kernel, meta, xblock, cores)
    for nodes, xblock, cores in itertools.product((0, 1), (1, 8, 64), (40, 48)):
        # xnumel only among the extra launcher args (with it in the kernel too it would repeat)
        meta = {"grid_type": "Grid1D", "npu_num_x_nodes": nodes, "extra_launcher_args": ["xnumel"]}
        out[f"1D/{nodes}/extra-xnumel|no-xnumel|{xblock}|{cores}"] = run_case(m, "no-xnumel", meta, xblock, cores)
    for a5, nodes in itertools.product((False, True), (0, 1)):
        meta = {"grid_type": "Grid1D", "npu_num_x_nodes": nodes, "npu_dispatch_recipe": RECIPE}
        out[f"recipe/a5={a5}/{nodes}"] = run_case(m, "pointwise", meta, 8, 48, a5)
    return out


def battery_then_apply(location: str) -> tuple:
    """Loaded with NPU_FIXES=0 (``original`` is the untouched target): the probe and the
    battery, then npu_fixes armed and applied. Returns the module, ``original`` and the
    result so far."""
    m = host_load(location).modules["npu_triton_heuristics"]
    from npu_fixes.fixes import launch_grid as fix

    cls = m.NPUTritonCompileResult
    original = cls.__dict__["make_launcher"]
    result = {"probe_before": fix.probe(m).defective, "battery": battery(m)}
    os.environ.pop("NPU_FIXES", None)
    import npu_fixes

    npu_fixes.apply()
    result["state"] = {r.name: r for r in npu_fixes.status()}["launch-grid"].state.value
    result["identical"] = cls.__dict__["make_launcher"] is original
    result["probe_after"] = fix.probe(m).defective
    return m, original, result


def applied(location: str, again: bool = False) -> dict:
    """The battery before npu_fixes applies, the fix's state and probe after; with
    ``again``, the battery once more after."""
    m, _, result = battery_then_apply(location)
    if again:
        result["battery_after"] = battery(m)
    return result


def prefix(location: str) -> dict:
    """The pre-fix copy before and after npu_fixes applies; a make_launcher failing half-way
    still gives the caller its own metadata object back; then undone."""
    import types

    m, original, result = battery_then_apply(location)
    import npu_fixes

    cls = m.NPUTritonCompileResult
    result["battery_after"] = battery(m)
    meta = {"grid_type": "Grid1D", "npu_num_x_nodes": 0}
    broken = cls(types.SimpleNamespace(src=types.SimpleNamespace(fn=types.SimpleNamespace(
        arg_names=["in_out_ptr0", "xnumel", "XBLOCK"], constexprs=[2]))), None, {}, meta)
    try:
        broken.make_launcher()
    except AttributeError:
        result["meta_after_error"] = [broken.inductor_meta is meta,
                                      meta == {"grid_type": "Grid1D", "npu_num_x_nodes": 0}]
    result["undo"] = npu_fixes.undo()
    result["restored"] = cls.__dict__["make_launcher"] is original
    return result


def imported_after_load(location: str) -> dict:
    """npu_fixes imported (armed) after the load: the fix's state, and the grids of a
    zero-node Grid1D launcher launched three times with xnumel=1 on 48 cores."""
    m = host_load(location).modules["npu_triton_heuristics"]
    from unittest import mock

    import npu_fixes
    from npu_fixes.fixes import launch_grid as fix
    from npu_fixes.shim.stand_in_kernel import stand_in_result

    result = {"state": {r.name: r for r in npu_fixes.status()}["launch-grid"].state.value}
    meta = {"grid_type": "Grid1D", "npu_num_x_nodes": 0, "mutated_arg_names": ["in_out_ptr0"]}
    r = stand_in_result(m, fix.scalar_kernel(), {"XBLOCK": 1}, meta)
    runner = r.kernel.run
    with mock.patch.object(m, "get_npu_vector_core_count", return_value=48):
        launcher = r.make_launcher()
    for _ in range(3):
        launcher(None, 1, None)
    result["grids"] = runner.grids
    return result


if __name__ == "__main__":
    main(globals())
