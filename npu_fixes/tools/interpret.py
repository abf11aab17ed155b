"""Run a host-loaded backend's generated kernels on CPU, Triton's interpreter as the device.

The backend's own scheduling, codegen, wrapper, heuristics decorators, autotuner and
launcher (its grid) stay in the loop. Only the last step is replaced: where triton-ascend
would build a binary, :class:`InterpretedBinary` runs the same JIT function in Triton's
interpreter over the grid the backend's launcher passes. What this cannot show: anything
of the NPU compiler (bishengir), the NPU math library, graph capture, or a race that needs
programs running at once (the interpreter runs them one after another; ``order`` may
shuffle them). Autotuning keeps the first config (no device timer).

Stand-ins this needs, each a gap between CPU and NPU: the triton-ascend language modules
(``tl.extra.cann``: libdevice mapped to ``tl.math`` or numpy, ``extract_slice`` as numpy slicing), the
3.2-era ``AttrsDescriptor`` the split reduction's combine kernel is described with, its
``MLIRCompilationError``, a driver-free Triton hash and no GPU driver to select, the
launcher built for triton-ascend 3.2.x's layout (what our users have; ``runtime="3.6"``
builds it for this machine's Triton as it is instead), the "cpu"
device's processor count reported as the NPU's vector core count, as torch_npu reports it
for its device (Inductor's reduction hints and splits depend on it: with this machine's
few cores, real widths never get the OUTER hint), Inductor's decisions for a GPU type (what
the loader makes "npu") taken for the "cpu" device, and for the loader's decomposition
registration (:func:`activate`) the NPU runtime's answers to the device queries of the
modules it imports, and the kernels of torch_npu's dropout pair its decompositions call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import numbers
import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

#: Pointer element types of Triton signatures, as torch dtypes.
_POINTER_DTYPES = {
    "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "i1": "bool",
}


@dataclasses.dataclass
class Launch:
    """One kernel launch: the kernel's name, the grid the launcher passed, the names of the
    arguments passed, its constants and how many of its programs read or wrote any element
    (the others found no work)."""

    kernel: str
    grid: tuple[int, int, int]
    arguments: tuple[str, ...]
    constants: dict[str, Any]
    busy: int = 0
    #: The kernel's Python source (its ``def``).
    source: str = ""


class AttrsDescriptor:
    """Triton 3.2's kernel-attribute record (absent from newer Triton): kept as given."""

    def __init__(self, properties: dict | None = None) -> None:
        self.properties = properties or {}

    @classmethod
    def from_dict(cls, data: dict) -> AttrsDescriptor:
        return cls(dict(data.get("arg_properties", {})))

    def to_dict(self) -> dict:
        return {"arg_properties": self.properties, "cls": "AttrsDescriptor"}

    def __repr__(self) -> str:
        return f"AttrsDescriptor.from_dict({self.to_dict()!r})"


class MLIRCompilationError(Exception):
    """triton-ascend's compile error class, which the backend catches by name."""


