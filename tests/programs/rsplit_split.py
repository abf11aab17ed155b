"""Programs of tests/fixes/test_rsplit_nested_range.py, test_rsplit_epilogue.py and
test_rsplit_inner_static.py: reductions the cross-core split may take, compiled through a
state's backend, kernels run in Triton's interpreter with the backend's launcher grid,
compared with eager."""

from __future__ import annotations

import contextlib
import os
import sys
import unittest.mock

from tests.programs import host_load, innermost, main


def _programs() -> dict:
    """label -> (function, input shapes[, options]): OUTER and INNER reductions (small x,
    r >= 2048, r >= x). Options: ``dynamic`` {argument: dims marked dynamic}, ``config``
    {backend config name: value while the program compiles}."""
    import torch

    def nested2(a, b):  # b broadcast over the batch: two free reduction nodes
        return (a.view(4, 512, 32) * b[None]).sum(dim=(0, 1))

    def nested3(a, b):
        return (a.view(2, 4, 512, 16) * b.view(2, 1, 512, 16)).sum(dim=(0, 1, 2))

    def blocks_transposed(a, b):  # BigBird-style: a 64 x 64 block against another's transpose
        return (a * b.transpose(-1, -2).reshape(2, 2, 4096)).sum(-1)

    def per_head(x):  # [batch, seq, heads, dim] summed per (batch, head): INNER, two nodes
        return x.permute(0, 2, 1, 3).reshape(x.shape[0] * x.shape[2], -1).sum(-1)

    seq_dynamic = {"dynamic": {0: [1]}}

    return {
        "sum": (lambda x: x.sum(0), [(4096, 8)]),
        "sum-keepdim": (lambda x: x.sum(0, keepdim=True), [(4096, 8)]),
        "nested2": (nested2, [(2048, 32), (512, 32)]),
        "nested3": (nested3, [(4096, 16), (1024, 16)]),
        "blocks-transposed": (blocks_transposed, [(2, 2, 4096), (2, 2, 64, 64)]),
        "nested2-keepdim": (lambda a, b: (a.view(4, 512, 32) * b[None]).sum(dim=(0, 1), keepdim=True),
                            [(2048, 32), (512, 32)]),
        "+b": (lambda x, b: x.sum(0) + b, [(4096, 8), (8,)]),
        "+3": (lambda x: x.sum(0) + 3.0, [(4096, 8)]),
        "*c": (lambda x, c: x.sum(0) * c, [(4096, 8), (8,)]),
        "/n": (lambda x: x.sum(0) / 7.0, [(4096, 8)]),
        "neg": (lambda x: -x.sum(0), [(4096, 8)]),
        "mean": (lambda x: x.mean(0), [(4096, 8)]),
        "**2": (lambda x: x.sum(0) ** 2, [(4096, 8)]),
        "relu": (lambda x: x.sum(0).relu(), [(4096, 8)]),
        "to-fp16": (lambda x: x.sum(0).to(torch.float16), [(4096, 8)]),
        "to-int": (lambda x: (x.sum(0) * 100).to(torch.int32), [(4096, 8)]),
        "two-outputs": (lambda x: (x.sum(0), x * 2), [(4096, 8)]),
        "nested2+b": (lambda a, b, c: (a.view(4, 512, 32) * b[None]).sum(dim=(0, 1)) + c,
                      [(2048, 32), (512, 32), (32,)]),
        "amax": (lambda x: x.amax(0), [(4096, 8)]),
        "amin": (lambda x: x.amin(0), [(4096, 8)]),
        "prod": (lambda x: (1 + x / 4096).prod(0), [(4096, 8)]),
        "argmax": (lambda x: x.argmax(0), [(4096, 8)]),
        "inner-rows": (lambda x: x.sum(-1), [(8, 4096)]),
        "inner-heads": (per_head, [(4, 64, 8, 64)]),
        "inner-heads-mean": (lambda x: x.permute(0, 2, 1, 3).reshape(8, 4096).mean(-1), [(2, 128, 4, 32)]),
        "inner-heads-merged": (lambda x: x.transpose(1, 2).reshape(4, 64 * 512).sum(-1), [(4, 8, 64, 64)]),
        "inner-heads-seq-dynamic": (per_head, [(2, 256, 4, 32)], seq_dynamic),
        "inner-heads-seq-dynamic-no-real-block": (per_head, [(2, 256, 4, 32)],
                                                  {**seq_dynamic, "config": {"rtree_real_block": False}}),
    }


def _close(got, want) -> bool:
    import torch

    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if not want.is_floating_point():
        return bool(torch.equal(got, want))
    return bool(torch.allclose(got.float(), want.float(), rtol=1e-3, atol=1e-3))


def run_all(codegen, labels: list[str]) -> dict:
    """Each program compiled and run on the interpreter device: whether it equals eager,
    the range of the ratio compiled/eager where not, and each launch's programs (launched,
    and those that found work)."""
    import torch

    from npu_fixes.tools import interpret

    config = sys.modules[codegen.__name__.rpartition(".codegen")[0] + ".config"]
    out = {}
    programs = _programs()
    for label in labels:
        fn, shapes, *options = programs[label]
        options = options[0] if options else {}
        torch.manual_seed(0)
        args = [torch.randn(s) for s in shapes]
        want = fn(*args)
        want = want if isinstance(want, tuple) else (want,)
        for arg, dims in options.get("dynamic", {}).items():
            for dim in dims:
                torch._dynamo.mark_dynamic(args[arg], dim)
        torch._dynamo.reset()
        try:
            settings = options.get("config")
            with interpret.cpu_device(codegen) as launches, (
                    unittest.mock.patch.multiple(config, **settings) if settings else contextlib.nullcontext()):
                got = torch.compile(fn)(*args)
        except Exception as exc:  # noqa: BLE001 - recorded
            out[label] = {"error": innermost(exc)}
            continue
        got = got if isinstance(got, tuple) else (got,)
        record = {"equal": all(_close(g, w) for g, w in zip(got, want, strict=True)),
                  "launches": [[launch.grid[0] * launch.grid[1] * launch.grid[2], launch.busy]
                               for launch in launches]}
        if not record["equal"] and got[0].is_floating_point():
            ratio = (got[0].double() / want[0].double())
            record["ratio"] = [round(float(ratio.min()), 3), round(float(ratio.max()), 3)]
        out[label] = record
    return out


#: The fixes on the split's predicate.
RSPLIT = ("rsplit-outer", "rsplit-nonsum", "rsplit-nested-range", "rsplit-epilogue", "rsplit-inner-static")


def battery(location: str, labels: list[str]) -> dict:
    """The raw probes of the split's fixes; the programs ``labels`` without npu_fixes; then
    with ``npu_fixes.apply()`` (each fix where its probe says needed): the fixes' states and
    the programs again."""
    mod = host_load(location).modules["codegen.triton"]
    from npu_fixes.tools import interpret

    interpret.activate(mod)
    import npu_fixes

    fixes = npu_fixes.registry().fixes
    result = {"probes": {name: fixes[name].probe(mod).defective for name in RSPLIT},
              "before": run_all(mod, labels)}
    del os.environ["NPU_FIXES"]
    npu_fixes.apply()
    result["states"] = {r.name: r.state.value for r in npu_fixes.status() if r.name in RSPLIT}
    result["after"] = run_all(mod, labels)
    return result


if __name__ == "__main__":
    main(globals())
