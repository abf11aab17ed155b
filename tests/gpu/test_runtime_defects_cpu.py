"""The kernels and checks of ``tests/gpu/runtime_defects.py`` on CPU, before a GPU run:
(a) and (b) in Triton's interpreter (sequential programs), (c) with CPU Inductor."""

from __future__ import annotations

import pytest

from tests.conftest import run_program

INTERPRET = {"TRITON_INTERPRET": "1"}


def test_scalar_kernel_piles_up_every_update_when_programs_run_in_turn():
    res = run_program("runtime_defects_cpu", "scalar_races", env=INTERPRET)
    qa_old, qa_new, sum_old, sum_new = res
    # The interpreter runs the 48 programs one after the other: each one's update lands on
    # the previous one's. For the QA loss that halves the gap 48 times, past float32.
    assert qa_old["wrong"] == 2 and qa_old["worst"] > 20
    assert qa_new == {"kernel": "qa", "programs": 1, "launches": 2, "wrong": 0, "worst": 1.0}
    assert sum_old == {"kernel": "sum", "programs": 48, "launches": 2, "wrong": 2, "worst": 48.0}
    assert sum_new == {"kernel": "sum", "programs": 1, "launches": 2, "wrong": 0, "worst": 1.0}


@pytest.fixture(scope="module")
def downcast_rows():
    return run_program("runtime_defects_cpu", "downcast_rows", env=INTERPRET)


@pytest.mark.parametrize("name", ["in_out_row", "pure_output_row", "transposed_row", "gapped_row",
                                  "overflow_row"])
def test_downcast_check_in_interpreter(downcast_rows, name):
    assert downcast_rows[name]["ok"], downcast_rows[name]


def test_capture_gate_keeps_eager_rng_sequence_on_cpu():
    res = run_program("runtime_defects_cpu", "capture_run")
    assert "aten.bernoulli_.float" in res["gated"] and res["gated"] == res["stock"], res
    assert res["difference"] is None, res


def test_the_captured_kernel_is_what_the_state_generates(genuine, tmp_path):
    """``tests/gpu/genuine_kernels.json`` (replayed on the GPU) is what 95c9094da's backend
    generates for the step counter today: captured again, the same kernel, grid and
    arguments, and 40 counted when the interpreter runs the programs in turn."""
    import json

    from tests.conftest import REPO, run_python

    out = tmp_path / "kernels.json"
    run_python(f"from tests.gpu import capture_kernels as c; "
               f"raise SystemExit(c.main(['--torch-npu', {str(genuine('95c9094da'))!r}, '--out', {str(out)!r}]))",
               env={"NPU_FIXES": "0"})
    captured = json.loads(out.read_text())["launches"]
    committed = json.loads((REPO / "tests" / "gpu" / "genuine_kernels.json").read_text())["launches"]
    assert captured == committed
    assert [(k["grid"], k["result_in_interpreter"]) for k in captured] == [([40, 1, 1], 40.0)]
