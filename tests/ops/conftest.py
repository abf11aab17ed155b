"""Run the cross entropy kernels in Triton's interpreter where no CUDA GPU is present.

TRITON_INTERPRET must be set before the kernels module is imported (Triton decides at
``@triton.jit`` time); the kernels are imported on the first launch, after this file.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
