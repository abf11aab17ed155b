"""npu_fixes.tools.interpret in-process on hand-written kernels: the grid, the program order,
bounds checks, any block length, raw pointer reads, programs with work. Its use on the
backends' generated kernels: tests/fixes/test_rsplit_nested_range.py and test_rsplit_epilogue.py."""

from __future__ import annotations

import contextlib
import inspect
import math
import random

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from npu_fixes.tools.interpret import (
    InterpretedBinary,
    OutOfBounds,
    _npu_device_answers,
    bfloat16_rounded_to_nearest,
    interpret,
    interpreter_fast_paths,
    language_modules,
)
from tests.conftest import run_program, wheel_install

#: triton-ascend's libdevice and extension module as kernels see them on the interpreter device.
libdevice = language_modules()["triton.language.extra.cann"].libdevice
extract_slice = language_modules()["triton.language.extra.cann.extension"].extract_slice


def test_promotion_remembered_gives_the_operands_and_errors_triton_gives():
    """Binary operations on a table of operand pairs (tensors of several types and ranks,
    Python numbers, a pointer, NaN), twice each under the fast paths: the same result types,
    values and errors as Triton's own, an error every time it applies."""
    from triton.language import core, semantic
    from triton.runtime import interpreter

    def tensor(dtype: object, shape: list[int]) -> core.tensor:
        data = (np.arange(math.prod(shape) or 1) + 1).astype(interpreter._get_np_dtype(dtype))
        data = data.reshape(shape) if shape else data
        return core.tensor(interpreter.TensorHandle(data, dtype), tl.block_type(dtype, shape) if shape else dtype)

    def results() -> list[object]:
        semantics = semantic.TritonSemantic(interpreter.interpreter_builder)
        i32, f16, u32, i64 = (tensor(tl.int32, [4]), tensor(tl.float16, [2, 4]), tensor(tl.uint32, [4]),
                              tensor(tl.int64, []))
        pointer = core.tensor(interpreter.TensorHandle(np.array([64], dtype=np.uint64), tl.pointer_type(tl.float32)),
                              tl.pointer_type(tl.float32))
        pairs = [(i32, i32), (i32, 8), (8, i32), (i32, 2.5), (f16, 3), (f16, i32), (u32, 3), (u32, -1),
                 (i32, 2**40), (i64, i32), (f16, f16), (f16, float("nan")), (True, i32), (i32, pointer),
                 (pointer, i32), (f16, pointer)]
        out = []
        for _ in range(2):
            for lhs, rhs in pairs:
                for op in (semantics.add, semantics.truediv, semantics.and_):
                    try:
                        r = op(lhs, rhs, False) if op == semantics.add else op(lhs, rhs)
                    except Exception as exc:  # noqa: BLE001 - compared
                        out.append(f"{type(exc).__name__}: {exc}")
                        continue
                    out.append((str(r.type), r.handle.data.shape, r.handle.data.dtype, r.handle.data.tobytes()))
        return out

    expected = results()
    with interpreter_fast_paths():
        assert results() == expected
    assert sum(isinstance(r, str) for r in expected) >= 20  # errors are part of the table


@triton.jit
def _last_writer(out_ptr, ids_ptr, n):
    pid = tl.program_id(0)
    tl.store(out_ptr, pid)  # every program writes the same element: the last one wins
    tl.store(ids_ptr + pid, pid, mask=pid < n)


@triton.jit
def _block_of(out_ptr, BLOCK: tl.constexpr, numel):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, offsets * 2, mask=offsets < numel)


@triton.jit
def _copy(in_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(in_ptr + offsets))


@triton.jit
def _math(in_ptr, out_ptr, flags_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + offsets)
    tl.store(out_ptr + offsets, libdevice.exp(x) + libdevice.tanh(x) + libdevice.pow(x, 2.0))
    tl.store(flags_ptr + offsets, libdevice.isnan(tl.log(x)).to(tl.int32))


