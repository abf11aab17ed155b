"""Triton kernels for :func:`npu_fixes.ops.parallel_cross_entropy`.

Layout: the logits are a 3-D tensor ``(D0, D1, V)`` with arbitrary strides; row ``r`` of the
flattened ``N = D0 * D1`` rows is element ``(r // D1, r % D1)``. The ``V`` columns may be a slice
of a larger vocabulary of ``V_TOTAL`` entries starting at global index ``V_OFFSET`` (vocabulary
parallelism); targets are global indices. The columns of a row may be split into ``S`` chunks
handled by different programs. Each chunk yields four fp32 partials

* ``m``  - the chunk's maximum logit,
* ``d``  - sum of ``exp(x - m)`` over the chunk,
* ``xt`` - the target logit if the target lies in the chunk, else 0,
* ``sx`` - sum of the chunk's logits (for label smoothing),

and partials of any set of chunks combine exactly (``_combine``). They are stored ``(S, 4, N)``,
so the partials of the ranks of a vocabulary-parallel group, gathered along the first axis,
form one ``(ranks * S, 4, N)`` array that :func:`ce_finalize_kernel` merges like one device's.

All arithmetic is fp32. Index math on rows and strides is int64, so ``N * V`` may exceed 2**31.
Targets of any integer dtype are widened to int64 as they are loaded, before any comparison
with ``ignore_idx``; lanes past the last row get ``ignore_idx`` only after widening (as a
``tl.load`` fill value it would be cast to the target dtype: -100 as uint8 is 156, a class).
Loops are ``while`` loops: Triton 3.6's interpreter cannot take tensor bounds in ``range``
under NumPy 2, and the CPU tests run these kernels in that interpreter.
"""

from __future__ import annotations

import triton
import triton.language as tl

try:  # launch hooks (profilers); the module is newer than some Triton releases
    from triton import knobs as _knobs

    RUNTIME_KNOBS = _knobs.runtime
except ImportError:  # pragma: no cover - older Triton: no direct launches (see direct_launch.py)
    RUNTIME_KNOBS = None


