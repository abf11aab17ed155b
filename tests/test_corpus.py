"""The sweep's corpus (npu_fixes/tools/corpus.py): ids name one sample everywhere, programs
print as scripts that run, the CI part stays small."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.tools import corpus, training_corpus


def test_a_size_cap_picks_programs_without_changing_them():
    """A cap keeps the seeds whose program is small enough, in order: the same ids as the
    uncapped sequence filtered by size, so an id names one program under any cap."""
    small = list(corpus.generated_ids(corpus.Selection(programs=30, max_numel=1 << 12)))
    large = list(corpus.generated_ids(corpus.Selection(programs=300, max_numel=1 << 20)))
    assert len(small) == 30
    assert small == [i for i in large if corpus.generated(int(i[4:])).numel <= 1 << 12][:30]


def test_generated_programs_run_in_eager():
    for sample_id in corpus.generated_ids(corpus.Selection(programs=60, max_numel=1 << 14)):
        s = corpus.sample(sample_id)
        s.fn(*s.args)


@pytest.mark.parametrize(
    "sample_id",
    ["gen:3", "opinfo:sum:-:float32:fwd:static:1", "opinfo:max:reduction_no_dim:int64:fwd:static:0",
     "train:rope-interleaved"],
)
def test_a_sample_is_rebuilt_with_the_same_inputs(sample_id):
    first, second = corpus.sample(sample_id), corpus.sample(sample_id)
    assert len(first.args) == len(second.args)
    for a, b in zip(first.args, second.args, strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


@pytest.mark.parametrize(("bad", "why"), [
    ("gen:x", "unknown form"), ("nonsense", "unknown form"), ("train:nope", "no training-step program 'nope'"),
    ("opinfo:no-such-op:-:float32:fwd:static:0", "no OpInfo op 'no-such-op'"),
    ("opinfo:sum:-:float16:fwd:static:0", "dtype 'float16' is none of"),
    ("opinfo:sum:-:float32:up:static:0", "direction 'up' is none of fwd, bwd"),
    ("opinfo:sum:-:float32:fwd:static:999", "sum has 20 samples in float32 fwd, not 1000"),
])
def test_an_unknown_id_says_why_and_names_the_formats(bad, why):
    with pytest.raises(ValueError, match=rf"is no sample id of the corpus \({why}.*ids are opinfo:<op>"):
        corpus.sample(bad)


def test_the_ci_part_is_small_and_names_real_ops():
    from torch.testing._internal.common_methods_invocations import op_db

    names = {op.name for op in op_db}
    assert set(corpus.CI_OPS) <= names, set(corpus.CI_OPS) - names
    ids = corpus.ids(corpus.CI)
    assert 100 <= len(ids) <= 200
    assert sum(i.startswith("gen:") for i in ids) == corpus.CI.programs
    assert [i for i in ids if i.startswith("train:")] == [f"train:{name}" for name in training_corpus.PROGRAMS]


def test_training_programs_run_in_eager_and_print_as_scripts_that_run():
    """Each training-step program, and the script --show prints of it, give the same result."""
    for name in training_corpus.PROGRAMS:
        s = corpus.sample(f"train:{name}")
        scope = {"torch": torch}
        exec(s.source, scope)
        results = [s.fn(*s.args), scope["fn"](*scope["args"])]
        flat = [torch.as_tensor(r) for result in results for r in (result if isinstance(result, tuple) else (result,))]
        half = len(flat) // 2
        assert all(torch.equal(a, b) for a, b in zip(flat[:half], flat[half:], strict=True)), name
