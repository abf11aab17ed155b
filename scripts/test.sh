#!/usr/bin/env bash
# Set up everything on a fresh machine and run the tests: every row of the pinned-version
# matrix in noxfile.py. First `lint` (ruff) and `docs` (the generated documentation is
# current, the site builds with warnings as errors), then `none` (torch_npu absent, the suite but for the model level,
# pytest-xdist over every core; its tests/test_matrix.py runs every installed row too: each
# pinned wheel, each genuine upstream state of the backend, each pre-fix copy, that row's
# torch_npu on its programs' path), then `model` (the model-level subset: whole models
# trained through genuine states and wheels), then the rows tagged `peer` (upstream's own
# regression tests at each genuine state), as many at once as there are cores, each row's
# output printed when it ends. One row in a session of its own:
# `.venv/bin/nox -s genuine-8bfbb9ed1` (`-l` lists the rows).
# Usage: bash scripts/test.sh [extra pytest args: then only the "none" row runs, with them]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
NOX=("$VENV/bin/nox" -f noxfile.py)
# Bytecode of our own modules, hash-checked: with PYTHONDONTWRITEBYTECODE set (as on this
# machine) every test program would otherwise compile npu_fixes and its test programs again.
"$PY" -m compileall -q --invalidation-mode checked-hash npu_fixes tests
# One Inductor cache for every row of this run (tests/conftest.py: INDUCTOR_CACHE), made
# afresh: the C++ builds and the CPU's vector ISA probe (9 s of gcc) are paid once, not per row.
export PYTEST_NPU_FIXES_INDUCTOR_CACHE="$PWD/.cache/inductor-run"
rm -rf "$PYTEST_NPU_FIXES_INDUCTOR_CACHE" && mkdir -p "$PYTEST_NPU_FIXES_INDUCTOR_CACHE"
if [ "$#" -gt 0 ]; then
  exec "${NOX[@]}" -s none -- "$@"
fi
"${NOX[@]}" -s lint docs
"${NOX[@]}" -s none
"${NOX[@]}" -s model
LOGS=.cache/logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
"${NOX[@]}" -t peer -l --json 2>/dev/null \
  | "$PY" -c 'import json, sys; print("\n".join(s["session"] for s in json.load(sys.stdin)))' > "$LOGS/rows"
echo "peer rows, $(nproc) at a time: $(tr '\n' ' ' < "$LOGS/rows")"
xargs -P "$(nproc)" -I{} sh -c '"$0" -f noxfile.py -s "$1" > "$2/$1.log" 2>&1; echo $? > "$2/$1.rc"' \
  "$VENV/bin/nox" {} "$LOGS" < "$LOGS/rows"
failed=()
while read -r row; do
  cat "$LOGS/$row.log"
  [ "$(cat "$LOGS/$row.rc" 2>/dev/null)" = 0 ] || failed+=("$row")
done < "$LOGS/rows"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "peer rows failed: ${failed[*]} (logs in $LOGS)" >&2
  exit 1
fi
echo "all peer rows passed: $(wc -l < "$LOGS/rows")"