@triton.jit
def _row_offsets(row, D1, s0, s1):
    """Element offset of row ``row`` (int64) for strides ``s0, s1`` of the two leading dims."""
    row64 = row.to(tl.int64)
    return (row64 // D1) * s0 + (row64 % D1) * s1


LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _chunk_partials(
    row_ptr,
    stride_v,
    tgt,
    valid,
    col_lo,
    col_hi,
    BLOCK: tl.constexpr,
    V_CONTIG: tl.constexpr,
    SMOOTH: tl.constexpr,
):
    """Partials ``(m, d, xt, sx)`` of columns ``[col_lo, col_hi)`` of one row; ``tgt`` is the
    target's column in this slice (outside ``[0, V)`` when another rank holds it).

    Nothing is read for an ignored row (``valid`` false): it returns ``(-inf, 0, 0, 0)``.
    ``sx`` is only summed with ``SMOOTH`` (label smoothing on), else it is 0.
    """
    m = tl.full((), float("-inf"), tl.float32)
    d = tl.zeros((), tl.float32)
    sx = tl.zeros((), tl.float32)
    start = col_lo
    while start < col_hi:
        cols = start + tl.arange(0, BLOCK)
        mask = (cols < col_hi) & valid
        if V_CONTIG:
            ptrs = row_ptr + cols
        else:
            ptrs = row_ptr + cols.to(tl.int64) * stride_v
        x = tl.load(ptrs, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        # A block of only -inf keeps m at -inf; shift by 0 then to avoid inf - inf.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        # exp(x - shift) as one FMA and ex2 per element
        d = d * tl.exp(m - shift) + tl.sum(tl.math.exp2(x * LOG2E - shift * LOG2E), 0)
        if SMOOTH:
            sx += tl.sum(tl.where(mask, x, 0.0), 0)
        m = m_new
        start += BLOCK
    in_chunk = valid & (tgt >= col_lo) & (tgt < col_hi)
    xt = tl.load(row_ptr + tgt.to(tl.int64) * stride_v, mask=in_chunk, other=0.0).to(tl.float32)
    return m, d, xt, sx


@triton.jit
def _combine(m_a, d_a, m_b, d_b):
    """Merge two (max, sum-exp) pairs."""
    m = tl.maximum(m_a, m_b)
    shift = tl.where(m == float("-inf"), 0.0, m)
    return m, d_a * tl.exp(m_a - shift) + d_b * tl.exp(m_b - shift)


@triton.jit
def _finalize(m, d, xt, sx, tgt, V, eps, ignore_idx):
    """Loss and log-sum-exp of whole rows from their combined partials.

    Label smoothing as in PyTorch: ``(1-eps)*(lse - x_t) + eps*(lse - mean_j x_j)``.
    Ignored rows give loss 0 and lse 0; a target outside ``[0, V)`` gives NaN for both,
    so the error shows in the loss and in the gradient instead of a silent wrong value.
    """
    valid = tgt != ignore_idx
    bad = valid & ((tgt < 0) | (tgt >= V))
    lse = m + tl.log(tl.where(valid, d, 1.0))  # ignored rows read nothing: d == 0
    # Without smoothing the logit sum must not enter: it is -inf for -inf padded vocabularies.
    loss = lse - (1.0 - eps) * xt - eps * (tl.where(eps > 0.0, sx, 0.0) / V)
    nan = float("nan")
    lse = tl.where(bad, nan, tl.where(valid, lse, 0.0))
    loss = tl.where(bad, nan, tl.where(valid, loss, 0.0))
    return loss, lse


@triton.jit(do_not_specialize=["N", "D1", "ROW_STEP", "S", "V_OFFSET", "ignore_idx"])
def ce_forward_kernel(
    x_ptr,
    xs0,
    xs1,
    xsv,
    t_ptr,
    ts0,
    ts1,
    loss_ptr,
    lse_ptr,
    part_ptr,
    mean_ptr,
    inv_ptr,
    sync_ptr,
    N,
    D1,
    V,
    V_OFFSET,
    V_TOTAL,
    CHUNK,
    S,
    ROW_STEP,
    eps,
    ignore_idx,
    BLOCK: tl.constexpr,
    V_CONTIG: tl.constexpr,
    FUSED: tl.constexpr,
    SMOOTH: tl.constexpr,
    TAIL: tl.constexpr = False,
    REDUCE: tl.constexpr = False,
    TAIL_BLOCK: tl.constexpr = 1024,
):
    """Grid ``(ROW_STEP, S)``: partials of chunk ``program_id(1)`` for rows
    ``program_id(0), program_id(0) + ROW_STEP, ...``.

    ``FUSED`` (``S == 1``, whole vocabulary): finalize directly into ``loss``/``lse``.
    Otherwise store the partials into ``part`` laid out ``(S, 4, N)``.

    ``TAIL`` (one launch per forward): the program that finishes last, found with one
    atomic on ``sync_ptr`` (an int64 that is 0 at launch and 0 again at exit: the last
    program resets it), combines the partials of every row into ``loss``/``lse`` (when not
    ``FUSED``) and, with ``REDUCE``, writes the mean over non-ignored rows to ``mean`` and
    ``1/max(count, 1)`` to ``inv``. The count travels in the atomic's low 32 bits
    (integer, exact); the loss sum is a fixed-order sum by that one program, so the result
    is deterministic whichever program comes last.
    """
    split = tl.program_id(1)
    col_lo = split * CHUNK
    col_hi = tl.minimum(col_lo + CHUNK, V)
    row = tl.program_id(0)
    n_valid = tl.zeros((), tl.int64)
    while row < N:
        tgt = tl.load(t_ptr + _row_offsets(row, D1, ts0, ts1)).to(tl.int64)
        valid = tgt != ignore_idx
        row_ptr = x_ptr + _row_offsets(row, D1, xs0, xs1)
        m, d, xt, sx = _chunk_partials(
            row_ptr, xsv, tgt - V_OFFSET, valid, col_lo, col_hi, BLOCK, V_CONTIG, SMOOTH
        )
        if FUSED:
            loss, lse = _finalize(m, d, xt, sx, tgt, V_TOTAL, eps, ignore_idx)
            tl.store(loss_ptr + row, loss)
            tl.store(lse_ptr + row, lse)
        else:
            base = part_ptr + split.to(tl.int64) * 4 * N + row
            tl.store(base, m)
            tl.store(base + N, d)
            tl.store(base + 2 * N, xt)
            tl.store(base + 3 * N, sx)
        if REDUCE:
            n_valid += (valid & (split == 0)).to(tl.int64)  # each row counted by one chunk
        row += ROW_STEP
    if TAIL:
        _last_program_tail(
            loss_ptr, lse_ptr, part_ptr, mean_ptr, inv_ptr, sync_ptr, t_ptr, ts0, ts1, N, D1, S,
            V_TOTAL, eps, ignore_idx, n_valid, FUSED, REDUCE, TAIL_BLOCK
        )


@triton.jit
def _last_program_tail(
    loss_ptr,
    lse_ptr,
    part_ptr,
    mean_ptr,
    inv_ptr,
    sync_ptr,
    t_ptr,
    ts0,
    ts1,
    N,
    D1,
    S,
    V_TOTAL,
    eps,
    ignore_idx,
    n_valid,
    FUSED: tl.constexpr,
    REDUCE: tl.constexpr,
    TAIL_BLOCK: tl.constexpr,
):
    """Run by every program after its rows; only the last one to arrive does the work.

    One atomic per program: +2**32 (programs done) plus its count of non-ignored rows.
    Release/acquire on it (after a barrier, so every thread's stores precede it) makes every
    other program's stores visible to the last one, whose loads bypass L1 (``.cg``).
    """
    tl.debug_barrier()
    ticket = tl.atomic_add(sync_ptr, n_valid + (1 << 32), sem="acq_rel")
    if (ticket >> 32) == tl.num_programs(0).to(tl.int64) * tl.num_programs(1) - 1:
        tl.debug_barrier()
        count = (ticket & 0xFFFFFFFF) + n_valid
        total = tl.zeros((TAIL_BLOCK,), tl.float32)
        start = 0
        while start < N:
            rows = start + tl.arange(0, TAIL_BLOCK)
            rmask = rows < N
            if FUSED:
                loss = tl.load(loss_ptr + rows, mask=rmask, other=0.0, cache_modifier=".cg")
            else:
                m = tl.full((TAIL_BLOCK,), float("-inf"), tl.float32)
                d = tl.zeros((TAIL_BLOCK,), tl.float32)
                xt = tl.zeros((TAIL_BLOCK,), tl.float32)
                sx = tl.zeros((TAIL_BLOCK,), tl.float32)
                s = tl.zeros((), tl.int64)
                while s < S:
                    base = part_ptr + s * 4 * N + rows
                    m_s = tl.load(base, mask=rmask, other=float("-inf"), cache_modifier=".cg")
                    d_s = tl.load(base + N, mask=rmask, other=0.0, cache_modifier=".cg")
                    m, d = _combine(m, d, m_s, d_s)
                    xt += tl.load(base + 2 * N, mask=rmask, other=0.0, cache_modifier=".cg")
                    sx += tl.load(base + 3 * N, mask=rmask, other=0.0, cache_modifier=".cg")
                    s += 1
                tgt = tl.load(t_ptr + _row_offsets(rows, D1, ts0, ts1), mask=rmask, other=0).to(tl.int64)
                tgt = tl.where(rmask, tgt, ignore_idx)  # lanes past N: ignored (and not stored)
                loss, lse = _finalize(m, d, xt, sx, tgt, V_TOTAL, eps, ignore_idx)
                tl.store(loss_ptr + rows, loss, mask=rmask)
                tl.store(lse_ptr + rows, lse, mask=rmask)
            if REDUCE:
                total += tl.where(rmask, loss, 0.0)
            start += TAIL_BLOCK
        if REDUCE:
            inv = 1.0 / tl.maximum(count, 1).to(tl.float32)
            tl.store(mean_ptr, tl.sum(total, 0) * inv)
            tl.store(inv_ptr, inv)
        tl.store(sync_ptr, tl.zeros((), tl.int64))  # ready for the next launch on this stream


@triton.jit(do_not_specialize=["N", "D1", "S", "ignore_idx"])
def ce_finalize_kernel(
    part_ptr,
    t_ptr,
    ts0,
    ts1,
    loss_ptr,
    lse_ptr,
    N,
    D1,
    S,
    V,
    eps,
    ignore_idx,
    BLOCK_R: tl.constexpr,
):
    """Combine ``S`` chunk partials ``(S, 4, N)`` per row into loss and lse (``V``: the whole
    vocabulary's size)."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < N
    m = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    d = tl.zeros((BLOCK_R,), tl.float32)
    xt = tl.zeros((BLOCK_R,), tl.float32)
    sx = tl.zeros((BLOCK_R,), tl.float32)
    s = tl.zeros((), tl.int64)
    while s < S:
        base = part_ptr + s * 4 * N + rows
        m_s = tl.load(base, mask=rmask, other=float("-inf"))
        d_s = tl.load(base + N, mask=rmask, other=0.0)
        m, d = _combine(m, d, m_s, d_s)
        xt += tl.load(base + 2 * N, mask=rmask, other=0.0)
        sx += tl.load(base + 3 * N, mask=rmask, other=0.0)
        s += 1
    tgt = tl.load(t_ptr + _row_offsets(rows, D1, ts0, ts1), mask=rmask, other=0).to(tl.int64)
    tgt = tl.where(rmask, tgt, ignore_idx)  # lanes past N: ignored (and not stored)
    loss, lse = _finalize(m, d, xt, sx, tgt, V, eps, ignore_idx)
    tl.store(loss_ptr + rows, loss, mask=rmask)
    tl.store(lse_ptr + rows, lse, mask=rmask)


@triton.jit(do_not_specialize=["N", "D1", "ROW_STEP", "V_OFFSET", "ignore_idx"])
def ce_backward_kernel(
    x_ptr,
    xs0,
    xs1,
    xsv,
    g_ptr,
    gs0,
    gs1,
    gsv,
    t_ptr,
    ts0,
    ts1,
    lse_ptr,
    go_ptr,
    gos0,
    gos1,
    inv_ptr,
    N,
    D1,
    V,
    V_OFFSET,
    V_TOTAL,
    CHUNK,
    ROW_STEP,
    eps,
    ignore_idx,
    BLOCK: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    X_CONTIG: tl.constexpr,
    G_CONTIG: tl.constexpr,
):
    """``grad = (softmax - (1-eps)*onehot - eps/V_TOTAL) * grad_out[row] (* inv_count)`` over
    this slice's ``V`` columns; ``lse`` holds the whole vocabulary's log-sum-exp per row.

    Computed in fp32, rounded once to the gradient's dtype. Ignored rows get zeros without
    reading their logits. ``g_ptr`` may alias ``x_ptr`` with equal strides (in-place mode):
    each element is read before it is written, by the same program.
    """
    split = tl.program_id(1)
    col_lo = split * CHUNK
    col_hi = tl.minimum(col_lo + CHUNK, V)
    row = tl.program_id(0)
    while row < N:
        tgt = tl.load(t_ptr + _row_offsets(row, D1, ts0, ts1)).to(tl.int64)
        valid = tgt != ignore_idx
        lse2 = tl.load(lse_ptr + row) * LOG2E
        scale = tl.load(go_ptr + _row_offsets(row, D1, gos0, gos1)).to(tl.float32)
        if HAS_SCALE:
            scale = scale * tl.load(inv_ptr)
        scale = tl.where(valid, scale, 0.0)  # ignored rows: zeros, whatever grad_out holds
        smooth = scale * (eps / V_TOTAL)
        hit = scale * (1.0 - eps)
        x_row = x_ptr + _row_offsets(row, D1, xs0, xs1)
        g_row = g_ptr + _row_offsets(row, D1, gs0, gs1)
        start = col_lo
        while start < col_hi:
            cols = start + tl.arange(0, BLOCK)
            mask = cols < col_hi
            if X_CONTIG:
                x_ptrs = x_row + cols
            else:
                x_ptrs = x_row + cols.to(tl.int64) * xsv
            if G_CONTIG:
                g_ptrs = g_row + cols
            else:
                g_ptrs = g_row + cols.to(tl.int64) * gsv
            x = tl.load(x_ptrs, mask=mask & valid, other=0.0).to(tl.float32)
            g = tl.math.exp2(x * LOG2E - lse2) * scale - smooth
            g = tl.where(cols == tgt - V_OFFSET, g - hit, g)
            tl.store(g_ptrs, g.to(g_ptr.dtype.element_ty), mask=mask)
            start += BLOCK
        row += ROW_STEP


@triton.jit(do_not_specialize=["N", "D1", "ignore_idx"])
def ce_mean_kernel(
    loss_ptr,
    t_ptr,
    ts0,
    ts1,
    mean_ptr,
    inv_ptr,
    N,
    D1,
    ignore_idx,
    BLOCK_R: tl.constexpr,
):
    """One program: mean of the per-row losses over non-ignored rows, and ``1/max(count, 1)``.

    A fixed-order sum without atomics, so it is deterministic (and safe on Ascend).
    """
    total = tl.zeros((BLOCK_R,), tl.float32)
    count = tl.zeros((BLOCK_R,), tl.int32)
    start = 0
    while start < N:
        rows = start + tl.arange(0, BLOCK_R)
        rmask = rows < N
        total += tl.load(loss_ptr + rows, mask=rmask, other=0.0)
        tgt = tl.load(t_ptr + _row_offsets(rows, D1, ts0, ts1), mask=rmask, other=0).to(tl.int64)
        count += ((tgt != ignore_idx) & rmask).to(tl.int32)
        start += BLOCK_R
    inv = 1.0 / tl.maximum(tl.sum(count, 0), 1).to(tl.float32)
    tl.store(mean_ptr, tl.sum(total, 0) * inv)
    tl.store(inv_ptr, inv)
