#!/usr/bin/env bash
# Set up (same as scripts/test.sh) and audit the pinned torch-npu 2.13.0 wheel, then a
# pre-fix copy of it (the five defects re-introduced) being repaired.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
wheel=$(ls .cache/wheels/torch_npu-2.13.0-*.whl)
echo "== audit: published torch-npu 2.13.0 wheel =="
"$PY" -m npu_fixes audit --torch-npu "$wheel"
echo
echo "== audit: pre-fix copy of it (all five defects re-introduced) =="
"$PY" examples/make_prefix_copy.py "$wheel" .cache/prefix-2.13.0 --force >/dev/null 2>&1
"$PY" -m npu_fixes audit --torch-npu .cache/prefix-2.13.0
