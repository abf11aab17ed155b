"""auto-blockify-option: the rule, the wrappers stacked with others, the probe at every
genuine state, and the 1D pointwise path repaired like bafc50684's, up to the options that
reach ``triton.compile``."""

from __future__ import annotations

import itertools

import pytest
import wrapt
from triton import Config

from npu_fixes.fixes import auto_blockify_option as fix
from npu_fixes.shim.patcher import Patcher
from tests.conftest import run_program, wheel_install
from tests.genuine_states import BEYOND, COMMITS

NAME = "auto-blockify-option"
UPSTREAM_FIX = "bafc50684"
WHEEL = "2.13.0"
STATES = (*COMMITS, WHEEL)
DEFECTIVE = tuple(s for s in COMMITS if s in BEYOND[NAME])


def config(xblock: int, **extra: int) -> Config:
    cfg = Config({"XBLOCK": xblock}, num_warps=8, num_stages=1)
    if extra:
        cfg.extra_options = extra
    return cfg


# -- the rule ------------------------------------------------------------------------------


def test_split_options_moves_only_compile_options():
    assert fix.split_options({"XBLOCK": 8, "auto_blockify_size": 2, "YBLOCK": 4}) == (
        {"XBLOCK": 8, "YBLOCK": 4}, {"auto_blockify_size": 2})
    assert fix.split_options({"XBLOCK": 8}) == ({"XBLOCK": 8}, {})
    assert list(fix.split_options({"ZBLOCK": 1, "auto_blockify_size": 2, "XBLOCK": 3})[0]) == ["ZBLOCK", "XBLOCK"]


def test_options_merge_and_extra_options():
    assert fix.with_options({"num_warps": 8, "auto_blockify_size": 1}, {"auto_blockify_size": 4}) == {
        "num_warps": 8, "auto_blockify_size": 4}
    assert fix.with_options(None, {"auto_blockify_size": 2}) == {"auto_blockify_size": 2}
    assert fix.extra_options(config(8)) == {}
    plain = config(8)
    plain.extra_options = None  # Inductor's cache restores a missing slot as None
    assert fix.extra_options(plain) == {}
    assert fix.extra_options(config(8, auto_blockify_size=2)) == {"auto_blockify_size": 2}


def test_dedup_and_hash_match_inductor_without_extra_options():
    """Without extra options the rule is Inductor's (same candidates kept, same hash, so
    existing autotune-cache entries stay valid); with them, candidates differing only in
    an extra option stay apart and hash apart."""
    from torch._inductor.runtime.triton_heuristics import hash_configs, unique_configs

    plain = [config(x) for x in (8, 16, 8, 32, 16)]
    plain.append(Config({"XBLOCK": 8}, num_warps=4, num_stages=1))
    assert fix.unique_configs(plain) == unique_configs(plain)
    assert fix.hash_configs(plain) == hash_configs(plain)
    assert fix.hash_configs(plain[:3]) == hash_configs(plain[:3])
    for sizes in itertools.product((None, 2, 4), repeat=3):
        cands = [config(8) if s is None else config(8, auto_blockify_size=s) for s in sizes]
        kept = fix.unique_configs(cands)
        assert [fix.extra_options(c) for c in kept] == [
            {} if s is None else {"auto_blockify_size": s} for s in dict.fromkeys(sizes)]
    with_two, with_four = [config(8), config(8, auto_blockify_size=2)], [config(8), config(8, auto_blockify_size=4)]
    assert len({fix.hash_configs(with_two), fix.hash_configs(with_four), hash_configs(with_two)}) == 3
    assert fix.config_key(config(8, auto_blockify_size=2)) != fix.config_key(config(8))


# -- the wrappers, on a stand-in module, stacked with someone else's wrapper ----------------

