"""The report of a sweep stopped part way: the samples a journal holds as built and with
npu_fixes, counted and triaged as ``npu-fixes sweep --json`` reports them (the records of
samples that pass or run no kernel in both configs left out, as ``scripts/sweep_states.py``
leaves them out). Nothing is run; the journal must have been made with the backend at PATH and
this checkout's npu_fixes, torch and Triton (its fingerprint says).

Usage: python scripts/sweep_journal_report.py JOURNAL PATH > report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from npu_fixes.tools import host, sweep  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    journal, location = argv
    if not Path(journal).is_file():
        print(f"sweep_journal_report: no journal at {journal}", file=sys.stderr)
        return 2
    try:
        records = sweep.Journal(journal, sweep.fingerprint(str(host.locate(location)))).load()
    except (sweep.JournalError, host.NotTorchNpu, OSError) as exc:
        print(f"sweep_journal_report: {exc}", file=sys.stderr)
        return 2
    both = {i: r for i, r in records.items() if set(r) == set(sweep.CONFIGS)}
    label = f"the samples a stopped sweep finished ({len(both)})"
    report = sweep.Report(location, label, both, 2 * len(both))
    print(sweep.summary(report), file=sys.stderr)
    out = report.as_dict()
    out["records"] = {i: r for i, r in both.items()
                      if {c["outcome"] for c in r.values()} - {"pass", "no-kernel"}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
