"""The sweep's corpus (npu_fixes/tools/corpus.py): ids name one sample everywhere, programs
print as scripts that run, the CI part stays small."""

from __future__ import annotations

import pytest
import torch

from npu_fixes.tools import corpus


def test_a_generated_program_is_the_same_for_its_seed_whatever_the_size_cap():
    assert corpus.generated(58) == corpus.generated(58)
    small = list(corpus.generated_ids(corpus.Selection(programs=30, max_numel=1 << 12)))
    large = list(corpus.generated_ids(corpus.Selection(programs=30, max_numel=1 << 20)))
    assert len(small) == len(large) == 30
    assert all(corpus.generated(int(i.split(":")[1])).numel <= 1 << 12 for i in small)
    assert set(small) & set(large), "a seed under both caps is one program"


@pytest.mark.parametrize(
    "sample_id",
    ["gen:3", "opinfo:sum:-:float32:fwd:static:1", "opinfo:max:reduction_no_dim:int64:fwd:static:0"],
)
def test_a_sample_is_rebuilt_with_the_same_inputs(sample_id):
    first, second = corpus.sample(sample_id), corpus.sample(sample_id)
    assert len(first.args) == len(second.args)
    for a, b in zip(first.args, second.args, strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def test_an_unknown_id_names_the_formats():
    for bad in ("gen:x", "opinfo:no-such-op:-:float32:fwd:static:0", "nonsense"):
        with pytest.raises(ValueError, match=r"no sample id of the corpus \(opinfo:<op>"):
            corpus.sample(bad)


@pytest.mark.parametrize("sample_id", ["gen:1", "gen:11", "opinfo:sum:-:float32:bwd:static:0"])
def test_the_printed_script_runs_and_compares(sample_id, monkeypatch, capsys):
    """The script of a sample is a program of its own: run here with torch.compile as the
    identity, it compares and prints its verdict."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    text = corpus.script(corpus.sample(sample_id))
    assert text.startswith(f"# npu-fixes sweep sample {sample_id}\n")
    exec(compile(text, sample_id, "exec"), {})  # noqa: S102
    assert capsys.readouterr().out.strip().endswith("compiled equals eager")


def test_the_ci_part_is_small_and_names_real_ops():
    from torch.testing._internal.common_methods_invocations import op_db

    names = {op.name for op in op_db}
    assert set(corpus.CI_OPS) <= names, set(corpus.CI_OPS) - names
    ids = corpus.ids(corpus.CI)
    assert 100 <= len(ids) <= 200
    assert sum(i.startswith("gen:") for i in ids) == corpus.CI.programs
