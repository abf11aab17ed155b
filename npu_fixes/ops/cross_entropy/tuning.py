"""Tunables of the cross entropy, read at call time: assigning one (``tuning.WAVES = 0``) or
changing an entry of a dict (``tuning.MAX_FUSED_BLOCK["cuda"] = 8192``) takes effect at the
next call (launch configurations and eager plans are keyed on them). Tests and benchmarks
set them here."""

from __future__ import annotations

# Largest vocabulary block one program holds at once, per device type. NPU: an assumption
# taken from the original user report (Ascend's unified buffer overflows above 4096 on a
# 910B3), not measured by us. CUDA: on an H200, blocks of 4096 to 32768 were tried and 4096
# was fastest (benchmarks/ce_benchmark.py --tune).
MAX_FUSED_BLOCK: dict[str, int] = {"npu": 4096, "cuda": 4096}
DEFAULT_MAX_BLOCK = 4096
# Warps per program on CUDA for the forward and backward kernels (measured on an H200).
CUDA_WARPS: dict[str, int] = {"fwd": 4, "bwd": 16}
# Most programs along grid axis 0; more rows are looped over inside a program.
MAX_ROW_PROGRAMS: dict[str, int] = {"cuda": 2**31 - 1}
DEFAULT_MAX_ROW_PROGRAMS = 65535
# Split a row's vocabulary over several programs until rows * splits >= WAVES * cores.
WAVES = 4
# Device types whose forward is one launch: the last program to finish (one atomic per
# program) finalizes split rows and computes the mean (see ce_forward_kernel). Elsewhere
# (NPU: no atomics assumed) separate finalize and mean kernels run after the forward kernel.
LAST_PROGRAM_TAIL: dict[str, bool] = {"cuda": True}
TAIL_BLOCK = 1024  # rows per step of the last program
# NPU: Triton wins from this vocabulary width up. An assumption taken from the original user
# report (its Ascend measurement), not measured by us.
NPU_MIN_TRITON_VOCAB = 16384
# Vector cores of an Ascend 910B2 (a 910B3 has 40): an assumption taken from the original user
# report, used only where torch_npu cannot tell the device's own count (see launch_config).
NPU_ASSUMED_VECTOR_CORES = 48
# Device types whose compiled kernels are launched directly, past Triton's JIT (see
# direct_launch); used only where JITFunction.run launches the way direct_launch does.
FAST_LAUNCH: dict[str, bool] = {"cuda": True}
