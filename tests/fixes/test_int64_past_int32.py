"""int64-past-int32 (guard): int64 programs at every genuine commit and the 2.13.0 and 2.14.0
wheels, kernels run in Triton's interpreter, against eager; the guard's layer on a recording
launcher (tests/programs/int64_past_int32.py)."""

from __future__ import annotations

import re
import weakref
from types import SimpleNamespace

import pytest
import torch

from npu_fixes.fixes import int64_past_int32 as fix
from npu_fixes.fixes.shared.narrowing import Role
from tests.conftest import run_at_states, run_program
from tests.genuine_states import COMMITS

STATES = (*COMMITS, "2.13.0", "2.14.0")


@pytest.fixture(scope="module")
def runs(genuine) -> dict[str, dict]:
    return run_at_states(genuine, STATES, "int64_past_int32", "guarded")


def test_only_int64_arguments_the_kernel_reads_are_checked():
    plan = [(0, "in_ptr0", torch.int64, torch.int32, Role.INPUT),
            (1, "in_out_ptr0", torch.int64, torch.int32, Role.IN_OUT),
            (2, "in_ptr1", torch.int64, torch.int32, Role.IN_OUT),  # a mutated graph input
            (3, "out_ptr0", torch.int64, torch.int32, Role.OUTPUT),
            (4, "in_ptr2", torch.float64, torch.float32, Role.INPUT),
            (5, "ws_ptr", torch.int64, torch.int32, Role.INPUT)]  # a workspace the kernel writes first
    assert fix.checked_arguments(plan) == [(0, "in_ptr0")]


def test_check_passes_int32_range_and_names_the_argument_past_it():
    """On a CPU the watch checks at once."""
    info = torch.iinfo(torch.int32)
    watch = fix.BoundsWatch()
    watch.submit("k", [("in_ptr0", torch.tensor([info.min, info.max])), ("in_ptr1", torch.tensor([], dtype=torch.long))])
    watch.submit("k", [])
    for bad in ([info.max + 1], [0, info.min - 1], [2**62]):
        with pytest.raises(fix.Int64PastInt32, match=r"^k: int64 argument 'in_ptr1' holds values in") as exc:
            watch.submit("k", [("in_ptr0", torch.tensor([1, 2])), ("in_ptr1", torch.tensor(bad))])
        assert isinstance(exc.value, OverflowError) and str(max(bad, key=abs)) in str(exc.value)
        assert "NPU_FIXES_DISABLE=int64-past-int32" in str(exc.value)


def _guarded(watch: fix.BoundsWatch) -> tuple[list, object]:
    """A recording launcher of one int64 input behind the guard's layer with ``watch``."""
    launched: list = []

    def launcher(in_ptr0, xnumel, stream=None):
        launched.append(in_ptr0)

    return launched, fix.checking(launcher, ["in_ptr0", "xnumel"], [(0, "in_ptr0")], "k", weakref.WeakSet(), watch)


def test_each_input_is_checked_once_while_it_stays_as_it_is(monkeypatch):
    checked = []
    real = fix._bounds
    monkeypatch.setattr(fix, "_bounds", lambda named: checked.append([n for n, _ in named]) or real(named))
    launched, launch = _guarded(fix.BoundsWatch())
    labels = torch.arange(8)
    for _ in range(3):
        launch(labels, 8)
    assert len(launched) == 3 and len(checked) == 1
    labels.add_(2**31)  # an in-place write: checked again, and past int32
    with pytest.raises(fix.Int64PastInt32, match=r"^k: int64 argument 'in_ptr0' holds values in \[2147483648, "):
        launch(labels, 8)
    launch(torch.arange(8), 8)  # another tensor
    assert len(checked) == 3 and len(launched) == 4


class _Event:
    """A device's event, done only when the test says so."""

    def __init__(self) -> None:
        self.done, self.waited = False, False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.waited = self.done = True


def test_on_a_device_the_launch_does_not_wait_and_a_later_one_reports(monkeypatch):
    """A stand-in device (its bounds "on the device", its events done when the test says): the
    launch with a value past int32 goes ahead, the next launches too until its check is done,
    then the first launch after raises naming its kernel and argument; past the limit a launch
    waits for the oldest check; settle() waits for every one."""
    real = fix._bounds
    monkeypatch.setattr(fix, "_bounds", lambda named: SimpleNamespace(device=SimpleNamespace(type="npu"),
                                                                      values=real(named)))
    events: list[_Event] = []
    watch = fix.BoundsWatch(limit=3)
    watch._start = lambda bounds: (events.append(_Event()) or events[-1], bounds.values)
    launched, launch = _guarded(watch)
    launch(torch.tensor([2**31, 1]), 2)  # past int32: launched, its check pending
    launch(torch.tensor([1]), 1)
    assert len(launched) == 2 and len(watch.pending) == 2 and not any(e.waited for e in events)
    events[0].done = True
    with pytest.raises(fix.Int64PastInt32, match=r"^k: int64 argument 'in_ptr0' holds values in \[1, 2147483648\]"):
        launch(torch.tensor([3]), 1)
    assert len(launched) == 2 and len(watch.pending) == 1  # that launch stopped before its own check
    for value in (4, 5, 6):  # four pending checks, none done: the next launch waits for the oldest
        launch(torch.tensor([value]), 1)
    assert len(watch.pending) == 4 and not any(e.waited for e in events[1:])
    launch(torch.tensor([7]), 1)
    assert [e.waited for e in events] == [True, True, False, False, False, False] and len(watch.pending) == 4
    watch.settle()
    assert not watch.pending and all(e.waited for e in events)