@triton.jit
def _odd_lanes(in_ptr, out_ptr):
    rows = tl.arange(0, 4)[:, None]
    lanes = tl.load(in_ptr + rows * 8 + tl.arange(0, 8)[None, :])  # a [4, 8] tile
    picked = extract_slice(lanes, [0, 1], [4, 3], [1, 2])  # lanes 1, 3, 5 of each row
    tl.store(out_ptr + rows * 3 + tl.arange(0, 3)[None, :], picked)


@triton.jit
def _copy_under_row_mask(in_ptr, out_ptr, rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)[None, :]
    mask = (row < rows) & (offsets < 3)  # a scalar mask and a block of them
    tl.store(out_ptr + row * 4 + offsets, tl.load(in_ptr + row * 4 + offsets, mask), mask)


@triton.jit
def _signed_by_flag(in_ptr, out_ptr, flag, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + offsets)
    tl.store(out_ptr + offsets, tl.where(flag, x, -x))
    tl.store(out_ptr + BLOCK + offsets, (flag & (x > 0)).to(tl.float32))


@triton.jit
def _row_max_twice(in_ptr, out_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, 4)[:, None]
    total = tl.zeros([4], tl.float32)
    for half in range(2):  # tl.max, a JIT helper of triton.language.standard, twice
        lanes = half * BLOCK + tl.arange(0, BLOCK)[None, :]
        total += tl.max(tl.load(in_ptr + rows * 2 * BLOCK + lanes), 1)
    tl.store(out_ptr + tl.arange(0, 4), total)


def _language_attributes() -> dict[str, object]:
    """Every attribute of the language modules and the tensor class the interpreter patches."""
    return {f"{owner.__name__}.{name}": value
            for owner in (tl, tl.core, tl.math, tl.tensor, tl.dtype) for name, value in vars(owner).items()}


def test_device_functions_run_as_called_and_the_language_is_restored(monkeypatch):
    """A helper seen by other language modules than the kernel's is patched for at its first
    call and run without patching again after; every patch is gone once the launch ends."""
    from triton.runtime import interpreter

    patch_lang, patched_for = interpreter._patch_lang, []
    monkeypatch.setattr(interpreter, "_patch_lang", lambda fn: patched_for.append(fn.__name__) or patch_lang(fn))
    before = _language_attributes()
    x, out = torch.randn(4, 16), torch.zeros(4)
    interpret(_row_max_twice.fn, (1, 1, 1), {"in_ptr": x, "out_ptr": out, "BLOCK": 8})
    # tl.zeros is patched for (it sees triton.language.core too); both tl.max calls, which
    # see the same modules, are not
    assert patched_for == ["_row_max_twice", "zeros"]
    assert torch.equal(out, x[:, :8].amax(1) + x[:, 8:].amax(1))
    after = _language_attributes()
    assert [k for k in before if after.get(k) is not before[k]] == []


@triton.jit
def _plus_one(x):
    return x + 1


