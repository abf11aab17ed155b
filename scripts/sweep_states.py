"""The sweep's corpus through every genuine state and published wheel, results written to
``benchmarks/results/<date>_<commit>_cpu-<n>core_sweep/``: one JSON report per state (as
``npu-fixes sweep --json`` prints it, keeping the records of the samples that fail, meet a
harness limit or are skipped, as built or with npu_fixes) and a README with the counts per
outcome as built and with npu_fixes, rewritten after each state (the rows of states an earlier
run left in the folder, and the section written by hand below its ``HAND`` heading, are kept).
``nox -s sweep`` runs it;
extra arguments go to ``npu-fixes sweep`` (e.g. ``--per-op 1`` for a shorter run). Each
state's finished samples go to a journal (``journals/<state>.jsonl`` in the results folder):
run again at the same commit, it goes on with the folder it finds (or the one ``--results``
names) and runs only what its journals lack; a journal made with other sources of the backend,
npu_fixes, torch or Triton is refused. The ``.jsonl`` files stay out of the repository
(``.gitignore``); their gzipped copies (``<state>.jsonl.gz``, written after each state, or by
``--pack`` for a run stopped part way) go into it, and a later run, on another machine too,
starts a missing journal from its copy.

Usage: python scripts/sweep_states.py [--results DIR] NAME=PATH ... [-- sweep arguments]
       python scripts/sweep_states.py --pack DIR
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from npu_fixes.tools.sweep import CONFIGS, OUTCOMES  # noqa: E402


def head_commit() -> str:
    """This checkout's commit, short (``unknown`` outside git)."""
    git = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return git.stdout.strip() or "unknown"


