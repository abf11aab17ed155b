#!/usr/bin/env bash
# The GPU runs behind README's "What was verified where", as run on NVIDIA H200 machines
# (PyTorch 2.11, Triton 3.6, transformers installed). Usage:
#   OUT=DIR bash benchmarks/run_h200.sh [STAGE ...]     (default: every stage)
# Stages and what they write into $OUT (default ./h200-out):
#   ce        ce_bench.log, ce_summary.csv, ce_eager_sweep.csv, ce_typical.csv, ce_machine.txt,
#             ce_host_overhead.txt  cross entropy: eager wall and device time over the fixed sweep
#             (no random sweep), host time per call and where it goes
#   accuracy  acc_default.json, acc_reduce-overhead.json  npu-fixes accuracy, all models, 10 iterations
#   runtime   runtime_defects.txt, gpu_tests.log  scalar race, downcast, capture gate; gpu tests
#   longrun   longrun.tar.gz  2000-step trainings, ours vs PyTorch CE (tp=2 with 2 GPUs),
#             a last-bit control pair, host overhead of one call, gradients vs fp64
#   parallel  parallel_gpu.log  the 2-GPU NCCL test of the vocabulary-parallel cross entropy
# machine.txt is always written. Liger-Kernel is used when importable (e.g. wheels in .whl/).
set -u
OUT=${OUT:-$PWD/h200-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import platform, torch, triton, transformers; print(platform.node(), 'torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
} > "$OUT/machine.txt"

stage_ce() {  # CE_BASELINE=MODULE (found on CE_BASELINE_PATH) adds an earlier version to compare
  local base=() path=$PYTHONPATH${CE_BASELINE_PATH:+:$CE_BASELINE_PATH}
  [ -n "${CE_BASELINE:-}" ] && base=(--baseline "$CE_BASELINE")
  PYTHONPATH=$path python3 benchmarks/ce_benchmark.py --out /tmp/ce --sweep 0 ${base[@]+"${base[@]}"} \
    > "$OUT/ce_bench.log" 2>&1
  cp /tmp/ce/ce_summary.csv /tmp/ce/ce_eager_sweep.csv /tmp/ce/ce_typical.csv /tmp/ce/ce_machine.txt "$OUT/"
  PYTHONPATH=$path python3 benchmarks/ce_host_overhead.py --profile --out "$OUT/ce_host_overhead.txt" \
    ${base[@]+"${base[@]}"} > /tmp/ce/ce_host_overhead.log 2>&1 || tail -n 30 /tmp/ce/ce_host_overhead.log >> "$OUT/ce_bench.log"
}

stage_accuracy() {  # both modes, the model list in two halves: four processes at once
  local models first second mode half
  models=$(python3 -c "from npu_fixes.tools.accuracy_models import MODELS; print(' '.join(MODELS))")
  set -- $models
  first=$(echo "${@:1:6}" | tr ' ' ,); second=$(echo "${@:7}" | tr ' ' ,)
  for mode in default reduce-overhead; do
    for half in first second; do
      TORCHINDUCTOR_CACHE_DIR=/tmp/ind-$mode-$half timeout "${ACC_TIMEOUT:-1800}" python3 -m npu_fixes \
        accuracy --device cuda --iterations 10 --mode $mode --models "${!half}" --json \
        > /tmp/acc-$mode-$half.json 2> /tmp/acc-$mode-$half.err &
    done
  done
  wait
  for mode in default reduce-overhead; do
    python3 - "$mode" > "$OUT/acc_$mode.json" <<'PY'
import json, sys
mode = sys.argv[1]
parts = []
for half in ("first", "second"):
    try:
        parts.append(json.load(open(f"/tmp/acc-{mode}-{half}.json")))
    except ValueError:  # timed out or crashed: say so instead of dropping it silently
        parts.append({"models": [{"name": f"({half} half of the models)", "status": "not finished"}]})
merged = {k: v for k, v in parts[0].items() if k != "models"} or {"mode": mode}
merged["models"] = parts[0]["models"] + parts[1]["models"]
print(json.dumps(merged, indent=2))
PY
  done
}

stage_runtime() {
  TORCHINDUCTOR_CACHE_DIR=/tmp/ind-rd python3 -m tests.gpu.runtime_defects \
    --out "$OUT/runtime_defects.txt" > /tmp/rd.log 2>&1
  echo "tests.gpu.runtime_defects exit $?" > "$OUT/gpu_tests.log"
  tail -n 40 /tmp/rd.log >> "$OUT/gpu_tests.log"
  python3 -m pytest -q -rA -m gpu tests/gpu 2>&1 | grep -v "^DEBUG" >> "$OUT/gpu_tests.log"
}

longrun() {  # longrun STEM [ARGS...]: one 2000-step pair, outputs into /tmp/longrun
  local stem=$1; shift
  python3 examples/ce_long_run.py --steps 2000 --out /tmp/longrun --stem "$stem" "$@" \
    >> /tmp/longrun/stdout.txt 2>> /tmp/longrun/stderr.txt
}

stage_longrun() {  # timed pairs alone; with 2 GPUs the no-warm-up pair beside its control, then tp=2
  local gpus
  gpus=$(nvidia-smi -L | wc -l)
  rm -rf /tmp/longrun && mkdir -p /tmp/longrun
  longrun ce_long_run_tp1_b64
  longrun ce_long_run_tp1_b64_bf16loss --loss-autocast off
  longrun ce_long_run_tp1_b16 --batch 16
  # without warm-up: ours and a last-bit perturbation of PyTorch's loss, each against PyTorch's
  if [ "$gpus" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=0 longrun ce_long_run_tp1_b64_nowarmup --warmup 0 &
    CUDA_VISIBLE_DEVICES=1 longrun control_perturbed_b64_nowarmup --pair perturbed-torch --warmup 0 &
    wait
    longrun ce_long_run_tp2_b64 --tp 2
    longrun ce_long_run_tp2_b16 --tp 2 --batch 16
  else
    longrun ce_long_run_tp1_b64_nowarmup --warmup 0
    longrun control_perturbed_b64_nowarmup --pair perturbed-torch --warmup 0
  fi
  python3 benchmarks/ce_host_overhead.py > /tmp/longrun/ce_host_overhead.txt 2>&1
  python3 benchmarks/ce_training_grads.py > /tmp/longrun/ce_training_grads.txt 2>&1
  tar -C /tmp -czf "$OUT/longrun.tar.gz" longrun
}

stage_parallel() {
  python3 -m pytest -q -rA -m gpu tests/ops/test_cross_entropy_parallel.py > "$OUT/parallel_gpu.log" 2>&1
}

for stage in "${@:-ce accuracy runtime longrun parallel}"; do
  for s in $stage; do "stage_$s"; done
done
