"""`npu-fixes accuracy`: a CPU smoke run, and proof that it catches a wrong compile."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import cli, run_program, run_python, wheel_path
from tests.genuine_states import COMMITS

#: The model-level subset: tests that train a whole model through a backend. They run in a
#: row of their own (``nox -s model``), not in ``none``.
model_level = pytest.mark.model

#: What the Hugging Face models of these tests import, imported once by the fork server.
TRANSFORMERS = ("transformers", "transformers.models.bert.modeling_bert",
                "transformers.models.distilbert.modeling_distilbert")


@model_level
def test_cli_smoke_two_tiny_models():
    proc = cli("accuracy", "--models", "BERT_pytorch,BertForMaskedLM", "--iterations", "2", "--json",
               preload=TRANSFORMERS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["tolerance"] == 1e-2 and report["iterations"] == 2
    assert [(m["name"], m["status"], m["iterations"]) for m in report["models"]] == [
        ("BERT_pytorch", "pass_accuracy", 2), ("BertForMaskedLM", "pass_accuracy", 2)]
    assert all(0 <= m["max_error"] < 1e-3 for m in report["models"])


def interpreted_run(genuine, where: str, fixes: str, model: str, iterations: int = 1):
    """``npu-fixes accuracy --interpret --json`` of ``model`` through ``where`` (a genuine
    commit or a pinned wheel version) with ``fixes``: "all", "none" (``--without-fixes``) or
    "all-but-NAME[,NAME...]" (those switched off). Returns the process and the model's record."""
    location = str(genuine(where)) if where in COMMITS else str(wheel_path(where))
    flag = ["--without-fixes"] if fixes == "none" else []
    env = {"NPU_FIXES_DISABLE": fixes.removeprefix("all-but-")} if fixes.startswith("all-but-") else None
    proc = cli("accuracy", "--interpret", "--torch-npu", location, *flag, "--models", model,
               "--iterations", str(iterations), "--json", env=env, preload=TRANSFORMERS)
    (record,) = json.loads(proc.stdout)["models"]
    return proc, record


#: The error DistilBERT's compile stops with where ``control_deps`` keeps the registration's
#: fallback lowering (dropout with ``fallback_random=True``, as the accuracy run sets it).
CONTROL_DEPS = "InductorError: LoweringException: AttributeError: 'Subgraph' object has no attribute 'dtype'"


@model_level
@pytest.mark.parametrize("fixes", ["all", "none", "all-but-control-deps-lowering"])
def test_interpret_runs_a_model_through_a_genuine_state(genuine, fixes):
    """DistilBERT trained one step on CPU through 8bfbb9ed1's backend, its kernels in
    Triton's interpreter. With npu_fixes it equals eager and the record names the fixes
    applied to that code; without, or with control-deps-lowering alone switched off, its
    compile stops in lowering (the seed symptoms of this model need 4 x 512 tokens)."""
    proc, model = interpreted_run(genuine, "8bfbb9ed1", fixes, "DistilBertForMaskedLM")
    report = json.loads(proc.stdout)
    assert report["interpret"] is True and report["with_fixes"] is (fixes != "none")
    if fixes == "all":
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert model["status"] == "pass_accuracy" and model["max_error"] < 1e-3
        assert {"control-deps-lowering", "dualview-fold", "launch-grid"} <= set(model["fixes"])
    else:
        assert proc.returncode == 1 and model["status"] == "fail_accuracy"
        assert model["error"] == CONTROL_DEPS and "control-deps-lowering" not in model["fixes"]
        assert (model["fixes"] == []) is (fixes == "none")
    assert proc.stderr.strip().splitlines()[-1].startswith(f"[1/1] DistilBertForMaskedLM: {model['status']}")


#: model -> the int64 tensor that an in/out buffer handed to the kernel uninitialised spoils
IN_OUT_INT64 = {"fastNLP_seq_len": "pred.beyond_shortest", "BatchNormTagger": "buffer.norm.num_batches_tracked"}


