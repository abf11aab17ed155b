"""Parallel cross entropy.

Semantics follow Transformer Engine's ``parallel_cross_entropy`` (v2.17). With a
``dist_process_group`` of several ranks each rank holds a contiguous slice of the vocabulary
(slices may differ in size); per-row partials (max, sum of exponentials, target logit, sum of
logits) are exchanged with one all-gather and merged, so every rank gets the single-device
loss. The backward needs no communication.

Host time (CUDA): one kernel launch per direction (the forward's last program finalizes split
rows and takes the mean: ``tuning.LAST_PROGRAM_TAIL``); eager calls go through per-signature
plans (launch configuration, one workspace, compiled kernels launched directly:
``tuning.FAST_LAUNCH``) and ``autograd.Function``'s C++ ``apply``; the custom ops are only
for ``torch.compile``.

Environment, read at every call:

* ``NPU_FIXES_CE_FORCE_TRITON=1`` / ``=0`` (or the shim's other on/off words) forces the
  Triton / PyTorch path (default: route by device and size, see :func:`use_triton`; in a
  vocabulary-parallel group every rank routes by the group's largest slice, so all take
  the same path).
* ``NPU_FIXES_CE_CHECK=1`` checks every target on the host and raises ``ValueError`` for
  one outside ``[0, V)`` that is not ``ignore_idx`` (a device sync; skipped while a CUDA
  graph is being captured). Without it such a row gets a NaN loss and a NaN gradient.

Modules, in call order:

* ``api``: :func:`parallel_cross_entropy` and the checks of its arguments;
* ``autograd``: the eager ``autograd.Function`` and the double-backward guard;
* ``custom_ops``: ``npu_fixes::cross_entropy_fwd/bwd`` for ``torch.compile``;
* ``eager_plans``: the eager fast path (CUDA): per-signature plans, direct launches;
* ``general_path``: forward and backward on the routed path, the optional target check;
* ``routing``: Triton or PyTorch, and the environment switches;
* ``sharding``: a rank's vocabulary slice and the all-gather of partials;
* ``torch_path`` / ``triton_path``: the two implementations;
* ``launch_config``: block size, warps, split of rows over programs;
* ``direct_launch``: launching compiled kernels past Triton's JIT, and its protocol check;
* ``kernels``: the Triton kernels (imported at the first Triton call);
* ``tuning``: the tunables, read at call time.

The package's API is this module's ``__all__``. Tests and benchmarks may also use the
modules' names without a leading underscore (set tunables in ``tuning``; the functions that
tests replace to observe the path taken, such as ``torch_path.forward``, are looked up
through their module at every call); names with one are private to their module.
"""

from .api import parallel_cross_entropy
from .routing import use_triton

__all__ = ["parallel_cross_entropy", "use_triton"]
