#!/usr/bin/env bash
# The test suite's speed, two checkouts side by side: the same test files, pytest-xdist over
# every core, run alternately (OTHER, this checkout, OTHER, this checkout, ...) so a change of
# the machine's speed hits both; prints the wall time of each run and their ratio.
# Usage: bash benchmarks/suite_side_by_side.sh OTHER_CHECKOUT [ROUNDS [TEST FILES...]]
# OTHER_CHECKOUT: e.g. `git worktree add /tmp/old <commit>`; this checkout's .venv and
# .cache/wheels serve both (run scripts/setup.sh here first).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OTHER="$(cd "${1:?name the other checkout}" && pwd)"
ROUNDS="${2:-2}"
shift $(( $# < 2 ? $# : 2 ))
FILES=("$@")
if [ "${#FILES[@]}" -eq 0 ]; then
  FILES=(tests/fixes/test_rsplit_inner_static.py tests/fixes/test_split_fused_fixpoint.py
         tests/test_interpret.py tests/ops/test_cross_entropy.py)
fi
export NPU_FIXES_UPSTREAM="${NPU_FIXES_UPSTREAM:-$(dirname "$HERE")/shared/upstream}"
export NPU_FIXES_WHEELS="$HERE/.cache/wheels"
declare -A total=([other]=0 [here]=0)
for round in $(seq "$ROUNDS"); do
  for side in other here; do
    tree=$([ "$side" = other ] && echo "$OTHER" || echo "$HERE")
    cache="$(mktemp -d)"
    start=$(date +%s.%N)
    summary=$(cd "$tree" && PYTEST_NPU_FIXES_INDUCTOR_CACHE="$cache" "$HERE/.venv/bin/python" -m pytest -q \
      -p no:cacheprovider -n auto --dist loadfile "${FILES[@]}" 2>&1 | tail -1)
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    rm -rf "$cache"
    total[$side]=$(echo "${total[$side]} + $seconds" | bc)
    printf 'round %s %-5s %7.1f s  %s\n' "$round" "$side" "$seconds" "$summary"
  done
done
printf 'this checkout / other: %.2f\n' "$(echo "${total[here]} / ${total[other]}" | bc -l)"