@pytest.mark.parametrize("state", STATES)
def test_a_value_past_int32_is_cut_as_built_and_stops_the_launch_with_npu_fixes(runs, state):
    res = runs[state]
    assert res["probe_before"][0] is True and "reached the kernel as [-2147483641]" in res["probe_before"][1]
    assert res["state"] == "guarded" and res["probe_after"] is False and res["undone"] is True, res
    assert res["before"]["past-int32"] == [1, 4, 1]  # eager: [2**40 + 1, 4, -2**35 + 1]
    assert re.match(r"Int64PastInt32: triton_\w+: int64 argument 'in_ptr0' holds values in "
                    r"\[-34359738368, 1099511627776\], past int32's", res["after"]["past-int32"]), res["after"]
    for program in ("in-range", "written-only"):  # left as built: equal to eager
        assert res["before"][program] is True and res["after"][program] is True, program


def test_the_layer_checks_inputs_alone_outside_capture(genuine):
    res = run_program("int64_past_int32", "layer", env={"NPU_FIXES": "0"}, location=genuine("bafc50684"))
    assert res["in_ptr0"].startswith("triton kernel: int64 argument 'in_ptr0' holds values in [2147483648, "), res
    # What the kernel writes is not checked: an in/out buffer, a mutated graph input, a pure output.
    assert res["in_out_ptr0"][0] == [5] and res["in_ptr1"][:2] == [[5], [5]] and res["out_ptr0"][:3] == [[5]] * 3
    assert res["none"][:3] == [[5], [5], [5]]
    # A buffer the compiled code allocated for itself is not checked (Inductor's circular pad reads
    # one before anything writes it): cut, no error.
    assert res["allocated"][0] == [-2147483648]
    assert res["capturing"][:3] == [[-2147483648]] * 3  # no synchronisation during capture: cut


@pytest.mark.gpu
def test_on_a_gpu_the_host_runs_ahead_and_a_value_past_int32_is_still_caught():
    """The guard over the downcast wrapper and a real Triton kernel on a CUDA GPU, the device
    kept busy for about a second: 50 launches, each with a new int64 input (each checked), the
    last holding 2**31, return to the host long before the device is done, with no error yet;
    the watch reports the kernel and argument once the device has caught up."""
    import time

    from npu_fixes.fixes.boundary_downcast import wrap_launcher
    from npu_fixes.fixes.shared.narrowing import boundary_plan
    from tests.gpu import runtime_defects as rd

    io, in0, cond = rd._inputs("cuda", (4, 96))
    launcher = rd.compiled_launcher(io, in0)
    plan = boundary_plan(rd.DOWNCAST_MODULE._DTYPE_DOWNCAST_MAP, launcher._npu_def_args, rd.DOWNCAST_ARGS, rd.MUTATED)
    watch = fix.BoundsWatch()
    launch = fix.checking(wrap_launcher(rd.DOWNCAST_MODULE, launcher, rd.DOWNCAST_ARGS, rd.MUTATED),
                          launcher._npu_def_args, fix.checked_arguments(plan), "halve_where_kernel",
                          weakref.WeakSet(), watch)
    out = torch.empty_like(io)
    inputs = [in0.clone() for _ in range(50)]
    inputs[-1][1, 7] = 2**31
    launch(io, in0, cond, out, io.numel())  # compiled, warm
    watch.settle()
    torch.cuda.synchronize()
    busy = torch.cuda.Event()
    torch.cuda._sleep(2_000_000_000)  # about a second of GPU cycles
    busy.record()
    start = time.perf_counter()
    for tensor in inputs:
        launch(io, tensor, cond, out, io.numel())
    host = time.perf_counter() - start
    assert not busy.query() and len(watch.pending) == 50, "the host waited for the device"
    with pytest.raises(fix.Int64PastInt32, match=r"^halve_where_kernel: int64 argument 'in_ptr0' holds values"):
        watch.settle()
    assert host < 0.2, host