def test_fast_paths_patch_for_device_functions_once_per_launch(monkeypatch):
    """Kernels launched by Triton's own interpreter (``TRITON_INTERPRET=1``, as the cross
    entropy tests run): with the fast paths a launch patches for its kernel and for a helper
    that sees other modules, once; each launch again; the same result as without, and the
    language restored after each. A helper called outside any launch is patched for at
    every call, as Triton does."""
    from triton.runtime import interpreter

    patch_lang, patched_for, scopes = interpreter._patch_lang, [], []

    def recording(fn):
        patched_for.append(fn.__name__)
        scopes.append(patch_lang(fn))
        return scopes[-1]

    monkeypatch.setattr(interpreter, "_patch_lang", recording)
    x = torch.randn(4, 16)

    def launch() -> torch.Tensor:
        out = torch.zeros(4)
        _row_max_twice[(1,)](x, out, BLOCK=8)
        return out

    before = _language_attributes()
    plain = launch()
    assert patched_for == ["_row_max_twice", "zeros", "max", "max"]  # Triton: at every call
    leaked = {k for k, v in _language_attributes().items() if before.get(k) is not v}
    assert leaked and all(k.startswith("triton.language.core.") for k in leaked)  # the helpers' patches
    for key in leaked:
        setattr(tl.core, key.rpartition(".")[2], before[key])
    patched_for.clear()
    with interpreter_fast_paths():
        opened = _language_attributes()  # with the fast paths' own patches
        assert [torch.equal(launch(), plain) for _ in range(2)] == [True, True]
        assert _language_attributes() == opened
        assert patched_for == ["_row_max_twice", "zeros"] * 2
        patched_for.clear()
        assert _plus_one(1) == 2 and _plus_one(2) == 3
        assert patched_for == ["_plus_one", "_plus_one"]
        for scope in reversed(scopes[-2:]):  # what Triton leaves patched after such a call
            scope.restore()
    assert _language_attributes() == before
    assert torch.equal(plain, x[:, :8].amax(1) + x[:, 8:].amax(1))


def test_interpreter_fast_paths_give_the_types_and_tensors_triton_makes():
    from triton.language import core, semantic
    from triton.runtime import interpreter

    def made() -> list[object]:
        shape = core.tuple([core.constexpr(4), core.constexpr(8)])
        block = tl.block_type(tl.float32, [4, core.constexpr(8)])
        return [shape.type, core.tuple([shape, core.constexpr(2)]).type,
                core.tuple_type([tl.float32, tl.pointer_type(tl.int64)], ["a", "b"]),
                block, block.with_element_ty(tl.int1), tl.block_type(tl.pointer_type(tl.int8), shape),
                tl.block_type(tl.int8, [4, 8])]

    def dtypes() -> list[object]:
        return [interpreter._get_np_dtype(t) for t in
                (tl.float32, tl.pointer_type(tl.float16), tl.block_type(tl.int8, [4]),
                 tl.block_type(tl.pointer_type(tl.int8), [4]), tl.bfloat16)]

    def tensors(types: list[object]) -> list[tuple[object, object, object]]:
        return [(t.shape, t.numel, t.dtype) for t in (core.tensor(None, ty) for ty in [*types[3:], tl.float32])]

    def broadcasts() -> list[list[tuple[object, object, bool]]]:
        """Triton's broadcast of operand pairs: each result's type, values, and whether it
        is the operand itself (two of one shape, two scalars) or a new tensor."""
        semantics = semantic.TritonSemantic(interpreter.interpreter_builder)

        def operand(shape: list[int]) -> core.tensor:
            data = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
            return core.tensor(interpreter.TensorHandle(data, tl.float32),
                               tl.block_type(tl.float32, shape) if shape else tl.float32)

        pairs = [([4, 8], [4, 8]), ([], []), ([4, 8], [1, 8]), ([1, 8], [4, 8]), ([4, 1], [1, 8]),
                 ([4, 8], [8]), ([4, 8], []), ([4, 8], [2, 8])]
        out = []
        for shapes in pairs:
            operands = [operand(shape) for shape in shapes]
            try:
                results = semantics.broadcast_impl_value(*operands)
            except ValueError as exc:
                out.append(str(exc))
                continue
            out.append([(r.type, r.handle.data.tolist(), r is o) for r, o in zip(results, operands, strict=True)])
        return out

    eager, eager_dtypes = made(), dtypes()
    eager_tensors, eager_broadcasts = tensors(eager), broadcasts()
    inits = core.tuple_type.__init__, core.block_type.__init__, core.tensor.__init__
    broadcast = semantic.TritonSemantic.broadcast_impl_value
    with interpreter_fast_paths():
        lazy = made()
        assert all("name" not in vars(t) for t in lazy)  # not formatted yet
        assert dtypes() == eager_dtypes
        assert tensors(lazy) == eager_tensors
        assert lazy[6].shape is lazy[4].shape and tensors(lazy)[3][0] is tensors(lazy)[1][0]  # shared
        assert broadcasts() == eager_broadcasts and "Cannot make_shape_compatible" in eager_broadcasts[-1]
        with pytest.raises(TypeError, match="0d block_type is forbidden"):
            tl.block_type(tl.float32, [])
    assert [str(t) for t in lazy] == [t.name for t in eager] and lazy == eager
    assert all({k: v for k, v in vars(a).items() if k != "_tensor_view"} == vars(b)
               for a, b in zip(lazy, eager, strict=True))  # names read above
    assert all(type(t.shape) is core.tuple for t in lazy[3:])  # block shapes: Triton's tuple
    assert (core.tuple_type.__init__, core.block_type.__init__, core.tensor.__init__) == inits
    assert semantic.TritonSemantic.broadcast_impl_value is broadcast and "name" in vars(made()[3])


