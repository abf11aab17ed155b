#!/usr/bin/env bash
# Set up (same as scripts/test.sh) and audit the pinned torch-npu 2.13.0 wheel, then a
# self-build of the genuine upstream state 8bfbb9ed1 (the backend's first commit: all five
# defects and more) being repaired. Without the genuine sources (tests/genuine_states.py
# says where they come from), a pre-fix copy of the wheel (the five defects re-introduced)
# stands in. Exits 0 unless an audit finds something still broken or cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

# Audit one torch_npu; say what its exit code means. Fails only when something is still
# broken (1) or the audit could not run (2); 3 (defects only an upgrade removes) is expected.
audit() {
  local rc=0
  "$PY" -m npu_fixes audit --torch-npu "$1" || rc=$?
  case $rc in
    0) echo "(audit exit 0: nothing left broken)" ;;
    3) echo "(audit exit 3: every repairable defect repaired; the upgrade-needed rows need a newer torch_npu)" ;;
    *) echo "(audit exit $rc)"; return "$rc" ;;
  esac
}

wheel=$(ls .cache/wheels/torch_npu-2.13.0-*.whl)
echo "== audit: published torch-npu 2.13.0 wheel =="
audit "$wheel"
echo
rm -rf .cache/genuine-8bfbb9ed1
if "$PY" -c "import sys; from pathlib import Path; from tests import genuine_states as g; \
g.build('8bfbb9ed1', Path(sys.argv[1]), Path('.cache/genuine-8bfbb9ed1'))" "$wheel"; then
  echo "== audit: self-build at 8bfbb9ed1 (2.13.0 wheel, triton_experimental of that commit) =="
  audit .cache/genuine-8bfbb9ed1
else
  echo "== audit: pre-fix copy of the wheel (all five defects re-introduced) =="
  "$PY" -m tests.prefix_copies "$wheel" .cache/prefix-2.13.0 --force >/dev/null 2>&1
  audit .cache/prefix-2.13.0
fi