@model_level
@pytest.mark.parametrize("model, state, fixes, passed", [
    ("fastNLP_seq_len", "8bfbb9ed1", "all", True), ("fastNLP_seq_len", "8bfbb9ed1", "none", False),
    ("fastNLP_seq_len", "8bfbb9ed1", "all-but-boundary-downcast", False),
    ("fastNLP_seq_len", "5ff81d9c5", "none", True),
    ("BatchNormTagger", "8bfbb9ed1", "all", True), ("BatchNormTagger", "95c9094da", "none", False),
    ("BatchNormTagger", "5ff81d9c5", "none", True),
])
def test_interpret_shows_boundary_downcast_at_model_level(genuine, model, state, fixes, passed):
    """Two steps through a state's backend of models with an int64 tensor computed in place:
    fastNLP_Bert's pattern (an integer from ``seq_len`` of 4 x 474 words) and BatchNorm's
    counter ``num_batches_tracked``. Before 5ff81d9c5 the in/out buffer reaches the kernel
    uninitialised, and the tensor is wrong (whatever memory held, plus the step), unless
    boundary-downcast is on; 5ff81d9c5, where upstream fixed it, computes it as built."""
    proc, record = interpreted_run(genuine, state, fixes, model, iterations=2)
    assert proc.returncode == (0 if passed else 1), proc.stdout + proc.stderr
    assert record["passed"] is passed and record["error"] is None
    if not passed:
        assert record["failure"]["tensor"] == IN_OUT_INT64[model], record
    assert ("boundary-downcast" in record["fixes"]) is (fixes == "all")


@model_level
@pytest.mark.parametrize("state, fixes, passed", [
    ("95c9094da", "none", False), ("95c9094da", "all", True), ("f8802037a", "none", False),
    ("8bfbb9ed1", "all-but-launch-grid", False), ("5ff81d9c5", "none", True),
])
def test_interpret_shows_launch_grid_at_model_level(genuine, state, fixes, passed):
    """Two steps of a tagger that counts its steps in a buffer: the count is a one-element
    kernel that reads what it writes. Where launch-grid's defect is, the launcher gives it
    one program per vector core, and each adds its 1: 40 steps counted at the first (the
    interpreter runs the programs one after another; on hardware they race). 5ff81d9c5, where
    upstream fixed it, counts right as built. (8bfbb9ed1 as built stops earlier, at another
    defect's kernel build.)"""
    proc, record = interpreted_run(genuine, state, fixes, "RunningLossTagger", iterations=2)
    assert proc.returncode == (0 if passed else 1), proc.stdout + proc.stderr
    assert record["passed"] is passed and record["error"] is None
    if not passed:
        assert record["failure"] == {"iteration": 1, "tensor": "buffer.steps", "max_error": 39.0}, record
    assert ("launch-grid" in record["fixes"]) is (fixes == "all")


@model_level
@pytest.mark.parametrize("where, fixes, passed", [
    ("bafc50684", "all", True), ("bafc50684", "all-but-rsplit-nested-range", False), ("2.13.0", "none", False),
])
def test_interpret_shows_rsplit_nested_range_at_model_level(genuine, where, fixes, passed):
    """One step of a tagger whose bias-free norm is followed by a gain per position (4 x 512
    words): the norm weight's gradient is an OUTER sum over two reduction ranges, split
    across 40 cores by the newest public state and by the published wheel alike, each core
    summing all of it (40 times the right value) unless rsplit-nested-range refuses the split."""
    proc, record = interpreted_run(genuine, where, fixes, "PositionGainTagger")
    assert proc.returncode == (0 if passed else 1), proc.stdout + proc.stderr
    assert record["passed"] is passed and record["error"] is None
    if not passed:
        assert record["failure"]["tensor"] == "grad.norm.weight", record
    assert ("rsplit-nested-range" in record["fixes"]) is (fixes == "all")