def test_extract_slice_takes_offset_size_and_stride_per_dim():
    x, out = torch.arange(32, dtype=torch.float32), torch.zeros(12)
    interpret(_odd_lanes.fn, (1, 1, 1), {"in_ptr": x, "out_ptr": out})
    assert out.view(4, 3).tolist() == x.view(4, 8)[:, 1:7:2].tolist()


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
def test_libdevice_maps_to_math_or_numpy():
    x = torch.tensor([0.5, 1.0, -1.0, 2.0])
    out, flags = torch.zeros(4), torch.zeros(4, dtype=torch.int32)
    interpret(_math.fn, (1, 1, 1), {"in_ptr": x, "out_ptr": out, "flags_ptr": flags, "BLOCK": 4})
    assert torch.allclose(out, x.exp() + x.tanh() + x**2)
    assert flags.tolist() == [0, 0, 1, 0]  # log(-1) is NaN
    with pytest.raises(AttributeError, match="not modelled"):
        libdevice.no_such_function  # noqa: B018


def test_a_libdevice_function_of_operands_of_two_shapes_has_their_broadcast_shape():
    """``pow(tl.full([1], c), x)`` (RoPE's inverse frequencies) is x's shape, as Triton types it:
    typed [1], the next broadcast against x's shape failed."""
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    def block(values: list[float]) -> tl.tensor:
        data = np.array(values, dtype=np.float32)
        return tl.tensor(TensorHandle(data, tl.float32), tl.block_type(tl.float32, [len(values)]))

    powered = libdevice.pow(block([10.0]), block([0.0, 1.0, 2.0, 3.0]))
    assert powered.type.shape == [4] and powered.handle.data.tolist() == [1.0, 10.0, 100.0, 1000.0]
    flags = libdevice.isnan(block([0.0, float("nan")]))
    assert flags.type.shape == [2] and flags.dtype == tl.int1 and flags.handle.data.tolist() == [False, True]


def test_programs_run_in_row_major_order_or_shuffled():
    out, ids = torch.zeros(1, dtype=torch.int32), torch.full((8,), -1, dtype=torch.int32)
    interpret(_last_writer.fn, (8, 1, 1), {"out_ptr": out, "ids_ptr": ids, "n": 8})
    assert out.item() == 7 and ids.tolist() == list(range(8))
    lasts = set()
    for seed in range(6):
        order = random.Random(seed)
        expected = list(range(8))
        random.Random(seed).shuffle(expected)
        interpret(_last_writer.fn, (8, 1, 1), {"out_ptr": out, "ids_ptr": ids, "n": 8}, order)
        assert out.item() == expected[-1]  # the program the seeded order ran last
        lasts.add(out.item())
    assert len(lasts) > 1  # the order does change between seeds


