"""Programs of tests/fixes/test_te_parallel_ce.py."""

from __future__ import annotations

import sys

from tests.programs import main


def report(order: str) -> dict:
    """npu_fixes and the stand-in ``transformer_engine.pytorch`` imported in ``order``
    ("npu_fixes-first" or "te-first"): the fix's record, whose function both import paths
    give (ours is checked against F.cross_entropy), what undo leaves and whether apply puts
    ours back."""
    if order == "npu_fixes-first":  # the import order is the point: not sorted
        import npu_fixes  # noqa: I001
        import transformer_engine.pytorch as te
    else:
        import transformer_engine.pytorch as te  # noqa: I001
        import npu_fixes
    import torch  # noqa: I001
    import torch.nn.functional as F

    from npu_fixes.ops import parallel_cross_entropy as ours
    from transformer_engine.pytorch.cross_entropy import parallel_cross_entropy as imported

    rec = {r.name: r for r in npu_fixes.status()}["te-parallel-ce"]
    out = {"state": rec.state.value, "target": rec.target, "detail": rec.detail,
           "top_is_ours": te.parallel_cross_entropy is ours, "imported_is_ours": imported is ours}
    if out["top_is_ours"]:
        torch.manual_seed(0)
        x = torch.randn(2, 3, 50, requires_grad=True)
        t = torch.randint(0, 50, (2, 3))
        t[0, 0] = -100
        loss = te.parallel_cross_entropy(x, t, 0.1, True, None)  # Transformer Engine's positional order
        ref = F.cross_entropy(x.view(-1, 50), t.view(-1), label_smoothing=0.1)
        out["max_err"] = (loss - ref).abs().item()
    else:
        out["theirs"] = te.parallel_cross_entropy()
    sub = sys.modules["transformer_engine.pytorch.cross_entropy"]
    out["restored"] = npu_fixes.undo()
    out["after_undo"] = {"top": hasattr(te, "parallel_cross_entropy"), "sub": hasattr(sub, "parallel_cross_entropy"),
                         "sub_module": "transformer_engine.pytorch.cross_entropy" in sys.modules,
                         "sub_attr": hasattr(te, "cross_entropy")}
    npu_fixes.apply()
    out["reapplied"] = te.parallel_cross_entropy is ours
    return out


def disabled() -> list:
    """npu_fixes, then the stand-in imported: whether it has the function, and the fix's
    state."""
    import npu_fixes  # noqa: I001 (before the stand-in)
    import transformer_engine.pytorch as te

    return [hasattr(te, "parallel_cross_entropy"),
            {r.name: r.state.value for r in npu_fixes.status()}["te-parallel-ce"]]


if __name__ == "__main__":
    main(globals())
