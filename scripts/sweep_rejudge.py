"""The samples of whole-corpus sweeps that, with npu_fixes as it was then, failed or met a
harness limit, judged again at this commit: after a change of npu_fixes that can only make
fewer launches fail (a guard that checks less), what passed then passes now, so these samples
are what can differ. One report per state (``npu-fixes sweep --samples ... --json``) and a
README with the outcomes then and now, written to ``DIR``.

Usage: python scripts/sweep_rejudge.py DIR REPORT=PATH ...
  REPORT: a state's report of a whole run (``benchmarks/results/*_sweep/<state>.json``);
  PATH: that state's torch_npu (an install, a source tree or a ``.whl``).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from sweep_states import fails, head_commit, sweep  # noqa: E402

from npu_fixes.tools.outcomes import FAILING, OUTCOMES  # noqa: E402

#: The outcomes with npu_fixes that a re-judging takes up.
TAKEN = FAILING | {"harness-limit"}


def taken(report: dict) -> list[str]:
    """The ids of ``report``'s samples whose outcome with npu_fixes is one of :data:`TAKEN`."""
    return [i for i, r in report["records"].items() if r["fixed"]["outcome"] in TAKEN]


def rows(state: str, run: str, then: dict, now: dict) -> list[str]:
    """``state``'s lines of the README: outcomes with npu_fixes then and now, and every sample
    whose outcome changed."""
    before = Counter(then["records"][i]["fixed"]["outcome"] for i in now["records"])
    after = Counter(r["fixed"]["outcome"] for r in now["records"].values())
    changed = [i for i, r in now["records"].items()
               if r["fixed"]["outcome"] != then["records"][i]["fixed"]["outcome"]]
    lines = [
        f"### {state}: {len(now['records'])} samples of `{run}`",
        "",
        "| with npu_fixes | " + " | ".join(OUTCOMES) + " |",
        "|" + "---|" * (len(OUTCOMES) + 1),
        f"| then (`{run}`) | " + " | ".join(str(before[o]) for o in OUTCOMES) + " |",
        "| now | " + " | ".join(str(after[o]) for o in OUTCOMES) + " |",
        "",
        f"Regressions now: {len(now['regressions'])}; unexplained now: {len(now['unexplained'])}; "
        f"outcome changed: {len(changed)}" + (":" if changed else "."),
    ]
    lines += [f"- `{i}`: {then['records'][i]['fixed']['outcome']} -> {now['records'][i]['fixed']['outcome']}"
              for i in changed]
    return lines + [""]


def main(argv: list[str]) -> int:
    usage = "\n".join(__doc__.strip().splitlines()[-3:])
    if len(argv) < 2 or not all("=" in a and Path(a.split("=", 1)[0]).is_file() for a in argv[1:]):
        print(usage, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    commit = head_commit()
    lines = [
        f"# Samples of whole-corpus sweeps judged again ({datetime.date.today().isoformat()}, "
        f"commit {commit}, {os.cpu_count()}-core CPU machine)",
        "",
        "Every sample whose outcome with npu_fixes, in the state's whole run named below, was "
        + ", ".join(f"`{o}`" for o in sorted(TAKEN))
        + ", through the same backend again at this commit, as built and with npu_fixes"
        " (`python scripts/sweep_rejudge.py`). Kernels in Triton's interpreter on CPU; nothing here ran"
        " on Ascend hardware.",
        "",
    ]
    failing = False
    for arg in argv[1:]:
        report_path, location = arg.split("=", 1)
        then = json.loads(Path(report_path).read_text())
        state = Path(report_path).stem
        now = sweep(state, location, "--samples", ",".join(taken(then)))
        if now is None:
            return 2
        (out / f"{state}.json").write_text(json.dumps(now, indent=1) + "\n")
        lines += rows(state, Path(report_path).parent.name, then, now)
        failing |= fails(now)
        print(f"{state}: {len(now['records'])} samples: {json.dumps(now['counts'])}", flush=True)
        (out / "README.md").write_text("\n".join(lines))
    print(f"written: {out}")
    return 1 if failing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