@model_level
@pytest.mark.parametrize("where, fixes, passed", [
    ("bafc50684", "all", True), ("bafc50684", "all-but-downcast-workspace", False), ("2.13.0", "none", False),
])
def test_interpret_shows_downcast_workspace_at_model_level(genuine, where, fixes, passed):
    """One step of a classifier that reads its sentences' lengths, ``words.ne(0).sum(-1)`` over
    4 x 4096 words: an int64 row sum that the newest public state and the published wheel split
    across 40 cores, whose partials are lost at the int32 boundary unless downcast-workspace
    keeps them (the garbage lengths reach the loss and every gradient; with the guard
    int64-past-int32 on, garbage past int32 stops the combining kernel's launch instead)."""
    proc, record = interpreted_run(genuine, where, fixes, "LengthClassifier")
    assert proc.returncode == (0 if passed else 1), proc.stdout + proc.stderr
    assert record["passed"] is passed
    if record["error"] is not None:  # uninitialised partials past int32: the guard's error
        assert fixes == "all-but-downcast-workspace" and record["error"].startswith("Int64PastInt32: "), record
    elif not passed:
        assert record["failure"]["iteration"] == 1, record
    assert ("downcast-workspace" in record["fixes"]) is (fixes == "all")


#: The reason rng-capture-gate gives a graph it keeps out of NPU graph capture, and upstream's.
OUR_GATE, UPSTREAM_GATE = "(npu_fixes rng-capture-gate)", "has no graph-safe seed/offset ABI"


@model_level
@pytest.mark.parametrize("where, fixes, gate", [
    ("8bfbb9ed1", "none", None), ("8bfbb9ed1", "all", OUR_GATE), ("95c9094da", "all-but-rng-capture-gate", None),
    ("5ff81d9c5", "none", UPSTREAM_GATE), ("2.13.0", "none", UPSTREAM_GATE),
])
def test_interpret_shows_rng_capture_gate_at_model_level(genuine, where, fixes, gate):
    """One step of a tagger whose dropout draws its mask with ``bernoulli_`` (DeBERTa's way).
    Every state lowers the draw as an eager fallback; where rng-capture-gate's defect is, the
    graph holding it is left to NPU graph capture (which then fails; there is no capture on
    CPU, so the observable is the graph's ``disable_cudagraphs_reason``), unless npu_fixes
    marks it; 5ff81d9c5 and the wheel mark it as built. The numbers are right either way."""
    proc, record = interpreted_run(genuine, where, fixes, "MaskDropoutTagger")
    assert proc.returncode == 0 and record["passed"], proc.stdout + proc.stderr
    (graph,) = record["rng_graphs"]
    assert graph["ops"] == ["aten.bernoulli.p"]
    if gate is None:
        assert graph["capture_disabled"] is None
        assert "NPU graph capture would fail: 1 of its graphs call aten.bernoulli.p" in proc.stderr
    else:
        assert gate in graph["capture_disabled"] and "capture would fail" not in proc.stderr
    assert ("rng-capture-gate" in record["fixes"]) is (fixes == "all" and where == "8bfbb9ed1")


@model_level
@pytest.mark.parametrize("where, fixes, passed", [
    ("bafc50684", "none", False), ("bafc50684", "all", True), ("bafc50684", "all-but-min2-propagate-nan", False),
    ("2.13.0", "none", True),
])
def test_interpret_shows_min2_propagate_nan_at_model_level(genuine, where, fixes, passed):
    """One step of a classifier that pools by ``amin`` and ``amax``: at every public commit
    the ``amin`` kernel does not build (the backend's ``min2`` helper passes ``tl.min`` a
    keyword it lacks); with npu_fixes, and in the wheel as built, it equals eager."""
    proc, record = interpreted_run(genuine, where, fixes, "MinPoolClassifier")
    assert proc.returncode == (0 if passed else 1) and record["passed"] is passed, proc.stdout + proc.stderr
    if not passed:
        assert "min() got an unexpected keyword argument" in record["error"] and "propagate_nan" in record["error"]
    assert ("min2-propagate-nan" in record["fixes"]) is (fixes == "all")


#: What the interpreter's bounds check stops rsplit-outer's kernel with: the fused kernel's
#: pointwise output (the gradient copied transposed) stored into the split's workspace.
#: (The kernel's number counts the graph's kernels before it.)
RSPLIT_OUTER = (r"InterpreterError: OutOfBounds\('triton_unk_fused_sum_t_view_\d+: a store outside every buffer "
                r"passed to the kernel \(52 of 416 addresses\)'\)")


