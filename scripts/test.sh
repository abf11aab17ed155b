#!/usr/bin/env bash
# Set up everything on a fresh machine and run the tests, as the pinned-version matrix:
#   row "none":          torch 2.13.0 CPU + triton 3.6.0, torch_npu not installed (full suite;
#                        host-loader, audit and fix tests load the pinned wheels as files)
#   row "2.12.0.post3":  torch_npu installed --no-deps, no triton_experimental: all absent
#   rows "2.13.0", "2.14.0": torch_npu installed --no-deps: all fixed-upstream, nothing patched
# Usage: bash scripts/test.sh [extra pytest args for the "none" row]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

status=0
echo "== matrix row: torch_npu absent =="
"$PY" -m pytest -m "not gpu" tests "$@" || status=1

for version in "${PINNED_TORCH_NPU[@]}"; do
  site=".cache/site-$version"
  if [ ! -d "$site/torch_npu" ]; then
    "$PY" -m pip install -q --no-deps --target "$site" .cache/wheels/torch_npu-"$version"-*.whl
  fi
  echo "== matrix row: torch_npu $version installed =="
  PYTHONPATH="$PWD/$site" TORCH_DEVICE_BACKEND_AUTOLOAD=0 NPU_FIXES_MATRIX_TORCH_NPU="$version" \
    "$PY" -m pytest tests/test_matrix.py || status=1
done
exit $status