def _extract_slice(x: Any, offsets: Any, sizes: Any, strides: Any) -> Any:
    """bishengir's register tile slice: element ``i`` of each dim is ``x``'s element
    ``offset + i * stride`` of that dim, ``size`` of them."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def number(value: Any) -> int:
        value = getattr(value, "value", value)
        return int(value.handle.data.item()) if isinstance(value, tl.tensor) else int(value)

    picks = tuple(slice(number(o), number(o) + number(n) * number(st), number(st))
                  for o, n, st in zip(offsets, sizes, strides, strict=True))
    data = x.handle.data[picks]
    return tl.tensor(TensorHandle(data, x.dtype), tl.block_type(x.dtype, list(data.shape)))


_CANN = "triton.language.extra.cann"
#: libdevice functions that ``tl.math`` lacks, by the numpy function computing them.
_NUMPY_LIBDEVICE = {
    "tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "tan": "tan", "asin": "arcsin", "acos": "arccos",
    "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2",
    "pow": "power", "log1p": "log1p", "expm1": "expm1", "trunc": "trunc", "rint": "rint",
    "nearbyint": "rint", "round": "round", "isnan": "isnan", "isinf": "isinf", "signbit": "signbit",
}


def _numpy_elementwise(name: str) -> Callable[..., Any]:
    """libdevice function ``name`` computed by numpy on the interpreter's tensors."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    compute = getattr(np, _NUMPY_LIBDEVICE[name])

    def elementwise(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        first = tensors[0]
        data = compute(*[a.handle.data if isinstance(a, tl.tensor) else a for a in args])
        element = tl.int1 if data.dtype == np.bool_ else first.dtype
        if data.dtype != np.bool_:
            data = data.astype(first.handle.data.dtype)
        # typed by the operands' broadcast shape, as Triton broadcasts an extern function's
        # operands (``pow(tl.full([1], c), x)`` is x's shape, not [1])
        blocks = any(t.type.is_block() for t in tensors)
        typed = tl.block_type(element, list(data.shape)) if blocks else element
        return tl.tensor(TensorHandle(data, element), typed)

    return elementwise


def _libdevice() -> types.ModuleType:
    """triton-ascend's libdevice for the interpreter: ``tl.math``'s function of the name (looked
    up at each use: the interpreter patches ``tl.math`` while a kernel runs), else numpy's."""
    import triton.language as tl

    module = types.ModuleType(_CANN + ".libdevice")

    def lookup(name: str) -> Any:
        if hasattr(tl.math, name):
            return getattr(tl.math, name)
        if name in _NUMPY_LIBDEVICE:
            return _numpy_elementwise(name)
        raise AttributeError(f"libdevice.{name} is not modelled by the interpreter")

    module.__getattr__ = lookup  # type: ignore[method-assign]
    return module


def language_modules() -> dict[str, types.ModuleType]:
    """``triton.language.extra.cann`` and its ``extension`` module, as kernels import them."""
    cann = types.ModuleType(_CANN)
    extension = types.ModuleType(_CANN + ".extension")
    extension.extract_slice = _extract_slice
    cann.extension, cann.libdevice = extension, _libdevice()
    return {cann.__name__: cann, extension.__name__: extension}


@contextlib.contextmanager
def _modules(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    """``modules`` in ``sys.modules`` while open; only those keys are put back after, so
    modules imported meanwhile stay (``mock.patch.dict`` would drop them)."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _npu_allocation(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("an NPU buffer was asked for on the CPU device")


def _pointer_view(tensor: Any, element: str) -> Any:
    """``tensor``'s bytes read as the signature's element type, as a raw NPU pointer is."""
    import torch

    dtype = getattr(torch, _POINTER_DTYPES.get(element, ""), None)
    if dtype is None or tensor.dtype == dtype:
        return tensor
    storage = tensor.untyped_storage()
    offset = tensor.storage_offset() * tensor.element_size()
    if offset % dtype.itemsize:
        raise ValueError(f"a {tensor.dtype} buffer at byte {offset} cannot be read as {dtype}")
    count = (storage.nbytes() - offset) // dtype.itemsize
    return torch.empty(0, dtype=dtype).set_(storage, offset // dtype.itemsize, (count,), (1,))


def _float_scalar(value: float, element: str) -> Any:
    """A float argument as a kernel on the device gets it: a scalar of the signature's type
    (Triton's interpreter passes a Python float on, on which ``.to()`` fails)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    ty = tl.str_to_ty(element, None)
    return tl.tensor(TensorHandle(np.array([value], dtype=_get_np_dtype(ty)), ty), ty)


class InterpretedBinary:
    """What ``triton.compile`` returns here: the launcher's ``run`` interprets the kernel.
    Like the compiled kernel of a Triton of the 3.6 generation, its class has no launch
    hooks (they are in ``triton.knobs.runtime``); :class:`InterpretedBinary32` has them."""

    def __init__(self, src: Any, launches: list[Launch], order: random.Random | None) -> None:
        self.src = src
        self.fn = src.fn
        self.name = src.fn.__name__
        self.constants = {self._name(k): v for k, v in (getattr(src, "constants", None) or {}).items()}
        self.signature = dict(getattr(src, "signature", None) or {})
        self.metadata = types.SimpleNamespace(num_warps=1, num_ctas=1, cluster_dims=(1, 1, 1), shared=0)
        self.num_warps, self.shared, self.function, self.packed_metadata = 1, 0, None, None
        self._launches, self._order = launches, order

    def _name(self, key: Any) -> str:
        if isinstance(key, tuple):  # (index,) keys of some Triton versions
            key = self.fn.arg_names[key[0]]
        return key

    def _init_handles(self) -> None:
        """Nothing to load: there is no binary."""

    def launch_metadata(self, grid: Any, stream: Any, *args: Any) -> None:
        return None

    def argument_names(self, count: int) -> list[str]:
        """The names of the ``count`` arguments a launcher passes: the kernel's parameters
        but its constexprs and those bound as None constants."""
        fn = self.fn
        names = [n for i, n in enumerate(fn.arg_names) if i not in fn.constexprs]
        if len(names) != count:  # arguments bound as None constants are not passed
            names = [n for n in names if not (n in self.constants and self.constants[n] is None)]
        if len(names) != count:
            raise TypeError(f"{fn.__name__}: launched with {count} arguments for {names}")
        return names

    def run(self, grid_0: int, grid_1: int, grid_2: int, stream: Any, function: Any, metadata: Any,
            launch_metadata: Any, enter_hook: Any, exit_hook: Any, *args: Any) -> None:
        grid = (int(grid_0), int(grid_1), int(grid_2))
        fn = self.fn
        names = self.argument_names(len(args))
        kwargs = {n: self.constants[n] for i, n in enumerate(fn.arg_names) if i in fn.constexprs}
        for name, arg in zip(names, args, strict=True):
            element = str(self.signature.get(name, ""))
            if element.startswith("*"):
                kwargs[name] = _pointer_view(arg, element[1:])
            elif isinstance(arg, float) and element.startswith("fp"):
                kwargs[name] = _float_scalar(arg, element)
            else:
                kwargs[name] = arg
        constants = {k: v for k, v in kwargs.items() if not hasattr(v, "data_ptr")}
        launch = Launch(fn.__name__, grid, tuple(names), constants, source=getattr(fn, "src", ""))
        self._launches.append(launch)
        launch.busy = interpret(fn.fn, grid, kwargs, self._order)


class InterpretedBinary32(InterpretedBinary):
    """:class:`InterpretedBinary` as triton-ascend 3.2.x compiles it: the launch hooks are
    attributes of its class (none set)."""

    launch_enter_hook = None
    launch_exit_hook = None


def _any_block_shape() -> list[Any]:
    """Patches that let blocks and ``tl.arange`` take any positive length, as triton-ascend
    does (stock Triton wants powers of 2)."""
    import triton.language as tl
    from triton.language import core, semantic

    def block_shape(shape: list[int]) -> int:
        numel = 1
        for i, d in enumerate(shape):
            if not isinstance(d, int) or d <= 0:
                raise ValueError(f"shape element {i} must be a positive int, got {d!r}")
            numel *= d
        return numel

    arange = semantic.TritonSemantic.arange

    def any_arange(self: Any, start: int, end: int, *, ret_ty: Any = None) -> Any:
        length = end - start
        if isinstance(length, int) and length > 0 and length & (length - 1):
            ret_ty = tl.block_type(tl.int32, [length])
            return self.tensor(self.builder.create_make_range(ret_ty.to_ir(self.builder), start, end), ret_ty)
        return arange(self, start, end, ret_ty=ret_ty)

    return [mock.patch.object(core, "validate_block_shape", block_shape),
            mock.patch.object(semantic.TritonSemantic, "arange", any_arange)]


def _langs_seen_by(fn: Any) -> frozenset[str]:
    """The Triton language modules a JIT function's globals hold: those the interpreter
    patches for it (``triton.runtime.interpreter._patch_lang``)."""
    import triton.language as tl

    return frozenset(v.__name__ for v in fn.__globals__.values()
                     if isinstance(v, types.ModuleType) and v in (tl, tl.core))


@contextlib.contextmanager
def interpreter_fast_paths() -> Iterator[None]:
    """While open, Triton's type machinery does less for the same values: the name of a
    tuple or block type, which Triton formats for every type it makes, is formatted when
    first read; a Triton type's numpy dtype is looked up once; blocks of the same integer
    dimensions share their shape objects (a block type's, and a tensor's of constexprs), as
    scalar tensors do; and two operands of one shape, or two scalars, skip the broadcast,
    and two blocks of one rank broadcast without Triton's comparisons of shape tuples.
    A binary operation's promoted type is worked out once per pair of operand types (and
    value, for a Python number), then the same casts and constants are made as Triton's
    makes them. A JIT helper called inside a launch is not patched for again where the
    launch has patched its language modules (``_language_patched_once_per_launch``).
    For interpreted kernels only: the compiler changes a tuple type's types after making it."""
    from triton.language import core, semantic
    from triton.runtime import interpreter

    def tuple_name(self: Any) -> str:
        pairs = zip(self.fields, self.types, strict=False)  # Triton's zip, as it formats it
        return "[" + ",".join([f"{k}:{v}" for k, v in pairs]) + "]"

    def block_name(self: Any) -> str:
        return f"<{self.shape}, {self.element_ty}>"

    for cls, name in ((core.tuple_type, tuple_name), (core.block_type, block_name)):
        if "__getattr__" not in vars(cls):  # kept: it serves only a name not yet formatted
            cls.__getattr__ = _formatted_when_read(name)

    def unnamed_tuple(self: Any, types: Any, fields: Any = None) -> None:
        self.types = types
        self.fields = fields or [""] * len(types)

    #: integer dimensions -> (a block type's shape, its numel, a tensor's shape, its numel)
    views: dict[tuple[int, ...], tuple[Any, int, Any, Any]] = {}

    def unnamed_block(self: Any, element_ty: Any, shape: Any) -> None:  # core's tuple, as there
        self.element_ty = element_ty
        assert isinstance(shape, (list, core.tuple))
        dims = shape.values if type(shape) is core.tuple else shape
        key = tuple(dims) if all(type(d) is int for d in dims) else None
        view = views.get(key) if key is not None else None
        if view is None:
            block_shape = core.tuple(core._unwrap_shape(shape))
            if not block_shape:
                raise TypeError("0d block_type is forbidden")
            numel = core.validate_block_shape(block_shape)
            tensor_shape = core.tuple([core.constexpr(d) for d in block_shape])
            view = (block_shape, numel, tensor_shape, core.constexpr(numel))
            if key is not None:
                views[key] = view
        self.shape, self.numel, self._tensor_view = view[0], view[1], view[2:]

    scalar_view = (core.tuple([]), core.constexpr(1))
    make_tensor = core.tensor.__init__

    def tensor_of_shared_shape(self: Any, handle: Any, type: Any) -> None:
        view = vars(type).get("_tensor_view") if type.is_block() else scalar_view
        if view is None:  # a block type made before
            make_tensor(self, handle, type)
            return
        self.handle, self.type, self.dtype = handle, type, type.scalar
        self.shape, self.numel = view

    broadcast = semantic.TritonSemantic.broadcast_impl_value

    def broadcast_unless_alike(self: Any, lhs: Any, rhs: Any) -> tuple[Any, Any]:
        """Two scalars, or two blocks of one shape, as they are; two blocks of one rank
        broadcast as Triton's does it, without its tuple comparisons; else Triton's."""
        left, right = lhs.type.is_block(), rhs.type.is_block()
        if left is not right:
            return broadcast(self, lhs, rhs)
        if not left:
            return lhs, rhs
        lhs_shape, rhs_shape = lhs.type.shape.values, rhs.type.shape.values
        if lhs_shape == rhs_shape:
            return lhs, rhs
        if len(lhs_shape) != len(rhs_shape):
            return broadcast(self, lhs, rhs)  # new axes first
        pairs = list(zip(lhs_shape, rhs_shape, strict=True))
        if any(a != b and 1 not in (a, b) for a, b in pairs):
            return broadcast(self, lhs, rhs)  # Triton's error
        shape = [b if a == 1 else a for a, b in pairs]
        return tuple(operand if operand.type.shape.values == shape else
                     self.tensor(self.builder.create_broadcast(operand.handle, shape),
                                 core.block_type(operand.type.scalar, shape)) for operand in (lhs, rhs))

    check_types = semantic.TritonSemantic.binary_op_type_checking_impl
    #: (left operand, right operand, div_or_mod) -> the type Triton promotes both to
    promoted: dict[tuple[Any, Any, bool], Any] = {}

    def operand_key(x: Any) -> Any:
        """What Triton's promotion reads of an operand: a tensor's scalar type, a Python
        number's type and value; None (not remembered) for a pointer, NaN or anything else."""
        if isinstance(x, core.tensor):
            scalar = x.type.scalar
            return None if scalar.is_ptr() else scalar
        if isinstance(x, numbers.Number) and x == x:
            return type(x), x
        return None

    def promoted_once(self: Any, lhs: Any, rhs: Any, allow_lhs_ptr: bool = False, allow_rhs_ptr: bool = False,
                      arithmetic_check: bool = True, div_or_mod: bool = False) -> tuple[Any, Any]:
        left, right = operand_key(lhs), operand_key(rhs)
        known = arithmetic_check and left is not None and right is not None
        key = (left, right, div_or_mod)
        ret = promoted.get(key) if known else None
        if ret is None:  # Triton's own checks: a bad pair raises here every time
            lhs, rhs = check_types(self, lhs, rhs, allow_lhs_ptr, allow_rhs_ptr, arithmetic_check, div_or_mod)
            if known:
                promoted[key] = lhs.type.scalar
            return lhs, rhs
        lhs = self.scalar_constant(lhs, dtype=ret) if type(left) is tuple else self.cast(lhs, ret)
        rhs = self.scalar_constant(rhs, dtype=ret) if type(right) is tuple else self.cast(rhs, ret)
        return self.broadcast_impl_value(lhs, rhs)

    np_dtype, np_dtypes = interpreter._get_np_dtype, {}

    def cached_np_dtype(tt_dtype: Any) -> Any:  # a block's is its element's
        scalar = tt_dtype.scalar
        if scalar.name not in np_dtypes:
            np_dtypes[scalar.name] = np_dtype(scalar)
        return np_dtypes[scalar.name]

    with mock.patch.object(core.tuple_type, "__init__", unnamed_tuple), \
            mock.patch.object(core.block_type, "__init__", unnamed_block), \
            mock.patch.object(core.tensor, "__init__", tensor_of_shared_shape), \
            mock.patch.object(semantic.TritonSemantic, "broadcast_impl_value", broadcast_unless_alike), \
            mock.patch.object(semantic.TritonSemantic, "binary_op_type_checking_impl", promoted_once), \
            mock.patch.object(interpreter, "_get_np_dtype", cached_np_dtype), \
            _language_patched_once_per_launch():
        yield


@contextlib.contextmanager
def _language_patched_once_per_launch() -> Iterator[None]:
    """While open, a JIT helper called inside a launch skips Triton's patching of the language
    modules it sees (a scan of every member of four modules, about half of an interpreted
    cross entropy test's time) where the launch has patched them already: the same patches,
    made again. A device function's patches stay until the launch's own are restored, and
    are undone first; one called outside any launch is patched for as Triton does."""
    from triton.runtime import interpreter

    patch_lang, device_call = interpreter._patch_lang, interpreter.InterpretedFunction.__call__
    langs_seen_by = functools.cache(_langs_seen_by)
    scopes: list[Any] = []  # the running launch's patch scope, then its device functions'
    patched: set[str] = set()  # the language modules patched for the running launch
    depth = 0  # how many device functions Triton is patching for and running now

    def recorded(fn: Any) -> Any:
        scope = patch_lang(fn)
        if depth and not scopes:
            return scope  # no launch: Triton keeps these patches, and so nothing is recorded
        patched.update(langs_seen_by(fn))
        if not scopes:
            restore = scope.restore

            def restore_all() -> None:
                while len(scopes) > 1:
                    scopes.pop().restore()
                restore()
                scopes.clear()
                patched.clear()

            scope.restore = restore_all
        scopes.append(scope)
        return scope

    def called(self: Any, *args: Any, **kw: Any) -> Any:
        nonlocal depth
        if not langs_seen_by(self.fn) <= patched:
            depth += 1
            try:
                return device_call(self, *args, **kw)
            finally:
                depth -= 1
        rewritten = self.rewrite()  # made once per function
        try:
            return rewritten(*args, **kw)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    with mock.patch.object(interpreter, "_patch_lang", recorded), \
            mock.patch.object(interpreter.InterpretedFunction, "__call__", called):
        yield


def _formatted_when_read(format_name: Callable[[Any], str]) -> Callable[[Any, str], Any]:
    """A ``__getattr__`` that formats a missing ``name`` with ``format_name`` (and keeps it)."""
    def name_when_read(self: Any, attr: str) -> Any:
        if attr != "name":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        self.name = format_name(self)
        return self.name

    return name_when_read


class OutOfBounds(RuntimeError):
    """A kernel read or wrote memory outside every buffer it was given."""


def _bounds_checked(builder: Any, kwargs: dict[str, Any], name: str, busy: set[tuple]) -> list[Any]:
    """Patches of ``builder``'s masked loads and stores that raise :class:`OutOfBounds` for
    an address outside the storages of the tensors in ``kwargs``, before any access; the
    program of each access with an element is added to ``busy``."""
    import numpy as np
    from triton.runtime.interpreter import _get_np_dtype

    storages = [t.untyped_storage() for t in kwargs.values() if hasattr(t, "untyped_storage")]
    spans = sorted({(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in storages})
    starts = np.array([start for start, _ in spans], dtype=np.uint64)
    ends = np.array([end for _, end in spans], dtype=np.uint64)

    def check(what: str, ptrs: Any, mask: Any, itemsize: int) -> None:
        # A mask of int1 type may hold int32 data (the interpreter's ``&`` of a scalar and a
        # block of bools): taken as bools, as the load and store take it, not as indexes.
        lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), ptrs.data.shape)
        addresses = np.asarray(ptrs.data, dtype=np.uint64)[lanes]
        if addresses.size:
            busy.add(tuple(builder.grid_idx))
            bounds = np.array([addresses.min(), addresses.max()])
            first, last = np.searchsorted(starts, bounds, side="right") - 1
            if first == last >= 0 and bounds[1] + np.uint64(itemsize) <= ends[first]:
                return  # lowest and highest in one buffer: so is every address between
        if not spans:
            inside = np.zeros(addresses.shape, dtype=bool)
        else:
            slot = np.searchsorted(starts, addresses, side="right") - 1
            inside = (slot >= 0) & (addresses + np.uint64(itemsize) <= ends[np.maximum(slot, 0)])
        if not np.all(inside):
            raise OutOfBounds(f"{name}: a {what} outside every buffer passed to the kernel "
                              f"({int((~inside).sum())} of {addresses.size} addresses)")

    load, store = builder.create_masked_load, builder.create_masked_store

    def checked_load(ptrs: Any, mask: Any, *args: Any) -> Any:
        check("load", ptrs, mask, _get_np_dtype(ptrs.get_element_ty()).itemsize)
        return load(ptrs, mask, *args)

    def checked_store(ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        check("store", ptrs, mask, value.data.dtype.itemsize)
        return store(ptrs, value, mask, *args)

    return [mock.patch.object(builder, "create_masked_load", checked_load),
            mock.patch.object(builder, "create_masked_store", checked_store)]


#: Keywords that triton-ascend's language functions take and stock Triton's lack, by the
#: function's module and name: taken here. ``tl.max(..., propagate_nan=...)`` keeps a NaN of
#: its row where the value asks for it, as on the device (stock Triton's interpreter reduces
#: ``tl.max`` with ``np.nanmax``, which drops NaN, as ``maxnum`` does without the keyword).
#: Any other keyword a function lacks fails as on the device: triton-ascend's ``tl.min`` has
#: no ``propagate_nan``.
_ASCEND_KEYWORDS = {("triton.language.standard", "max"): ("propagate_nan",)}


def _ascend_keywords(interpreter: Any) -> list[Any]:
    """Patches that take :data:`_ASCEND_KEYWORDS` at every call of an interpreted function
    (made after the fast paths' own patch of those calls, which they then call): the
    keywords are dropped, and inside a ``tl.max`` asked to propagate NaN a max reduction keeps
    NaN (``np.max``)."""
    import inspect

    import numpy as np
    import triton.language as tl

    keeping = [0]  # depth of the tl.max calls asked to propagate NaN
    function_class, reduce_ops = interpreter.InterpretedFunction, interpreter.ReduceOps
    call, apply_impl = function_class.__call__, reduce_ops.apply_impl

    def taking(self: Any, *args: Any, **kw: Any) -> Any:
        keeps_nan = False
        for extra in _ASCEND_KEYWORDS.get((self.fn.__module__, self.fn.__name__), ()):
            if extra not in inspect.signature(self.fn).parameters:
                keeps_nan = bool(kw.pop(extra, False))
        if not keeps_nan:
            return call(self, *args, **kw)
        keeping[0] += 1
        try:
            return call(self, *args, **kw)
        finally:
            keeping[0] -= 1

    def nan_keeping(self: Any, input: Any) -> Any:
        if keeping[0] and self.combine_fn == tl.standard._elementwise_max:
            return self.min_max(input[0], val_reduce_op=np.max, idx_reduce_op=None)
        return apply_impl(self, input)

    return [mock.patch.object(function_class, "__call__", taking),
            mock.patch.object(reduce_ops, "apply_impl", nan_keeping)]


def _bools_by_value(interpreter: types.ModuleType) -> Any:
    """A patch under which a bool passed to a kernel by value (a 0-dim bool tensor the wrapper
    reads on the host) is an ``int1`` scalar holding a bool, as a device takes it: Triton's
    interpreter makes it an ``int1`` holding an int32, which its first operation refuses."""
    import numpy as np
    import triton.language as tl

    implicit_cvt = interpreter._implicit_cvt

    def with_bools(arg: Any) -> Any:
        if isinstance(arg, (bool, np.bool_)):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        return implicit_cvt(arg)

    return mock.patch.object(interpreter, "_implicit_cvt", with_bools)


@contextlib.contextmanager
def bfloat16_rounded_to_nearest() -> Iterator[None]:
    """While open, the interpreter casts float32 to bfloat16 rounding to nearest even, as a
    device does; its own cast truncates."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    cast = builder.cast_impl

    def rounded(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return cast(self, src, dst_type)
        wide = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
        return interpreter.TensorHandle(wide.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16),
                                        dst_type.scalar)

    with mock.patch.object(builder, "cast_impl", rounded):
        yield


def interpret(function: Callable[..., Any], grid: tuple[int, int, int], kwargs: dict[str, Any],
              order: random.Random | None = None) -> int:
    """Run the Python ``function`` of a JIT kernel in Triton's interpreter over ``grid``,
    programs in row-major order or shuffled by ``order``; nested JIT helpers are
    interpreted too while it runs, and every load and store is bounds-checked. Returns how
    many programs read or wrote an element."""

    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    #: per function of this launch: its interpreted form
    interpreted = functools.cache(interpreter.InterpretedFunction)

    def nested(self: Any, *args: Any, **kw: Any) -> Any:  # a JIT helper made for compiled kernels
        return interpreted(self.fn)(*args, **kw)  # a device call (interpreter_fast_paths)

    patch_tensor = interpreter._patch_lang_tensor

    def index_by_item(tensor: Any, scope: Any) -> None:  # numpy 2 refuses int() of a 1-element array
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    builder = interpreter.interpreter_builder
    busy: set[tuple] = set()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_bools_by_value(interpreter))
        # The interpreter checks every int32 add, sub and mul for overflow (about half of its
        # time on index arithmetic); a device does not. A wrapped address still shows: every
        # load and store is bounds-checked.
        stack.enter_context(mock.patch.object(
            builder, "options", dataclasses.replace(builder.options, sanitize_overflow=False)))
        stack.enter_context(mock.patch.object(JITFunction, "__call__", nested))
        stack.enter_context(mock.patch.object(interpreter, "_patch_lang_tensor", index_by_item))
        stack.enter_context(interpreter_fast_paths())
        for patch in _ascend_keywords(interpreter):  # after the fast paths: they call theirs
            stack.enter_context(patch)
        for patch in (*_any_block_shape(), *_bounds_checked(builder, kwargs, function.__name__, busy)):
            stack.enter_context(patch)
        if order is not None:
            programs = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
            order.shuffle(programs)
            pending, set_idx = iter(programs), builder.set_grid_idx
            stack.enter_context(mock.patch.object(builder, "set_grid_idx",
                                                  lambda x, y, z: set_idx(*next(pending))))
        interpreter.InterpretedFunction(function).run(grid=grid, warmup=False, **kwargs)
    return len(busy)


#: Attribute of ``torch._inductor.decomposition`` naming the ``decomposition.py`` whose
#: registration filled Inductor's tables in this process.
_REGISTERED_BY = "_npu_fixes_registered_by"
_KERNELS: list = []  # keeps the torch.library registrations of the NPU kernels' stand-ins alive


def _npu_dropout_kernels() -> None:
    """CPU and Meta kernels of torch_npu's ``_npu_dropout`` and ``npu_dropout_backward`` (NPU
    kernels both), which the loaders' ``native_dropout`` decompositions call. The forward is the
    CPU's ``native_dropout`` (the numbers eager draws; on the NPU eager dropout runs
    ``_npu_dropout`` too), its keep-mask packed into a uint8 mask of torch_npu's size (one bit
    per element, least significant first, the elements rounded up to a multiple of 128); the
    backward unpacks it."""
    import torch

    def mask_bytes(numel: Any) -> Any:
        return (numel + 127) // 128 * 16

    def dropout(x: Any, p: float) -> tuple[Any, Any]:
        out, keep = torch.ops.aten.native_dropout(x, p, True)
        bits = torch.zeros(mask_bytes(x.numel()) * 8, dtype=torch.uint8, device=x.device)
        bits[: x.numel()] = keep.flatten()
        weights = torch.tensor([1 << i for i in range(8)], dtype=torch.uint8, device=x.device)
        return out, (bits.view(-1, 8) * weights).sum(1).to(torch.uint8)

    def backward(grad: Any, mask: Any, p: float) -> Any:
        shifts = torch.arange(8, dtype=torch.uint8, device=mask.device)
        keep = ((mask.unsqueeze(1) >> shifts) & 1).flatten()[: grad.numel()].view(grad.shape).bool()
        return torch.ops.aten.native_dropout_backward(grad, keep, 1 / (1 - p))

    library = torch.library.Library("npu", "IMPL")
    library.impl("_npu_dropout", dropout, "CPU")
    library.impl("_npu_dropout", lambda x, p: (torch.empty_like(x), x.new_empty(
        mask_bytes(x.numel()), dtype=torch.uint8)), "Meta")
    library.impl("npu_dropout_backward", backward, "CPU")
    library.impl("npu_dropout_backward", lambda grad, mask, p: torch.empty_like(grad), "Meta")
    _KERNELS.append(library)


def activate(codegen: types.ModuleType) -> None:
    """The backend of a host-loaded ``codegen.triton`` module activated, generating the
    kernels of Inductor's "cpu" device, with what torch_npu's ``_load_backend`` runs around the
    backend's ``_activate()`` where CPU can run it.

    Before it, the tree's ``_register_triton_experimental_decompositions()``, under
    :func:`npu_fixes.tools.host.npu_runtime_answers`, with :func:`_npu_dropout_kernels`; after
    it, the tree's ``_register_shared_decompositions()`` where its ``decomposition.py`` has one
    (the commits' ``_load_backend`` runs it after the loader). Not run: the loader's ``has_triton()`` check
    (the interpreter is the device), ``restore_inductor_baseline`` (in a fresh process it puts
    back what is there) and ``_apply_common_patches``, whose patches answer for the "npu"
    device from its runtime: ``patch_is_gpu`` (makes ``get_gpu_type()``, called by every
    compile's post-grad pass, ask ``torch.npu.is_available()``; what it changes in the
    kernels, "npu" a GPU type for Inductor, :func:`cpu_device` gives the "cpu" device),
    ``patch_has_triton`` (its module imports ``torch_npu._C``;
    Inductor asks it only of GPU devices and AOT compiles), ``patch_device_supports_tma`` (asks
    ``torch.npu.is_available()``; read by TMA paths only, off by default), and
    ``patch_codegen_with_cpp_wrapper`` and ``patch_cache_base_get_system`` (the C++ wrapper and
    the cache key, neither used here; the commits' ``graph.py`` and ``codegen/common.py``
    holding them are not in a self-build made of the wheel).

    Kept as PyTorch has it: ``F.scaled_dot_product_attention``, which 8bfbb9ed1's registration
    replaces (eager included) by a function sending 4-D inputs to ``npu_fusion_attention_v3``,
    an NPU kernel with no CPU kernel; attention there is compiled as at the other states.

    The registration fills Inductor's global tables: it runs once per process, and a tree
    other than the one whose registration ran is refused."""
    import torch._inductor.decomposition as tables
    import torch.nn.functional as functional
    from torch._inductor.codegen.common import register_backend_for_device

    from npu_fixes.tools import host

    package = codegen.__name__.rsplit(".", 2)[0]
    inductor = package.rsplit(".", 1)[0]
    registered = getattr(tables, _REGISTERED_BY, None)
    with host.npu_runtime_answers():
        decomposition = importlib.import_module(inductor + ".decomposition")
        if registered is None:
            _npu_dropout_kernels()
            attention = functional.scaled_dot_product_attention
            decomposition._register_triton_experimental_decompositions()
            functional.scaled_dot_product_attention = attention
            setattr(tables, _REGISTERED_BY, decomposition.__file__)
        elif registered != decomposition.__file__:
            raise RuntimeError(f"Inductor's decompositions hold the registration of {registered}; "
                               "activate one torch_npu per process")
    importlib.import_module(package)._activate()
    if registered is None and hasattr(decomposition, "_register_shared_decompositions"):
        decomposition._register_shared_decompositions()
    wrapper = importlib.import_module(package + ".codegen.wrapper").NPUWrapperCodeGen
    register_backend_for_device("cpu", codegen.NPUTritonScheduling, wrapper)


#: Inductor's modules whose answer to ``is_gpu`` shapes the kernels of a device.
_DEVICE_DECIDERS = ("ir", "scheduler", "lowering", "fx_passes.post_grad", "decomposition")
#: Inductor's functions that choose on ``device.type == "cpu"`` how to compile, answered as
#: for the NPU (module, name): a right pad rewritten as a cat, a cat's pointwise form, a division
#: by a constant as a multiplication by its reciprocal, ``mm``/``bmm``/``addmm`` with a
#: dimension of 1 decomposed under the conditions of devices other than the CPU.
_CPU_BRANCHES = (("lowering", "_pad_as_cat"), ("lowering", "cat"), ("lowering", "div_prim"),
                 ("decomposition", "mm"), ("decomposition", "bmm"), ("decomposition", "addmm"))


@contextlib.contextmanager
def _answered_as_npu(module: str, name: str) -> Iterator[None]:
    """While open, where Inductor's function ``name`` of ``module`` compares a device's type
    with "cpu" it compares it with a string no device type is (the constants of its code
    swapped in the same function object, which every table holding it sees); its own code is
    back when closed."""
    function = inspect.unwrap(getattr(importlib.import_module("torch._inductor." + module), name))
    code = function.__code__

    def other(constant: Any) -> Any:
        if constant == "cpu":
            return "cpu, answered as for the NPU"
        return type(constant)(map(other, constant)) if isinstance(constant, (tuple, frozenset)) else constant

    constants = tuple(map(other, code.co_consts))
    if constants == code.co_consts:
        raise RuntimeError(f"torch._inductor.{module}.{name} compares no device with 'cpu' (changed, "
                           "or answered already: one interpreter device at a time)")
    function.__code__ = code.replace(co_consts=constants)
    try:
        yield
    finally:
        function.__code__ = code


def _npu_device_answers() -> list[Any]:
    """Patches under which Inductor decides for the "cpu" device what it decides for the NPU.

    Every state's loader (``patch_is_gpu`` in ``_apply_common_patches``) adds "npu" to
    Inductor's GPU types, so the NPU's nodes are GPU nodes: loops reordered and merged after
    fusion (not merged in lowering, dependencies not normalized), full reductions of fewer
    than ``unroll_reductions_threshold`` elements unrolled, and the GPU branch of the
    convolution-backward and unfused-addmm choices. Still answered as for the CPU: the device
    index check of ``Scheduler.create_backend`` (a CPU device has no index) and which 0-dim
    buffers are CPU scalars (on the NPU only those on the CPU; here every tensor is one).
    Of the branches on ``device.type == "cpu"``, the variance's: its two-step form only up to
    ``unroll_reductions_threshold`` elements, as on any other device (the CPU's threshold is
    set to it); those of :data:`_CPU_BRANCHES` (:func:`_answered_as_npu`); ``grid_sampler_2d``'s
    decomposition expands the grid, as for any device but the CPU. Kept: the branches about CPU
    scalars and tensors moved between devices, the quantize lowering (a fallback at every
    state) and cooperative reductions and combo kernels (off unless configured). And
    comprehensive padding: the strides of intermediate buffers padded to an alignment, which
    Inductor skips for a graph without a GPU input and the triton_experimental loader leaves on
    (only the default backend's loader turns it off)."""
    import torch._inductor.config as inductor_config
    import torch._inductor.decomposition as decomposition
    import torch._inductor.scheduler as scheduler
    from torch._inductor.utils import is_gpu

    def npu_is_gpu(device_type: str | None) -> bool:
        return device_type == "cpu" or is_gpu(device_type)

    def as_cpu(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def asked_as_cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
            with mock.patch.object(scheduler, "is_gpu", is_gpu):
                return method(self, *args, **kwargs)

        return asked_as_cpu

    patches = [mock.patch.object(importlib.import_module("torch._inductor." + name), "is_gpu", npu_is_gpu)
               for name in _DEVICE_DECIDERS]
    patches.append(mock.patch.object(scheduler.BaseSchedulerNode, "is_cpu", lambda self: False))
    for name in ("create_backend", "update_zero_dim_cpu_tensor"):
        method = getattr(scheduler.Scheduler, name)
        patches.append(mock.patch.object(scheduler.Scheduler, name, as_cpu(method)))
    patches += [_answered_as_npu(module, name) for module, name in _CPU_BRANCHES]
    grid_sampler = decomposition.decomp_grid_sampler_2d

    def expanding_the_grid(*args: Any, _expand_grid: bool, **kwargs: Any) -> Any:
        # _expand_grid is False for a contiguous bilinear input on the CPU, True elsewhere
        return grid_sampler(*args, _expand_grid=True, **kwargs)

    patches.append(mock.patch.object(decomposition, "decomp_grid_sampler_2d", expanding_the_grid))
    threshold = inductor_config.unroll_reductions_threshold
    patches.append(inductor_config.patch({"cpp.use_two_step_variance_threshold": threshold,
                                          "disable_padding_cpu": False}))
    return patches


@contextlib.contextmanager
def cpu_device(codegen: types.ModuleType, order: random.Random | None = None,
               runtime: str = "3.2") -> Iterator[list[Launch]]:
    """While open, ``torch.compile`` on CPU tensors runs through the activated backend of
    ``codegen`` (see :func:`activate`) and its kernels run in the interpreter; yields the
    list the launches are recorded in. ``runtime`` is the triton-ascend generation the
    launchers are built for: "3.2" (what the self-builds were made for: hooks on the kernel
    class, ``AttrsDescriptor``, constexprs out of the launcher's arguments) or "3.6" (this
    machine's Triton as it is: hooks in ``triton.knobs``, no ``AttrsDescriptor``)."""
    if runtime not in ("3.2", "3.6"):
        raise ValueError(f"runtime {runtime!r}: the launchers are built for triton-ascend 3.2 or 3.6")
    import torch
    import torch._inductor.config as inductor_config
    import triton
    import triton.compiler.compiler as triton_compiler
    import triton.compiler.errors as triton_errors

    package = codegen.__name__.rsplit(".", 2)[0]
    heuristics = importlib.import_module(package + ".npu_triton_heuristics")
    launches: list[Launch] = []

    binary = InterpretedBinary32 if runtime == "3.2" else InterpretedBinary

    def compile_(src: Any, *args: Any, **kwargs: Any) -> InterpretedBinary:
        return binary(src, launches, order)

    def first_config(self: Any, *args: Any, **kwargs: Any) -> dict:
        return {launcher: float(i) for i, launcher in enumerate(self.launchers)}

    from torch._inductor.runtime.hints import DeviceProperties

    cores = importlib.import_module(package + ".device_props").get_npu_vector_core_count()
    create = DeviceProperties.create

    def npu_sized(cls: Any, device: Any) -> Any:
        props = create(device)
        return props._replace(multi_processor_count=cores) if device.type == "cpu" else props

    languages = language_modules()
    torch_npu_c = types.SimpleNamespace(_empty_strided_npu=_npu_allocation)  # bound by the wrapper
    patches = [
        _modules(languages),
        mock.patch.object(triton.language.extra, "cann", languages[_CANN], create=True),
        mock.patch.object(sys.modules["torch_npu"], "_C", torch_npu_c, create=True),
        mock.patch.object(triton_errors, "MLIRCompilationError", MLIRCompilationError, create=True),
        mock.patch.object(triton, "compile", compile_),
        mock.patch("torch.utils._triton.triton_hash_with_backend", lambda: "host"),
        mock.patch("torch._inductor.runtime.triton_helpers.set_driver_to_gpu", lambda: None),
        mock.patch.object(heuristics.NPUCachingAutotuner, "benchmark_all_configs", first_config),
        mock.patch.object(DeviceProperties, "create", classmethod(npu_sized)),
        inductor_config.patch(cpu_backend="triton", compile_threads=1, force_disable_caches=True),
        *_npu_device_answers(),
    ]
    if runtime == "3.2":
        patches += [mock.patch.object(triton_compiler, "AttrsDescriptor", AttrsDescriptor, create=True),
                    mock.patch("torch._inductor.utils.triton_version_uses_attrs_dict", lambda: False)]
    helpers = sys.modules.get(package + ".npu_triton_helpers")
    if hasattr(helpers, "libdevice"):  # loaded before: kernels import its libdevice
        patches.append(mock.patch.object(helpers, "libdevice", languages[_CANN].libdevice))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        torch._dynamo.reset()
        try:
            yield launches
        finally:
            torch._dynamo.reset()