@model_level
@pytest.mark.parametrize("state, fixes, passed", [
    ("8bfbb9ed1", "none", False), ("8bfbb9ed1", "all", True), ("8bfbb9ed1", "all-but-rsplit-outer", False),
    ("95c9094da", "none", True),
])
def test_interpret_shows_rsplit_outer_at_model_level(genuine, state, fixes, passed):
    """One step of a tagger at BERT-base width over 4 x 512 words whose backward fuses the
    2048 x 768 gradient's transposed copy into the OUTER sum of its bias, as hf_Bert's did.
    Before 95c9094da the backend splits that kernel across cores all the same, and its
    pointwise store goes where the split puts the sum: past the end of the workspace, which
    the interpreter refuses (on the NPU, a write into whatever lies there). With
    rsplit-outer the split is refused and the step equals eager; 95c9094da refuses it as
    built."""
    proc, record = interpreted_run(genuine, state, fixes, "FeatureMajorTagger")
    assert proc.returncode == (0 if passed else 1) and record["passed"] is passed, proc.stdout + proc.stderr
    if passed:
        assert record["max_error"] < 1e-3
    else:
        assert re.fullmatch(RSPLIT_OUTER, record["error"]), record
    assert ("rsplit-outer" in record["fixes"]) is (fixes == "all")


#: DistilBERT's backward at 4 x 512 tokens where the dual-view fold leaves a look-alike symbol.
DUALVIEW = "InductorError: AssertionError: Unregistered range symbol: r0_1"


@model_level
@pytest.mark.parametrize("fixes", ["none", "all", "all-but-dualview-fold,range-symbol-canon"])
def test_interpret_shows_dualview_fold_at_model_level(genuine, fixes):
    """One step of DistilBERT at the reports' 4 x 512 tokens (one layer, width 32, dropout
    off) through 8bfbb9ed1: as built its backward stops in codegen with hf_DistilBert's
    error; with npu_fixes it equals eager. range-symbol-canon, which puts registered symbols
    into every index, repairs this one too: only with both off does it stop again."""
    proc, record = interpreted_run(genuine, "8bfbb9ed1", fixes, "DistilBertForMaskedLM_4x512")
    if fixes == "all":
        assert proc.returncode == 0 and record["passed"], proc.stdout + proc.stderr
        assert record["max_error"] < 1e-3 and "dualview-fold" in record["fixes"]
    else:
        assert proc.returncode == 1 and record["error"] == DUALVIEW, proc.stdout + proc.stderr
        assert "dualview-fold" not in record["fixes"]


