"""Programs of tests/fixes/test_scalar_reduction_grid.py."""

from __future__ import annotations

from tests.programs import host_load, main
from tests.programs.launch_grid import battery


def probed(location: str, stacked: bool = False) -> dict:
    """The probe; where it says needed, install with a fresh Patcher (as the registry
    would) and probe again; whether make_launcher is still the original object. With
    ``stacked`` (8bfbb9ed1 and the reference), launch-grid's probe and battery, unpatched;
    at a defective state both fixes are then installed in both orders, each undone on its
    own."""
    m = host_load(location).modules["npu_triton_heuristics"]
    from npu_fixes.fixes import scalar_reduction_grid as srg
    from npu_fixes.shim.patcher import Patcher

    cls = m.NPUTritonCompileResult
    result = {}
    first = cls.__dict__["make_launcher"]
    before = srg.probe(m)
    result["probe"] = [before.defective, before.detail]
    if before.defective:
        patcher = Patcher()
        srg.FIX.install(m, patcher)
        after = srg.probe(m)
        result["probe_after"] = [after.defective, after.detail]
        result["undo"] = patcher.restore()
    result["untouched"] = cls.__dict__["make_launcher"] is first
    if not stacked:
        return result
    from npu_fixes.fixes import launch_grid as lg

    original = cls.__dict__["make_launcher"]
    result["probe_before"] = lg.probe(m).defective
    result["battery"] = battery(m)

    def probes():
        return [lg.probe(m).defective, srg.probe(m).defective]

    if srg.probe(m).defective:
        for one, two, label in ((lg, srg, "lg_first"), (srg, lg, "srg_first")):
            p1, p2 = Patcher(), Patcher()
            one.FIX.install(m, p1)
            two.FIX.install(m, p2)
            result[label] = {"battery": battery(m), "probes": probes()}
            p1.restore()  # the one below goes first: the other must keep working alone
            result[label]["alone"] = {"battery": battery(m), "probes": probes()}
            p2.restore()
            result[label]["restored"] = cls.__dict__["make_launcher"] is original
    return result


if __name__ == "__main__":
    main(globals())