def sweep(name: str, location: str, *args: str) -> dict | None:
    """``npu-fixes sweep --torch-npu LOCATION --json ARGS`` in a process of its own: its report, or
    ``None`` where it did not finish (what it said printed, named ``name``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "npu_fixes", "sweep", "--torch-npu", location, "--json", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
    )
    if proc.returncode not in (0, 1):
        print(f"{name}: npu-fixes sweep failed ({proc.returncode}): {proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout)


def fails(report: dict) -> bool:
    """Whether a sweep's ``report`` has a sample silently wrong with npu_fixes, a regression or an
    unexplained failure (what makes these scripts exit 1)."""
    return bool(report["silent_with_npu_fixes"] or report["regressions"] or report["unexplained"])


def readme(rows: list[tuple[str, dict, float, int]], extra: list[str], today: str, commit: str) -> str:
    """The counts per state and outcome, and the failures with npu_fixes by class."""
    lines = [
        f"# Sweep of every state ({today}, commit {commit}, {os.cpu_count()}-core CPU machine)",
        "",
        f"Corpus: {rows[0][1]['corpus']}; arguments: `{' '.join(extra) or '(none)'}`.",
        "Kernels in Triton's interpreter on CPU (`npu-fixes sweep`); nothing here ran on Ascend hardware.",
        "Each cell: as built / with npu_fixes. Minutes: of the last run only; the records an earlier",
        "run had finished (in its journal) are counted under \"from journal\" (a sample's two are two).",
        "",
        "| state | samples | minutes | from journal | "
        + " | ".join(OUTCOMES) + " | regressions | unexplained |",
        "|" + "---|" * (len(OUTCOMES) + 6),
    ]
    for name, report, minutes, resumed in rows:
        counts = report["counts"]
        cells = [f"{counts[CONFIGS[0]].get(o, 0)} / {counts[CONFIGS[1]].get(o, 0)}" for o in OUTCOMES]
        lines.append(
            f"| {name} | {report['samples']} | {minutes:.1f} | {resumed} | "
            + " | ".join(cells)
            + f" | {len(report['regressions'])} | {len(report['unexplained'])} |"
        )
    lines += ["", "Failures with npu_fixes by class (`npu_fixes/tools/triage.py`):", ""]
    for name, report, *_ in rows:
        by_class: dict[str, int] = {}
        for cls in report["classes"].values():
            by_class[cls or "UNEXPLAINED"] = by_class.get(cls or "UNEXPLAINED", 0) + 1
        lines.append(f"- {name}: " + (", ".join(f"{c} {n}" for c, n in sorted(by_class.items())) or "none"))
    return "\n".join(lines) + "\n"


HAND = "## What this run shows (written by hand)"


def merged(old: str, new: str, names: set[str]) -> str:
    """``new`` README with what ``old`` (the folder's README so far) holds and this run does not
    replace: the table rows and class lines of states not in ``names``, first, and the section
    from the ``HAND`` heading on."""
    before, hand, after = old.partition(HAND)
    kept_rows, kept_classes = [], []
    for line in before.splitlines():
        name = line.removeprefix("| ").removeprefix("- ").split(" ", 1)[0].rstrip(":")
        if name in names or name in ("state", ""):
            continue
        if line.startswith("| ") and not line.startswith("|---"):
            kept_rows.append(line)
        elif line.startswith("- "):
            kept_classes.append(line)
    lines = new.splitlines()
    table = next(n for n, line in enumerate(lines) if line.startswith("|---")) + 1
    classes = lines.index("Failures with npu_fixes by class (`npu_fixes/tools/triage.py`):") + 2
    lines[classes:classes] = kept_classes
    lines[table:table] = kept_rows
    return "\n".join(lines) + "\n" + (f"\n{hand}{after}" if hand else "")


def pack(journal: Path) -> None:
    """``journal`` gzipped beside it (``<state>.jsonl.gz``), for the repository."""
    with journal.open("rb") as f, gzip.open(journal.with_name(journal.name + ".gz"), "wb") as out:
        out.write(f.read())


def unpack(journal: Path) -> None:
    """A missing ``journal`` started from its gzipped copy, where there is one."""
    packed = journal.with_name(journal.name + ".gz")
    if not journal.exists() and packed.exists():
        with gzip.open(packed, "rb") as f:
            journal.write_bytes(f.read())


def main(argv: list[str]) -> int:
    usage = "\n".join(__doc__.strip().splitlines()[-2:])
    if argv[:1] == ["--pack"]:
        journals = sorted(Path(argv[1]).glob("journals/*.jsonl")) if len(argv) == 2 else []
        if not journals:
            print(f"no journals/*.jsonl in {argv[1:]}\n{usage}", file=sys.stderr)
            return 2
        for journal in journals:
            pack(journal)
            print(f"packed: {journal}.gz")
        return 0
    into = None
    if argv[:1] == ["--results"]:
        if len(argv) < 2 or not Path(argv[1]).is_dir():
            print(f"--results names no folder: {argv[1:2]}\n{usage}", file=sys.stderr)
            return 2
        into, argv = Path(argv[1]), argv[2:]
    split = argv.index("--") if "--" in argv else len(argv)
    if not argv[:split] or not all("=" in a for a in argv[:split]):
        print(usage, file=sys.stderr)
        return 2
    states = dict(a.split("=", 1) for a in argv[:split])
    extra = argv[split + 1 :]
    commit = head_commit()
    today = datetime.date.today().isoformat()
    results = REPO / "benchmarks" / "results"
    started = sorted(results.glob(f"*_{commit}_cpu-{os.cpu_count()}core_sweep"))  # a run to go on with
    out = into or (started[-1] if started else results / f"{today}_{commit}_cpu-{os.cpu_count()}core_sweep")
    out.mkdir(parents=True, exist_ok=True)
    # stopped by a signal, the state's sweep is stopped too (subprocess.run kills it on the way out)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    rows, failing = [], False
    for name, path in states.items():
        journal = out / "journals" / f"{name}.jsonl"
        journal.parent.mkdir(parents=True, exist_ok=True)
        unpack(journal)
        started = time.monotonic()
        report = sweep(name, path, "--journal", str(journal), *extra)
        if report is None:
            return 2
        pack(journal)
        report["records"] = {i: r for i, r in report["records"].items()  # the journal has the rest
                             if {c["outcome"] for c in r.values()} - {"pass", "no-kernel"}}
        (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
        rows.append((name, report, (time.monotonic() - started) / 60, report["from_journal"]))
        failing |= fails(report)
        print(
            f"{name}: {report['samples']} samples in {rows[-1][2]:.1f} min: {json.dumps(report['counts'])}",
            flush=True,
        )
        written = out / "README.md"
        text = readme(rows, extra, today, commit)
        written.write_text(merged(written.read_text(), text, set(states)) if written.exists() else text)
    print(f"written: {out}")
    return 1 if failing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
