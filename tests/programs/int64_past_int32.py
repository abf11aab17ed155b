"""Programs of tests/fixes/test_int64_past_int32.py: int64 programs compiled through a state's
backend, kernels run in Triton's interpreter, compared with eager, as built and with npu_fixes;
and the guard's layer on a recording launcher."""

from __future__ import annotations

from tests.programs import against_eager, host_load, interpreted, interpreted_with_npu_fixes, main

NAME = "int64-past-int32"
PAST = [2**40, 3, -(2**35)]


def _plus_one(x):
    return x + 1


def _twice_plus_one(x):
    return x * 2 + 1


def _copy_into(out, y):
    out.copy_(y + 1)
    return out


def written_only(codegen) -> object:
    """A graph input that the kernel only writes, holding values past int32 before: True where
    it ends as eager leaves it, else what the compiled run gave."""
    import torch

    def fresh():
        return torch.full((4,), 2**40, dtype=torch.int64), torch.arange(4)

    out, y = fresh()
    run = interpreted(codegen, _copy_into, out, y)
    if "error" in run:
        return run["error"]
    want, y = fresh()
    _copy_into(want, y)
    return True if torch.equal(out, want) else out.tolist()


def run_all(codegen) -> dict:
    import torch

    def judge(actual, expected):
        return True if torch.equal(actual, expected) else actual.tolist()

    out = against_eager(codegen, {"past-int32": (_plus_one, (torch.tensor(PAST),)),
                                  "in-range": (_twice_plus_one, (torch.tensor([5, -7, 2**20]),))}, judge)
    out["written-only"] = written_only(codegen)
    return out


def guarded(location: str) -> dict:
    """The programs through the backend at ``location`` without and with npu_fixes."""
    return interpreted_with_npu_fixes(NAME, location, run_all)


def layer(location: str) -> dict:
    """With npu_fixes applied: a recording launcher wrapped by the live wrapper, launched with
    an int64 input, an ``in_out_ptr``, a mutated ``in_ptr`` and a pure output each holding
    ``2**31`` in turn, an input allocated as compiled code allocates its buffers holding it, and
    once during graph capture: the error's first words, or what the kernel saw."""
    import os
    from types import SimpleNamespace

    import torch

    m = host_load(location).modules["npu_triton_heuristics"]
    del os.environ["NPU_FIXES"]
    import npu_fixes

    npu_fixes.apply()
    names = ["in_ptr0", "in_out_ptr0", "in_ptr1", "out_ptr0", "xnumel"]
    seen = []

    def launcher(*args, stream=None):
        seen.append([a.tolist() if isinstance(a, torch.Tensor) else a for a in args])

    launcher._npu_def_args = names
    wrapped = m._wrap_launcher_with_downcast(launcher, dict.fromkeys(names[:4], "*i64"), ["in_ptr1"])

    def launch(big: str | None) -> object:
        args = [torch.tensor([2**31 if name == big else 5]) for name in names[:4]]
        seen.clear()
        try:
            wrapped(*args, 1, stream=None)
        except OverflowError as exc:
            return str(exc)
        return seen[0][:4]

    out = {name: launch(name) for name in names[:4]}
    out["none"] = launch(None)
    buffer = torch._C._dynamo.guards._empty_strided_cpu((1,), (1,), torch.int64)  # as compiled code allocates
    buffer.fill_(2**31)
    seen.clear()
    wrapped(buffer, *[torch.tensor([5])] * 3, 1, stream=None)
    out["allocated"] = seen[0][:4]
    npu = getattr(torch, "npu", None)
    torch.npu = SimpleNamespace(is_current_stream_capturing=lambda: True)
    capturing = m._wrap_launcher_with_downcast(launcher, dict.fromkeys(names[:4], "*i64"), ["in_ptr1"])
    if npu is None:
        del torch.npu
    else:
        torch.npu = npu
    seen.clear()
    capturing(*[torch.tensor([2**31])] * 4, 1, stream=None)
    out["capturing"] = seen[0][:4]
    return out


if __name__ == "__main__":
    main(globals())
