"""Programs of tests/fixes/test_infinite_integer_fill.py: min and max reductions of integer
values converted to float (and of floats converted to integers and back), compiled through a
state's backend, kernels run in Triton's interpreter, compared with eager."""

from __future__ import annotations

import re

from tests.programs import against_eager, interpreted, interpreted_with_npu_fixes, main

NAME = "infinite-integer-fill"


def run_all(codegen) -> dict:
    """Each program: True where it equals eager, else the error; and the ``other=`` fills of
    the kernels of the int32 ``amax`` and the float ``amin`` programs (``<label>-fills``)."""
    import torch

    torch.manual_seed(0)
    values = torch.randint(1, 5, (4, 1000))
    programs = {
        "int32-amin": (lambda n: n.float().amin(-1), (values.int(),)),
        "int64-amin": (lambda n: n.float().amin(-1), (values,)),
        "int8-amin": (lambda n: n.float().amin(-1), (values.to(torch.int8),)),
        "int32-negated-amax": (lambda n: (-n.float()).amax(-1), (values.int(),)),
        "int64-negated-amax": (lambda n: (-n.float()).amax(-1), (values,)),
        "int8-negated-amax": (lambda n: (-n.float()).amax(-1), (values.to(torch.int8),)),
        "float-amin": (lambda x: x.amin(-1), (values.float() + 0.5,)),
        "float-to-int-amin": (lambda x: x.int().float().amin(-1), (values.float() + 0.5,)),
    }
    out = against_eager(codegen, programs, lambda got, want: bool(torch.equal(got, want)))
    for label in ("int32-negated-amax", "float-amin"):
        fn, args = programs[label]
        run = interpreted(codegen, fn, *args)
        out[f"{label}-fills"] = sorted({fill for launch in run.get("launches", [])
                                        for fill in re.findall(r"other=(float\(.[-a-z]+.\)|[-\d.]+)", launch.source)})
    return out


def reductions(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


if __name__ == "__main__":
    main(globals())
