# Sourced by scripts/test.sh and scripts/audit.sh: create .venv with torch 2.13.0 CPU,
# triton 3.6.0 and npu_fixes (editable, with test extras), and download the pinned
# torch_npu wheels into .cache/wheels. Safe to run again: it only fills what is missing.
PINNED_TORCH_NPU=(2.12.0.post3 2.13.0 2.14.0)
VENV="${NPU_FIXES_VENV:-.venv}"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  python3 -m venv "$VENV"
fi
if ! "$PY" -c "import torch, triton, wrapt, pytest, xdist, nox, npu_fixes, importlib.util as u; assert all(map(u.find_spec, ('megatron.core', 'material', 'ruff')))" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0" "triton==3.6.0"
  "$PY" -m pip install -q -e ".[test]"
fi
mkdir -p .cache/wheels
for version in "${PINNED_TORCH_NPU[@]}"; do
  if ! ls .cache/wheels/torch_npu-"$version"-*.whl >/dev/null 2>&1; then
    "$PY" -m pip download -q --no-deps -d .cache/wheels "torch-npu==$version"
  fi
done
export NPU_FIXES_WHEELS="$PWD/.cache/wheels"