STAND_IN = """
import types
from triton import Config

calls = []
triton = types.SimpleNamespace(compile=lambda src, target=None, options=None: ("binary", options))

def unique_configs(configs):
    seen, out = set(), []
    for c in configs:
        key = (tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out

def hash_configs(configs):
    return "inductor:" + repr([sorted(c.kwargs.items()) for c in configs])

def npu_triton_config(size_hints, x, y=None, z=None, num_stages=1, num_elements_per_warp=256,
                      min_elem_per_thread=0, auto_blockify_size=None):
    cfg = {"XBLOCK": min(x, size_hints["x"])}
    if auto_blockify_size is not None:
        cfg["auto_blockify_size"] = auto_blockify_size
    return Config(cfg, num_warps=8, num_stages=num_stages)

def cached_autotune(size_hints, configs, triton_meta, heuristic_type, filename=None,
                    inductor_meta=None, custom_kernel=False):
    return unique_configs(configs), hash_configs(configs)

class NPUCachingAutotuner:
    def __init__(self, configs):
        self.configs = configs

    def _precompile_config(self, cfg):
        calls.append(dict(cfg.kwargs))
        return triton.compile("src", target="npu", options={"num_warps": cfg.num_warps})

    def _compile_small_block_fallback(self):
        template = self.configs[0]
        return [self._precompile_config(Config({**template.kwargs, "XBLOCK": b}, num_warps=8, num_stages=1))
                for b in (1, 2)]
"""


def outside(wrapped, instance, args, kwargs):
    """Someone else's wrapper: tags what it returns."""
    return ("outside", wrapped(*args, **kwargs))


@pytest.mark.parametrize("ours_first", [True, False])
def test_wrappers_stack_and_undo_with_another_wrapper(make_module, ours_first):
    import importlib

    mod = importlib.import_module(make_module("npu_fixes_abo_stand_in", STAND_IN))
    cls = mod.NPUCachingAutotuner
    originals = {t: cls.__dict__[t.split(".")[1]] for t in (fix.PRECOMPILE, fix.FALLBACK)}
    ours = Patcher()
    if ours_first:
        fix.install(mod, ours)
    for target in (fix.PRECOMPILE, fix.FALLBACK):
        wrapt.wrap_function_wrapper(cls, target.split(".")[1], outside)
    if not ours_first:
        fix.install(mod, ours)

    cfg = mod.npu_triton_config({"x": 2**30}, 1024, auto_blockify_size=4)
    assert cfg.kwargs == {"XBLOCK": 1024} and cfg.extra_options == {"auto_blockify_size": 4}
    tuner = cls([cfg])
    assert tuner._precompile_config(cfg) == ("outside", ("binary", {"num_warps": 8, "auto_blockify_size": 4}))
    plain = mod.npu_triton_config({"x": 2**30}, 1024)
    assert tuner._precompile_config(plain) == ("outside", ("binary", {"num_warps": 8}))
    assert not hasattr(plain, "extra_options")
    fallback = tuner._compile_small_block_fallback()
    assert fallback[0] == "outside" and [r[1][1] for r in fallback[1]] == [
        {"num_warps": 8, "auto_blockify_size": 4}] * 2
    assert mod.calls[-2:] == [{"XBLOCK": 1}, {"XBLOCK": 2}]
    kept, hashed = mod.cached_autotune({"x": 2**30}, [plain, cfg, mod.npu_triton_config(
        {"x": 2**30}, 1024, auto_blockify_size=4)], {}, None)
    assert kept == [plain, cfg] and not hashed.startswith("inductor:")
    assert mod.cached_autotune({"x": 2**30}, [plain], {}, None)[1].startswith("inductor:")
    assert mod.triton.compile("s", options={}) == ("binary", {})  # the module's own triton untouched

    assert ours.restore() == 4
    for target, original in originals.items():
        name = target.split(".")[1]
        assert cls.__dict__[name].__wrapped__ is original  # the other wrapper stays, ours is gone
    assert "auto_blockify_size" in mod.npu_triton_config({"x": 8}, 8, auto_blockify_size=2).kwargs


# -- genuine states ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(genuine):
    out = {}
    for state in STATES:
        root = wheel_install(WHEEL) if state == WHEEL else genuine(state)
        out[state] = run_program("auto_blockify_option", "probe_and_battery", env={"NPU_FIXES": "0"},
                                 location=root, run_battery=state != WHEEL, with_parts=state == "5ff81d9c5")
    return out