@model_level
def test_interpret_shuffled_programs_leave_a_race_free_model_right(genuine):
    """``--shuffle SEED`` runs each launch's programs in a drawn order (the interpreter's own
    test shows the order change): a model whose kernels have no race stays equal to eager."""
    proc = cli("accuracy", "--interpret", "--torch-npu", str(genuine("5ff81d9c5")), "--shuffle", "3",
               "--models", "BatchNormTagger", "--iterations", "2", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["shuffle"] == 3, proc.stdout + proc.stderr
    assert [m["status"] for m in report["models"]] == ["pass_accuracy"]


def test_a_wrong_compiled_graph_fails_and_names_the_tensor():
    """A backend whose forward outputs are 10% off must fail, naming a prediction."""
    res = run_program("accuracy", "eager_and_wrong")
    good, bad, text = res
    assert good["status"] == "pass_accuracy" and good["max_error"] == 0.0
    assert bad["status"] == "fail_accuracy" and bad["failure"]["iteration"] == 1
    assert bad["failure"]["tensor"].startswith("pred.") and bad["failure"]["max_error"] > 0.01
    assert text.startswith(" (iteration 1: pred.")


def test_compare_reports_first_failing_tensor():
    import torch

    from npu_fixes.tools.accuracy import compare

    ref = {"pred.x": torch.ones(4), "grad.w": torch.ones(3)}
    ref64 = {k: v.double() for k, v in ref.items()}
    assert compare(ref, {k: v.clone() for k, v in ref.items()}, ref64) == (None, 0.0)
    res = {"pred.x": torch.ones(4), "grad.w": torch.tensor([1.0, 1.0, 2.0])}
    assert compare(ref, res, ref64) == ("grad.w", 1.0)
    assert compare(ref, {"pred.x": torch.ones(4)}, ref64)[0] == "grad.w"


@pytest.mark.parametrize("args, message", [
    (["--models", "NoSuchModel"], "unknown model(s) NoSuchModel"),
    (["--iterations", "0"], "--iterations must be at least 1"),
    (["--without-fixes"], "--without-fixes needs --interpret"),
    (["--torch-npu", "x", "--shuffle", "1"], "--torch-npu and --shuffle need --interpret"),
    (["--interpret", "--device", "cuda", "--mode", "reduce-overhead"],
     "--interpret runs on CPU through the given backend: drop --device, --mode"),
    (["--interpret", "--torch-npu", "/no/such/dir", "--models", "BERT_pytorch"],
     "--torch-npu /no/such/dir: /no/such/dir: no such file or directory"),
])
def test_bad_arguments_exit_2(args, message):
    proc = cli("accuracy", *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_compare_keeps_an_earlier_failure_when_a_later_tensor_is_missing():
    import torch

    from npu_fixes.tools.accuracy import compare

    ref = {"pred.x": torch.ones(4), "grad.w": torch.ones(3)}
    ref64 = {k: v.double() for k, v in ref.items()}
    assert compare(ref, {"pred.x": torch.full((4,), 2.0)}, ref64) == ("pred.x", float("inf"))


def _strict_json(text: str):
    """json.loads that rejects NaN/Infinity, which are not JSON."""
    def reject(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=reject)


def test_compare_never_hides_nan_or_inf():
    import math

    import torch

    from npu_fixes.tools.accuracy import compare

    ref = {"pred.x": torch.ones(4), "loss": torch.tensor(1.0)}
    ref64 = {k: v.double() for k, v in ref.items()}
    first, worst = compare(ref, {"pred.x": torch.tensor([1.0, math.nan, 1.0, 1.0]), "loss": torch.tensor(1.5)},
                           ref64)
    assert first == "pred.x" and math.isnan(worst)  # max(0.0, nan) would say 0.0 (then 0.5)
    first, worst = compare(ref, {"pred.x": torch.ones(4), "loss": torch.tensor(math.nan)}, ref64)
    assert first == "loss" and math.isnan(worst)
    both_inf = {"pred.x": torch.ones(4), "loss": torch.tensor(math.inf)}  # eager inf too: still a failure
    assert compare(both_inf, dict(both_inf), {k: v.double() for k, v in both_inf.items()}) == ("loss", math.inf)


def test_nan_loss_fails_and_the_json_stays_valid():
    proc = cli("accuracy", "--models", "BERT_pytorch", "--iterations", "1", "--backend", "nan_outputs", "--json",
               setup="accuracy:nan_backend")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (model,) = _strict_json(proc.stdout)["models"]
    assert model["status"] == "fail_accuracy" and model["passed"] is False
    assert model["max_error"] == "nan" and model["failure"]["max_error"] == "nan"
    assert model["failure"]["iteration"] == 1
    table = cli("accuracy", "--models", "BERT_pytorch", "--iterations", "1", "--backend", "nan_outputs",
                setup="accuracy:nan_backend")
    assert table.returncode == 1
    row = next(line.split() for line in table.stdout.splitlines() if line.startswith("BERT_pytorch "))
    assert row[:2] == ["BERT_pytorch", "fail_accuracy"] and row[3] == "nan"


@pytest.mark.parametrize("args, setup, message", [
    (["--device", "cuda"], None, "--device cuda: no CUDA device here"),
    (["--device", "npu"], None, "--device npu: torch_npu cannot be imported"),
    (["--backend", "no_such_backend"], None, "--backend no_such_backend: unknown torch.compile backend"),
    (["--models", "BERT_pytorch,BertForMaskedLM"], "accuracy:no_transformers",
     "model BertForMaskedLM needs transformers, which is not installed (pip install 'npu-fixes[accuracy]')"),
], ids=["cuda", "npu", "backend", "transformers"])
def test_setup_errors_exit_2_not_fail_accuracy(args, setup, message):
    import torch

    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    if "npu" in args and run_python("import torch_npu", check=False).returncode == 0:
        pytest.skip("torch_npu is importable here")
    proc = cli("accuracy", "--iterations", "1", "--models", "BERT_pytorch", *args, setup=setup)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"npu-fixes accuracy: {message}") and "fail_accuracy" not in proc.stdout