@triton.jit
def _row_max(x_ptr, out_ptr, KEEP_NAN: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    if KEEP_NAN:  # triton-ascend's keyword, which stock Triton's tl.max lacks
        tl.store(out_ptr, tl.max(x, 0, propagate_nan=True))
    else:
        tl.store(out_ptr, tl.max(x, 0))


def test_max_reductions_keep_nan_where_asked():
    """``tl.max(..., propagate_nan=True)`` keeps a NaN of its row, as triton-ascend does; a
    plain ``tl.max`` drops it (``maxnum``, as the stock interpreter's ``np.nanmax`` does), and
    a later plain one in the same launch is not changed by an earlier NaN-keeping one."""
    x = torch.tensor([1.0, float("nan"), 3.0, 2.0, 0.0, -1.0, 5.0, 4.0])
    out = torch.zeros(1)
    interpret(_row_max.fn, (1, 1, 1), {"x_ptr": x, "out_ptr": out, "KEEP_NAN": True})
    assert torch.isnan(out).item()
    interpret(_row_max.fn, (1, 1, 1), {"x_ptr": x, "out_ptr": out, "KEEP_NAN": False})
    assert out.item() == 5.0
    interpret(_row_max.fn, (1, 1, 1), {"x_ptr": torch.arange(8.0), "out_ptr": out, "KEEP_NAN": True})
    assert out.item() == 7.0


def test_nan_of_max_and_min_reductions_is_judged_through_the_wheel():
    """Through the 2.13.0 wheel's backend (its ``max2`` asks ``tl.max`` to propagate NaN, its
    ``min2`` reduces with a NaN-keeping minimum), rows holding a NaN reduce to NaN, as in
    eager: the harness judges NaN results of max and min reductions."""
    res = run_program("interpret", "nan_reductions", env={"NPU_FIXES": "0"}, location=str(wheel_install("2.13.0")))
    assert res == {"amax": True, "amin": True, "max-of-all": True}, res


def test_the_device_is_a_gpu_type_for_inductor_as_the_npu_is(genuine):
    """Every state's loader makes "npu" a GPU type for Inductor; the interpreter device answers
    the same: a sum of 4 elements is unrolled (no ``tl.sum``: the CPU keeps the reduction), a
    transposed copy and a row sum of one input fuse into one kernel after its loops are
    reordered (the CPU skips that: two kernels), a softmax's rows of 1100 floats are stored
    with a stride padded to 1120 (comprehensive padding, skipped for a CPU graph); and of
    Inductor's choices on ``device.type == "cpu"``, a division by 3 is a multiplication by a
    third (the CPU keeps the division) and a ``[40, 1] @ [1, 6]`` product a pointwise one (the
    CPU decomposes it only up to 32 elements); each equal to eager. The CPU's answers are back
    once the device is closed."""
    res = run_program("interpret", "gpu_type_decisions", env={"NPU_FIXES": "0"},
                      location=str(genuine("bafc50684")))
    none = {"equal": True, "summing": 0, "reordered": 0, "row-stride-1120": 0, "by-a-third": 0,
            "mm-decomposed": 0}
    assert res == {
        "sum-of-4": none | {"kernels": 1},
        "transposed-copy-and-row-sum": none | {"kernels": 1, "summing": 1, "reordered": 1},
        "softmax-of-1100-then-matmul": none | {"kernels": 2, "summing": 1, "row-stride-1120": 1},
        "divide-by-3": none | {"kernels": 1, "by-a-third": 1},
        "outer-product-40x6": none | {"kernels": 2, "mm-decomposed": 1},
        "cpu-after": False,
        "div-compares-with-cpu-after": True,
    }, res


def test_inductor_choices_on_a_cpu_device_are_answered_as_for_the_npu_while_open(monkeypatch):
    """``grid_sampler_2d``'s decomposition expands the grid (the CPU's bilinear case does not),
    ``mm`` compares no device with "cpu"; both as before once closed."""
    import torch._inductor.decomposition as decomposition

    expanded = []
    monkeypatch.setattr(decomposition, "decomp_grid_sampler_2d",
                        lambda *args, _expand_grid, **kwargs: expanded.append(_expand_grid))
    image, grid = torch.rand(1, 2, 4, 4), torch.rand(1, 3, 3, 2)
    mm_constants = inspect.unwrap(decomposition.mm).__code__.co_consts
    decomposition.grid_sampler_2d(image, grid)
    with contextlib.ExitStack() as stack:
        for patch in _npu_device_answers():
            stack.enter_context(patch)
        decomposition.grid_sampler_2d(image, grid)
        assert "cpu" not in inspect.unwrap(decomposition.mm).__code__.co_consts
        assert ("cpu", "mps") not in inspect.unwrap(decomposition.mm).__code__.co_consts
    decomposition.grid_sampler_2d(image, grid)
    assert expanded == [False, True, False]
    assert inspect.unwrap(decomposition.mm).__code__.co_consts == mm_constants


def test_a_bool_passed_by_value_is_taken_as_a_device_takes_it():
    """A 0-dim bool the wrapper passes by value (the backend does so for a 0-dim bool tensor)
    selects and combines as a bool; Triton's interpreter alone refuses it at its first use."""
    x = torch.tensor([1.0, -2.0, 3.0, -4.0])
    for flag in (True, False):
        out = torch.zeros(8)
        interpret(_signed_by_flag.fn, (1, 1, 1), {"in_ptr": x, "out_ptr": out, "flag": flag, "BLOCK": 4})
        assert out[:4].tolist() == (x if flag else -x).tolist()
        assert out[4:].tolist() == ((x > 0) & flag).float().tolist()
    from triton.runtime.interpreter import InterpretedFunction
    with pytest.raises(Exception, match="primitive_bitwidth"):
        InterpretedFunction(_signed_by_flag.fn).run(
            grid=(1, 1, 1), warmup=False, in_ptr=x, out_ptr=torch.zeros(8), flag=True, BLOCK=4)


def test_any_block_length_and_programs_with_work():
    out = torch.zeros(30, dtype=torch.int32)
    busy = interpret(_block_of.fn, (4, 1, 1), {"out_ptr": out, "BLOCK": 12, "numel": 30})
    assert out.tolist() == [2 * i for i in range(30)]
    assert busy == 3  # the fourth program's offsets are all masked off


def test_out_of_bounds_store_raises_before_writing():
    guard = torch.zeros(64, dtype=torch.float32)
    src, dst = torch.ones(16), guard[:8]  # dst's storage holds 64 floats: 16 stay inside
    interpret(_copy.fn, (1, 1, 1), {"in_ptr": src, "out_ptr": dst, "BLOCK": 16})
    assert guard[:16].tolist() == [1.0] * 16
    small = torch.zeros(8)
    with pytest.raises(Exception, match="OutOfBounds") as info:
        interpret(_copy.fn, (1, 1, 1), {"in_ptr": src, "out_ptr": small, "BLOCK": 16})
    assert isinstance(info.value.__cause__, OutOfBounds) and "store outside every buffer" in str(info.value)
    assert small.tolist() == [0.0] * 8  # nothing was written


def test_a_mask_of_a_scalar_and_a_block_is_taken_as_bools():
    """The interpreter gives ``scalar_mask & block_mask`` int32 data under an int1 type; the
    bounds check takes it as bools, as the load and store do, not as indexes."""
    src, dst = torch.arange(8.0), torch.zeros(8)
    interpret(_copy_under_row_mask.fn, (2, 1, 1), {"in_ptr": src, "out_ptr": dst, "rows": 2, "BLOCK": 4})
    assert dst.tolist() == [0.0, 1.0, 2.0, 0.0, 4.0, 5.0, 6.0, 0.0]


def test_bounds_check_of_addresses_in_one_buffer_and_across_several():
    """The check itself on raw addresses, two buffers of 64 bytes at 1000 and 2000: a span
    inside one passes, as do addresses in both; the last element one past the end, an
    address in the gap between them (the lowest and highest inside), or one beyond both,
    raise and count the addresses outside."""
    from types import SimpleNamespace as NS

    from triton.runtime.interpreter import TensorHandle

    from npu_fixes.tools.interpret import _bounds_checked

    def buffer(start: int) -> NS:
        return NS(untyped_storage=lambda: NS(data_ptr=lambda: start, nbytes=lambda: 64))

    busy: set[tuple] = set()
    builder = NS(create_masked_load=lambda *args: "loaded", create_masked_store=lambda *args: None, grid_idx=(0, 0, 0))
    load_patch, _ = _bounds_checked(builder, {"a": buffer(1000), "b": buffer(2000)}, "k", busy)

    def load(*addresses: int) -> str:
        ptrs = TensorHandle(np.array(addresses, dtype=np.uint64), tl.pointer_type(tl.float32))
        mask = TensorHandle(np.ones(len(addresses), dtype=bool), tl.int1)
        with load_patch:
            try:
                return builder.create_masked_load(ptrs, mask, None)
            except OutOfBounds as exc:
                return str(exc).removeprefix("k: a load outside every buffer passed to the kernel ")

    assert load(1000, 1060, 1004) == "loaded"
    assert load(1000, 2060) == "loaded"
    assert load(1000, 1064) == "(1 of 2 addresses)"
    assert load(1061) == "(1 of 1 addresses)"
    assert load(1000, 1500, 2000) == "(1 of 3 addresses)"
    assert load(2000, 3000, 996) == "(2 of 3 addresses)"
    assert busy == {(0, 0, 0)}


def test_binary_reads_pointers_as_the_signature_says():
    """An int64 buffer passed where the kernel was compiled for ``*i32`` is read as raw
    32-bit words, as an NPU reads a pointer."""
    src = torch.tensor([5, 7], dtype=torch.int64)
    dst = torch.zeros(4, dtype=torch.int32)
    launches = []
    kernel = JITFunction(_copy.fn)  # what the backend compiles (a JIT function in any mode)
    binary = InterpretedBinary(triton.compiler.ASTSource(kernel, {"in_ptr": "*i32", "out_ptr": "*i32", "BLOCK": "constexpr"},
                                                         {"BLOCK": 4}), launches, None)
    binary.run(1, 1, 1, None, None, None, None, None, None, src, dst)
    assert dst.tolist() == [5, 0, 7, 0]  # little-endian halves of the two int64 values
    assert [(launch.kernel, launch.grid, launch.arguments, launch.constants, launch.busy)
            for launch in launches] == [("_copy", (1, 1, 1), ("in_ptr", "out_ptr"), {"BLOCK": 4}, 1)]


def test_bfloat16_casts_round_to_nearest_while_asked():
    """The interpreter's own float32 -> bfloat16 cast truncates; under
    ``bfloat16_rounded_to_nearest`` it rounds to nearest even, as torch (and a device) does,
    carries included (9983.9 -> 9984, not 9920), and other casts are left as they are."""
    from triton.runtime import interpreter

    values = np.array([1.0 + 2**-8 + 2**-10, -9983.9, 1.0 + 3 * 2**-8, 1e-40, 3.0], dtype=np.float32)
    src, builder = interpreter.TensorHandle(values, tl.float32), interpreter.interpreter_builder

    def cast(dst: object) -> list[float]:
        data = builder.create_fp_trunc(src, dst).data
        if dst != tl.bfloat16:
            return data.tolist()
        return torch.from_numpy(data.view(np.int16).copy()).view(torch.bfloat16).tolist()

    rounded = torch.from_numpy(values).to(torch.bfloat16).tolist()
    assert cast(tl.bfloat16) != rounded and cast(tl.bfloat16)[1] == -9920.0
    with bfloat16_rounded_to_nearest():
        assert cast(tl.bfloat16) == rounded and rounded[1] == -9984.0
        assert cast(tl.float16) == values.astype(np.float16).tolist()
    assert cast(tl.bfloat16)[1] == -9920.0