def test_probe_needed_exactly_where_the_defect_is(runs):
    assert DEFECTIVE == ("8bfbb9ed1", "95c9094da", "f8802037a", "5ff81d9c5")
    for state in STATES:
        res = runs[state]
        assert res["probe"][0] is (state in BEYOND[NAME]), (state, res["probe"])
        if res["probe"][0]:
            assert "ASTSource raised ValueError: 'auto_blockify_size' is not in list" in res["probe"][1]
            assert res["probe_after"][0] is False and "triton.compile's options" in res["probe_after"][1]
            assert res["undo"] == 4
        else:  # fixed upstream: nothing installed, every target the original object
            assert "extra_options into triton.compile's options" in res["probe"][1]
            assert "probe_after" not in res
        assert res["untouched"] is True


def test_probe_sees_each_part_of_the_repair(runs):
    """The options never reaching the compiler, the candidates collapsing and the
    fallback dropping the option are each reported: every wrapper is needed."""
    parts = runs["5ff81d9c5"]["parts"]
    assert [p[0] for p in parts] == [True, True, True, False]
    assert "never reaches triton.compile's options" in parts[0][1]
    assert "cached_autotune keeps 1 of 2 candidates" in parts[1][1]
    assert "small-block fallback drops auto_blockify_size" in parts[2][1]


#: Where the repaired battery differs from bafc50684's, and why (state -> case -> reason).
HASH_FORMAT = ("bafc50684 hashes every candidate list in a new key format; the repair keeps "
               "Inductor's hash for lists without extra options (existing autotune-cache "
               "entries stay valid) and adds the extra options only where present")
OLD_DEFAULT_PATH = ("the default 1D candidates (autotune_enhance on) came from an older "
                    "algorithm before f8802037a: it makes no auto_blockify_size candidate, so "
                    "the defect does not reach that path and the repair leaves it as it was")
LEGITIMATE = {
    state: {"hash": HASH_FORMAT,
            **({f"enhance=True|numel={n}": OLD_DEFAULT_PATH for n in (2**20, 2**30, 2**33)}
               if state in ("8bfbb9ed1", "95c9094da") else {})}
    for state in DEFECTIVE
}


@pytest.mark.parametrize("state", DEFECTIVE)
def test_repaired_like_upstream_fix(runs, state):
    """Candidates (kwargs, extra options, warps, stages), what every candidate's compile
    receives (kernel constants and options), the small-block fallback's compiles and
    cached_autotune's dedup equal bafc50684's on the same inputs, but for the listed cases."""
    reference = runs[UPSTREAM_FIX]["battery"]
    before, after = runs[state]["battery"], runs[state]["battery_after"]
    assert after.keys() == reference.keys() == before.keys()
    assert {k for k in reference if after[k] != reference[k]} == set(LEGITIMATE[state])
    assert after["hash"] == {"option_distinct": True, "plain_is_inductors": True}
    assert reference["hash"] == {"option_distinct": True, "plain_is_inductors": False}
    for key in LEGITIMATE[state]:
        if key != "hash":
            assert after[key] == before[key]
            assert all(option_free(c) for c in after[key]["configs"])


def option_free(described) -> bool:
    return "auto_blockify_size" not in described[0] and not described[1]


@pytest.mark.parametrize("state", DEFECTIVE)
def test_every_blockified_candidate_compiles_with_the_option(runs, state):
    """Before: each candidate with the option stops in ASTSource. After: it compiles with
    XBLOCK as its only constant and the option in triton.compile's options; the fallback's
    candidates too; the other candidates compile exactly as before."""
    before, after = runs[state]["battery"], runs[state]["battery_after"]
    blockified = 0
    for key, case in after.items():
        if key in ("dedup", "hash"):
            continue
        for described, was, now in zip(case["configs"], before[key]["compiled"], case["compiled"], strict=True):
            size = (described[1] or {}).get("auto_blockify_size")
            if size is None:
                assert now == was and now[0] == "compiled"
                continue
            blockified += 1
            assert was == ["error", "ValueError: 'auto_blockify_size' is not in list"]
            assert now == ["compiled", [{"constants": ["XBLOCK"],
                                         "options": {"num_warps": 8, "num_stages": 1, "auto_blockify_size": size}}]]
        if "fallback" in case:
            assert before[key]["fallback"][0] == "error"
            compiled = case["fallback"][1]
            assert len(compiled) == 9 and all(c["options"]["auto_blockify_size"] == 8 for c in compiled)
    # without autotune_enhance: 6 per size; on the default path from f8802037a: 3 per huge size
    assert blockified == 18 + (6 if state in ("f8802037a", "5ff81d9c5") else 0)
