"""mixed-leaf-xmask: a full reduction of a product of a bar and a block stops the compile with
``NameError: name 'xmask' is not defined``.

- **Defect**: after the promoted-reduction rewrite, ``_npu_preserve_mixed_leaf_mul_where``
  guards the narrower operand of a product whose operands span different reduction nodes
  with ``tl.where(<missing nodes' masks> & xmask, ...)``. A kernel whose x range is a single
  element (a reduction to one value: ``(F.softmax(x, -1) * torch.arange(8)).sum()``) has no x
  node and defines no ``xmask``: the kernel does not build.
- **Where**: ``codegen.triton._npu_apply_promoted_rtree_lines``, which ends with that guard.
- **Probe**: the live function on a promoted body holding such a product, for a kernel
  without x nodes: does a guard name ``xmask``?
- **Fix**: after the function, where the kernel's x range has no free node, the guards lose
  their ``& xmask`` term (every lane of the single x element is valid); kernels that define
  ``xmask`` are left as they are.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import Any

from ..shim.catalogue import NOT_FIXED, About
from ..shim.fix import Fix, Probe
from ..shim.patcher import Patcher
from .shared.promoted import TARGET, rewrite_body, two_node_lines

_GUARD = re.compile(r"(\s*\w+_broadcast_guard = tl\.where\()(.+?) & xmask(, .*)")


def without_xmask(line: str) -> str | None:
    """A broadcast guard ``line`` without its ``& xmask`` term; None for any other line."""
    match = _GUARD.fullmatch(line)
    return None if match is None else "".join(match.groups())


def defines_xmask(kernel: Any) -> bool:
    """Whether the kernel's header will define ``xmask``: its x range has a free node."""
    for tree in getattr(kernel, "range_trees", ()):
        if tree.prefix == "x":
            mapped = getattr(tree, "tree_node_mapping", {})
            return any(node.name not in mapped for node in tree.nodes.values())
    return False


def install(module: types.ModuleType, patcher: Patcher) -> None:
    signature = inspect.signature(getattr(module, TARGET))

    def apply_lines(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        kernel = signature.bind(*args, **kwargs).arguments["kernel"]
        if not defines_xmask(kernel):
            rewrite_body(kernel, without_xmask)
        return result

    patcher.wrap_path(module, TARGET, apply_lines)


def probe(module: types.ModuleType) -> Probe:
    body = ["    tmp0 = tl.load(in_ptr0 + (r0_0 + 8*r0_1), r0_1mask & r0_0mask, other=0.0)",
            "    tmp3 = (r0_0).to(tl.float32)",
            "    tmp4 = tmp0 * tmp3"]
    lines = two_node_lines(module, body)
    guards = [line.strip() for line in lines if without_xmask(line) is not None]
    if guards:
        return Probe(True, f"a product of a bar and a block in a reduction to one value is guarded with "
                           f"xmask, which such a kernel does not define: {guards[0]}")
    return Probe(False, "the promoted rewrite guards no product with xmask")


FIX = Fix(
    name="mixed-leaf-xmask",
    about=About(
        symptom="a reduction to one value of a product of differently shaped operands "
                "(`(F.softmax(x, -1) * torch.arange(8)).sum()`) stops the compile: "
                "`NameError: name 'xmask' is not defined`",
        present=frozenset({"95c9094da", "f8802037a", "5ff81d9c5", "bafc50684", "2.13.0", "2.14.0"}),
        fixed_in=NOT_FIXED,
        workaround="`torch_npu._inductor.triton_experimental.config.rtree_real_block = False`",
    ),
    module="torch_npu._inductor.triton_experimental.codegen.triton",
    targets=(TARGET,),
    probe=probe,
    install=install,
)
