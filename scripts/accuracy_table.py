"""The README's model-level table in full: accuracy models trained through each genuine
state's backend and the published wheels on CPU (``npu-fixes accuracy --interpret``), as
built (``--without-fixes``) and with npu_fixes, printed as a Markdown table.

Run by ``.venv/bin/nox -s accuracy-table`` (which builds the self-builds first), or
``python scripts/accuracy_table.py STATE=PATH ... [--models A,B] [--iterations N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

#: The accuracy models a seed symptom or a defect beyond the five shows on, on CPU.
MODELS = ("DistilBertForMaskedLM", "DistilBertForMaskedLM_4x512", "fastNLP_seq_len", "BatchNormTagger",
          "RunningLossTagger", "PositionGainTagger", "MaskDropoutTagger", "MinPoolClassifier",
          "FeatureMajorTagger", "LengthClassifier")


def run(location: str, models: list[str], iterations: int, with_fixes: bool) -> dict[str, str]:
    """Model -> ``ok`` or what failed first, for one backend, with or without npu_fixes."""
    flag = [] if with_fixes else ["--without-fixes"]
    command = [sys.executable, "-m", "npu_fixes", "accuracy", "--interpret", "--torch-npu", location, *flag,
               "--models", ",".join(models), "--iterations", str(iterations), "--json"]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"accuracy at {location} exited {proc.returncode}:\n{proc.stderr}")
    cells = {}
    for record in json.loads(proc.stdout)["models"]:
        if record["passed"]:
            left_open = sorted({op for graph in record["rng_graphs"] if graph["capture_disabled"] is None
                                for op in graph["ops"]})
            cells[record["name"]] = f"ok, but `{', '.join(left_open)}` left to capture" if left_open else "ok"
        elif record["error"]:
            cells[record["name"]] = f"stops: `{record['error'][:60]}`"
        else:
            failure = record["failure"]
            cells[record["name"]] = f"`{failure['tensor']}` off by {float(failure['max_error']):.3g}"
    return cells


def table(locations: dict[str, str], models: list[str], iterations: int) -> str:
    """Markdown: a row per model, a column per state, cells ``as built → with npu_fixes``."""
    cells = {}
    for state, location in locations.items():
        print(f"{state}: as built, then with npu_fixes", file=sys.stderr, flush=True)
        cells[state] = (run(location, models, iterations, False), run(location, models, iterations, True))
    lines = ["| model | " + " | ".join(locations) + " |", "|---|" + "---|" * len(locations)]
    for model in models:
        row = [f"{cells[s][0][model]} → {cells[s][1][model]}" for s in locations]
        lines.append(f"| {model} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="+", metavar="STATE=PATH", help="a column: its name and torch_npu")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args(argv)
    pairs = [b.partition("=") for b in args.backends]
    if any(not sep or not name or not path for name, sep, path in pairs):
        parser.error("each backend is STATE=PATH")
    print(table({name: path for name, _, path in pairs}, args.models.split(","), args.iterations))
    return 0


if __name__ == "__main__":
    sys.exit(main())
