"""Programs of tests/fixes/test_alias_size_args.py: ``torch.masked`` std and var backward under
``dynamic=True`` (OpInfo samples of the sweep's corpus) compiled through a state's backend,
kernels run in Triton's interpreter, judged against eager as ``npu-fixes sweep`` judges them."""

from __future__ import annotations

from tests.programs import host_load, interpreted_with_npu_fixes, judged_by_the_sweep, main

NAME = "alias-size-args"
SAMPLES = ("opinfo:masked.std:-:float32:bwd:dynamic:4", "opinfo:masked.var:-:float32:bwd:dynamic:4",
           "opinfo:masked.std:-:float32:bwd:dynamic:2", "opinfo:masked.std:-:float32:bwd:static:4")


def masked_backward(location: str) -> dict:
    """The samples through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, lambda codegen: judged_by_the_sweep(codegen, SAMPLES))


def probe_only(location: str) -> list:
    """The fix's probe on the backend at ``location``: ``[defective, detail]``."""
    from npu_fixes.fixes import alias_size_args as fix

    found = fix.probe(host_load(location).modules["codegen.triton"])
    return [found.defective, found.detail]


if __name__ == "__main__":
    main(globals())
