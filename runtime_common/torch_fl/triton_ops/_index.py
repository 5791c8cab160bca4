"""Triton kernels of the `index` family (scans, sorting, advanced indexing, scatter, selection).

`KERNELS` maps each name of the `index` family of `ops.yaml` to a function with the aten schema's
signature (see the package README).

Layouts: scans and sorts move the dim last and pack rows into a contiguous buffer of
the compute dtype (one program per row, `_common.rows_last`); scatter-like ops iterate
over the index (or source) shape in up to 6 dims, the scattered dim replaced by the
index value, like `_kernels.index_kernel` (the `gather` family's).
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _kernels as K
from . import _launch
from ._common import (DTYPE_CODES, acc_dtype, atleast1d, cdiv, compute_code, compute_dtype, contig, copy_into,
                      dtype_code, empty, fill_into, is_float, launch_pointwise, next_power_of_2, operand, promote,
                      resize_out, rows_last)

_BLOCK = 1024
_SORT_MAX = 1 << 14  # rank-by-counting is O(K^2) per row: longer rows go to the next step


# ----------------------------------------------------------------- kernels --
@triton.jit
def _isnan(x):
    return x != x


@triton.jit
def flip_kernel(src, out, N, S0, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5,
                o0, o1, o2, o3, o4, o5, XBASE, BLOCK: tl.constexpr):
    """out[p] = src[XBASE + p . x]: the source strides may be negative (flipped dims)."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    j5 = r % S5
    r = r // S5
    j4 = r % S4
    r = r // S4
    j3 = r % S3
    r = r // S3
    j2 = r % S2
    r = r // S2
    j1 = r % S1
    j0 = r // S1
    v = tl.load(src + XBASE + K._off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5), mask=mask)
    tl.store(out + K._off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5), v, mask=mask)


@triton.jit
def scatter_kernel(src, idx, out, N, S0, S1, S2, S3, S4, S5,
                   x0, x1, x2, x3, x4, x5, i0s, i1s, i2s, i3s, i4s, i5s,
                   o0, o1, o2, o3, o4, o5, SIZE_DIM,
                   DIM: tl.constexpr, ADD: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """Iterate over S*: out[p with p[DIM] := idx[p]] = src[p] (ADD: += with atomics).
    A value fill passes a 0-dim src with zero strides; index_copy/index_fill pass an index
    stride only along DIM. Out-of-range indices are skipped."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    j5 = r % S5
    r = r // S5
    j4 = r % S4
    r = r // S4
    j3 = r % S3
    r = r // S3
    j2 = r % S2
    r = r // S2
    j1 = r % S1
    j0 = r // S1
    iv = tl.load(idx + K._off6(j0, j1, j2, j3, j4, j5, i0s, i1s, i2s, i3s, i4s, i5s), mask=mask, other=0).to(tl.int64)
    iv = tl.where(iv < 0, iv + SIZE_DIM, iv)
    mask = mask & (iv >= 0) & (iv < SIZE_DIM)
    v = tl.load(src + K._off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5), mask=mask, other=0)
    if DIM == 0:
        j0 = iv
    elif DIM == 1:
        j1 = iv
    elif DIM == 2:
        j2 = iv
    elif DIM == 3:
        j3 = iv
    elif DIM == 4:
        j4 = iv
    else:
        j5 = iv
    optr = out + K._off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5)
    if ADD:
        tl.atomic_add(optr, K._to_odt(v, ODT), mask=mask)
    else:
        tl.store(optr, K._to_odt(v, ODT), mask=mask)


@triton.jit
def scan_kernel(x, y, L, PROD: tl.constexpr, BLOCK: tl.constexpr):
    """Inclusive cumulative sum / product of each contiguous row of length L; rows longer
    than BLOCK carry the previous chunk's last value into the next chunk."""
    base = tl.program_id(0).to(tl.int64) * L
    offs = tl.arange(0, BLOCK)
    carry = tl.sum(tl.zeros([BLOCK], dtype=x.dtype.element_ty), axis=0)
    if PROD:
        carry = carry + 1
    for k0 in range(0, L, BLOCK):
        k = k0 + offs
        m = k < L
        if PROD:
            v = tl.load(x + base + k, mask=m, other=1)
            s = tl.cumprod(v, axis=0) * carry
        else:
            v = tl.load(x + base + k, mask=m, other=0)
            s = tl.cumsum(v, axis=0) + carry
        tl.store(y + base + k, s, mask=m)
        carry = tl.sum(tl.where(offs == BLOCK - 1, s, 0), axis=0)


@triton.jit
def sort_rank_kernel(x, vals, idxs, L, DESC: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """Stable sort of each contiguous row by counting: the rank of x[i] is the number of
    elements ordered before it plus the equal ones at smaller positions. NaN compares
    as the largest value and equal to NaN, as ATen orders it."""
    base = tl.program_id(0).to(tl.int64) * L
    for i0 in range(0, L, BI):
        i = i0 + tl.arange(0, BI)
        mi = i < L
        a = tl.load(x + base + i, mask=mi)
        cnt = tl.zeros([BI], dtype=tl.int64)
        for j0 in range(0, L, BJ):
            j = j0 + tl.arange(0, BJ)
            mj = j < L
            b = tl.load(x + base + j, mask=mj)
            av = a[:, None]
            bv = b[None, :]
            an = _isnan(av)
            bn = _isnan(bv)
            if DESC:
                before = (bv > av) | (bn & (an == 0))
            else:
                before = (bv < av) | ((bn == 0) & an)
            same = (bv == av) | (an & bn)
            before = before | (same & (j[None, :] < i[:, None]))
            before = before & mj[None, :]
            cnt += tl.sum(before.to(tl.int64), axis=1)
        tl.store(vals + base + cnt, a, mask=mi)
        tl.store(idxs + base + cnt, i.to(tl.int64), mask=mi)


@triton.jit
def compact_kernel(flag_cum, src, out, N, INNER, SIZE, OSTRIDE, LIMIT,
                   MODE: tl.constexpr, BLOCK: tl.constexpr):
    """Stream compaction over a flat contiguous range of N elements; `flag_cum` holds the
    inclusive prefix count of selected elements. Selected element i goes to row
    flag_cum[i] - 1 of `out` (stride OSTRIDE): MODE 0 writes src[i] (masked_select),
    MODE 1 writes the coordinate (i // INNER) % SIZE of one dim (nonzero). MODE 2 is the
    inverse, out[i] = src[flag_cum[i] - 1] (masked_scatter). Rows from LIMIT on are
    dropped (nonzero_static)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    c = tl.load(flag_cum + i, mask=m, other=0)
    prev = tl.load(flag_cum + i - 1, mask=m & (i > 0), other=0)
    sel = m & (c != prev) & (c <= LIMIT)
    pos = (c - 1) * OSTRIDE
    if MODE == 0:
        v = tl.load(src + i, mask=sel)
        tl.store(out + pos, v, mask=sel)
    elif MODE == 2:
        v = tl.load(src + c - 1, mask=sel)
        tl.store(out + i, v, mask=sel)
    else:
        tl.store(out + pos, (i // INNER) % SIZE, mask=sel)


@triton.jit
def index_offset_kernel(src, off, dst, N, S0, S1, S2, S3, S4, S5,
                        x0, x1, x2, x3, x4, x5, f0, f1, f2, f3, f4, f5, o0, o1, o2, o3, o4, o5,
                        PUT: tl.constexpr, ADD: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """Advanced indexing over the result shape S*: the indexed element of `src` sits at
    p . x (the dims not indexed) + off[p . f] (the flat offset of the index tensors,
    broadcast over their dims). PUT=False: dst[p . o] = src[..] (index); PUT=True:
    src[..] = dst[p . o] (index_put, `dst` holds the values; ADD accumulates atomically)."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    j5 = r % S5
    r = r // S5
    j4 = r % S4
    r = r // S4
    j3 = r % S3
    r = r // S3
    j2 = r % S2
    r = r // S2
    j1 = r % S1
    j0 = r // S1
    so = K._off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5)
    so += tl.load(off + K._off6(j0, j1, j2, j3, j4, j5, f0, f1, f2, f3, f4, f5), mask=mask, other=0)
    do = K._off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5)
    if PUT:
        v = K._to_odt(tl.load(dst + do, mask=mask), ODT)
        if ADD:
            tl.atomic_add(src + so, v, mask=mask)
        else:
            tl.store(src + so, v, mask=mask)
    else:
        tl.store(dst + do, tl.load(src + so, mask=mask), mask=mask)


@triton.jit
def scatter_reduce_kernel(self_, src, idx, out, N, L, S0, S1, S2, S3, S4, S5,
                          c0, c1, c2, c3, c4, c5, x0, x1, x2, x3, x4, x5, i0s, i1s, i2s, i3s, i4s, i5s,
                          o0, o1, o2, o3, o4, o5, XD, ID,
                          DIM: tl.constexpr, RED: tl.constexpr, INCLUDE_SELF: tl.constexpr,
                          INT_MEAN: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """One program element per output p: reduce, in index order j = 0..L-1 along DIM (the
    order ATen's CPU loop visits them), the src[q] with q = p except q[DIM] = j, q inside
    the index's shape C*, and idx[q] == p[DIM]. RED: 0 sum, 1 prod, 2 mean, 3 amax, 4 amin
    (NaN propagates). Outputs nothing scatters to keep self; XD/ID are the src/index
    strides along DIM (the p . x / p . i offsets below have p[DIM]'s term removed)."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    j5 = r % S5
    r = r // S5
    j4 = r % S4
    r = r // S4
    j3 = r % S3
    r = r // S3
    j2 = r % S2
    r = r // S2
    j1 = r % S1
    j0 = r // S1
    if DIM == 0:
        pd = j0
    elif DIM == 1:
        pd = j1
    elif DIM == 2:
        pd = j2
    elif DIM == 3:
        pd = j3
    elif DIM == 4:
        pd = j4
    else:
        pd = j5
    inside = (j0 < c0) & (j1 < c1) & (j2 < c2) & (j3 < c3) & (j4 < c4) & (j5 < c5) & mask
    xb = K._off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5) - pd * XD
    ib = K._off6(j0, j1, j2, j3, j4, j5, i0s, i1s, i2s, i3s, i4s, i5s) - pd * ID
    ooff = K._off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5)
    sv = K._to_cdt(tl.load(self_ + ooff, mask=mask, other=0), CDT)
    if INCLUDE_SELF:
        acc = sv
        cnt = tl.full([BLOCK], 1, tl.int64)
    else:
        if RED == 1:
            acc = sv * 0 + 1
        elif RED == 3:
            acc = tl.where(sv == sv, sv, 0) * 0 - float("inf")
        elif RED == 4:
            acc = tl.where(sv == sv, sv, 0) * 0 + float("inf")
        else:
            acc = sv * 0
        cnt = tl.zeros([BLOCK], tl.int64)
    hits = tl.zeros([BLOCK], tl.int64)
    for j in range(0, L):
        iv = tl.load(idx + ib + j * ID, mask=inside, other=-1).to(tl.int64)
        hit = inside & (iv == pd)
        v = K._to_cdt(tl.load(src + xb + j * XD, mask=hit, other=0), CDT)
        if RED == 1:
            nv = acc * v
        elif RED == 3:
            nv = tl.where((v != v) | (v > acc), v, acc)
            nv = tl.where(acc != acc, acc, nv)
        elif RED == 4:
            nv = tl.where((v != v) | (v < acc), v, acc)
            nv = tl.where(acc != acc, acc, nv)
        else:
            nv = acc + v
        acc = tl.where(hit, nv, acc)
        hits += hit.to(tl.int64)
    cnt += hits
    if RED == 2:
        if INT_MEAN:
            # ATen divides integer means with rounding_mode="floor"; `//` truncates
            c = tl.maximum(cnt, 1).to(acc.dtype)
            q = acc // c
            acc = tl.where((acc - q * c != 0) & (acc < 0), q - 1, q)
        else:
            acc = acc / tl.maximum(cnt, 1).to(acc.dtype)
    res = tl.where(hits > 0, acc, sv)
    tl.store(out + ooff, K._to_odt(res, ODT), mask=mask)


@triton.jit
def _lse_combine(a, b):
    m = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    # -inf with -inf stays -inf; an inf maximum stays inf (no inf - inf)
    r = m + tl.log(1 + tl.exp(lo - m))
    # nested where, no `|` of comparisons: the interpreter's scan hands the combine
    # values it cannot bitwise-or
    r = tl.where(m == float("-inf"), m, tl.where(m == float("inf"), m, r))
    return tl.where(a != a, a, tl.where(b != b, b, r))


@triton.jit
def logcumsumexp_kernel(x, y, L, BLOCK: tl.constexpr):
    """log(cumsum(exp(x))) of each contiguous row, as a scan with a carry across chunks."""
    base = tl.program_id(0).to(tl.int64) * L
    offs = tl.arange(0, BLOCK)
    carry = tl.sum(tl.zeros([BLOCK], dtype=x.dtype.element_ty), axis=0) - float("inf")
    for k0 in range(0, L, BLOCK):
        k = k0 + offs
        m = k < L
        v = tl.load(x + base + k, mask=m, other=float("-inf"))
        sc = _lse_combine(tl.associative_scan(v, 0, _lse_combine), carry)
        tl.store(y + base + k, sc, mask=m)
        carry = tl.sum(tl.where(offs == BLOCK - 1, sc, 0), axis=0)


@triton.jit
def _cummax_combine(va, ia, vb, ib):
    # b follows a: it wins when it is NaN, or neither is NaN and b >= a (ATen: the last
    # NaN, else the last maximum)
    take_b = tl.where(vb != vb, True, tl.where(va != va, False, vb >= va))
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@triton.jit
def _cummin_combine(va, ia, vb, ib):
    take_b = tl.where(vb != vb, True, tl.where(va != va, False, vb <= va))
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@triton.jit
def cummaxmin_kernel(x, vals, idxs, L, IS_MAX: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * L
    offs = tl.arange(0, BLOCK)
    cv = tl.sum(tl.zeros([BLOCK], dtype=x.dtype.element_ty), axis=0)
    ci = tl.sum(tl.zeros([BLOCK], dtype=tl.int64), axis=0)
    for k0 in range(0, L, BLOCK):
        k = k0 + offs
        m = k < L
        v = tl.load(x + base + k, mask=m, other=0)
        if IS_MAX:
            sv, si = tl.associative_scan((v, k.to(tl.int64)), 0, _cummax_combine)
            if k0 > 0:
                sv, si = _cummax_combine(cv, ci, sv, si)
        else:
            sv, si = tl.associative_scan((v, k.to(tl.int64)), 0, _cummin_combine)
            if k0 > 0:
                sv, si = _cummin_combine(cv, ci, sv, si)
        tl.store(vals + base + k, sv, mask=m)
        tl.store(idxs + base + k, si, mask=m)
        cv = tl.sum(tl.where(offs == BLOCK - 1, sv, 0), axis=0)
        ci = tl.sum(tl.where(offs == BLOCK - 1, si, 0), axis=0)


@triton.jit
def searchsorted_kernel(seq, sorter, x, out, N, M, L, SEQ_ROWS, STEPS, RIGHT: tl.constexpr,
                        HAS_SORTER: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """Binary search of each x (contiguous rows of M values) in its row of `seq` (rows of L,
    one row shared when SEQ_ROWS == 0; with a sorter, position k of a row holds
    seq[sorter[k]]), with ATen's tests: lower bound moves right while
    !(seq >= x), upper bound while !(seq > x) (a NaN x lands at the end)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    v = tl.load(x + i, mask=m, other=0)
    base = (i // M) * L * SEQ_ROWS
    lo = tl.zeros([BLOCK], dtype=tl.int64)
    hi = tl.zeros([BLOCK], dtype=tl.int64) + L
    for _ in range(0, STEPS):
        act = lo < hi
        mid = lo + ((hi - lo) >> 1)
        if HAS_SORTER:
            pos = tl.load(sorter + base + mid, mask=m & act, other=0).to(tl.int64)
        else:
            pos = mid
        sv = tl.load(seq + base + pos, mask=m & act, other=0)
        if RIGHT:
            go = (sv > v) == 0
        else:
            go = (sv >= v) == 0
        lo = tl.where(act & go, mid + 1, lo)
        hi = tl.where(act & (go == 0), mid, hi)
    tl.store(out + i, K._to_odt(lo, ODT), mask=m)


# ---------------------------------------------------------------- helpers --
def _launch_grid(n):
    return (cdiv(n, _BLOCK),)


def _iter6(shape, strides_list):
    """Pad a shape and its operands' strides to 6 dims (no merging: DIM must stay put)."""
    nd = len(shape)
    if nd > 6:
        raise Unsupported("more than 6 dims")
    pad = 6 - nd
    return pad, [1] * pad + list(shape), [[0] * pad + list(st) for st in strides_list]


def _scatter_launch(src, idx, out, it_shape, src_st, idx_st, dim, add=False):
    n = 1
    for s in it_shape:
        n *= s
    if n == 0:
        return out
    pad, sh, sts = _iter6(it_shape, [src_st, idx_st, out.stride()])
    scatter_kernel[_launch_grid(n)](src, idx, out, n, *sh, *sts[0], *sts[1], *sts[2], out.shape[dim],
                                    DIM=dim + pad, ADD=add, ODT=dtype_code(out.dtype), BLOCK=_BLOCK)
    return out


def _into_out(self, out):
    """`out` holds a copy of `self` (nothing to do when out is self, the in-place case)."""
    if out is None:
        out = empty(self.shape, self.dtype, self.device)
    else:
        resize_out(out, self.shape)
    if out.data_ptr() != self.data_ptr() or out.stride() != self.stride():
        copy_into(out, self)
    return out


def _value_tensor(value, dtype, device):
    if isinstance(value, torch.Tensor):
        return copy_into(empty((), dtype, device), value)
    return fill_into(empty((), dtype, device), value)


# ------------------------------------------------------------ flip / roll --
def flip(self, dims):
    nd = self.dim()
    flips = {d % max(nd, 1) for d in dims}
    if self.is_complex():  # Triton has no complex types: flip the (real, imag) pairs as units
        return torch.view_as_complex(flip(torch.view_as_real(self), sorted(flips) if nd else []))
    out = empty(self.shape, self.dtype, self.device)
    n = self.numel()
    if n == 0:
        return out
    if nd == 0:
        return copy_into(out, self)
    st = list(self.stride())
    base = 0
    for d in flips:
        base += (self.shape[d] - 1) * st[d]
        st[d] = -st[d]
    _, sh, (xs, os_) = _iter6(list(self.shape), [st, list(out.stride())])
    flip_kernel[_launch_grid(n)](self, out, n, *sh, *xs, *os_, base, BLOCK=_BLOCK)
    return out


def roll(self, shifts, dims=()):
    shifts, dims = list(shifts), list(dims)
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
        flat = contig(self).view(-1)
        return roll(flat, shifts, [0]).view(self.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    src = self
    for s, d in zip(shifts, dims):
        d = d % max(self.dim(), 1)
        out = empty(self.shape, self.dtype, self.device)
        size = self.shape[d] if self.dim() else 1
        if size == 0 or self.dim() == 0:
            copy_into(out, src)
        else:
            k = s % size
            # out[k:] = src[:size-k], out[:k] = src[size-k:]
            if size - k:
                copy_into(out.narrow(d, k, size - k), src.narrow(d, 0, size - k))
            if k:
                copy_into(out.narrow(d, 0, k), src.narrow(d, size - k, k))
        src = out
    return src


# ----------------------------------------------------------------- scatter --
def _scatter_impl(self, dim, index, src, out, value=None):
    out = _into_out(self, out)
    if index.numel() == 0:
        return out
    o = atleast1d(out)
    dim = dim % o.dim()
    ix = atleast1d(index)
    if value is not None:
        s = _value_tensor(value, out.dtype, out.device)
        s_st = [0] * ix.dim()
    else:
        s = atleast1d(src)
        s_st = s.stride()
    _scatter_launch(s, ix, o, ix.shape, s_st, ix.stride(), dim)
    return out


def scatter_src(self, dim, index, src):
    return _scatter_impl(self, dim, index, src, None)


def scatter__src(self, dim, index, src):
    return _scatter_impl(self, dim, index, src, self)


def scatter_src_out(self, dim, index, src, *, out):
    return _scatter_impl(self, dim, index, src, out)


def scatter_value(self, dim, index, value):
    return _scatter_impl(self, dim, index, None, None, value)


def scatter__value(self, dim, index, value):
    return _scatter_impl(self, dim, index, None, self, value)


def scatter_value_out(self, dim, index, value, *, out):
    return _scatter_impl(self, dim, index, None, out, value)


# ------------------------------------------------- index_add / copy / fill --
def _index_dim_launch(src, index, out, dim, it_shape, src_st, add):
    """Iterate over it_shape (out's shape with it_shape[dim] = len(index)); the index
    is read along `dim` only."""
    ix = atleast1d(index)
    ist = [0] * len(it_shape)
    ist[dim] = ix.stride(0)
    return _scatter_launch(src, ix, out, it_shape, src_st, ist, dim, add=add)


def _index_add_impl(self, dim, index, source, alpha, out):
    x = atleast1d(self)
    dim = dim % x.dim()
    acc_dt = acc_dtype(self.dtype)
    acc = copy_into(empty(x.shape, acc_dt, self.device), x)
    s = atleast1d(source)
    if alpha != 1:
        s = launch_pointwise("mul", empty(s.shape, acc_dt, self.device), [s, alpha], compute_code(acc_dt))
    it = list(x.shape)
    it[dim] = atleast1d(index).numel()
    if s.dim() != len(it):
        s = s.view(it)
    _index_dim_launch(s, index, acc, dim, it, s.stride(), True)
    if out is None:
        out = empty(self.shape, self.dtype, self.device)
    else:
        resize_out(out, self.shape)
    return copy_into(out, acc.view(self.shape))


def index_add(self, dim, index, source, *, alpha=1):
    return _index_add_impl(self, dim, index, source, alpha, None)


def index_add_(self, dim, index, source, *, alpha=1):
    return _index_add_impl(self, dim, index, source, alpha, self)


def index_add_out(self, dim, index, source, *, alpha=1, out):
    return _index_add_impl(self, dim, index, source, alpha, out)


def _index_copy_impl(self, dim, index, source, out):
    out = _into_out(self, out)
    o = atleast1d(out)
    dim = dim % o.dim()
    it = list(o.shape)
    it[dim] = atleast1d(index).numel()
    s = atleast1d(source)
    if s.dim() != len(it):
        s = s.view(it)
    _index_dim_launch(s, index, o, dim, it, s.stride(), False)
    return out


def index_copy(self, dim, index, source):
    return _index_copy_impl(self, dim, index, source, None)


def index_copy_(self, dim, index, source):
    return _index_copy_impl(self, dim, index, source, self)


def index_copy_out(self, dim, index, source, *, out):
    return _index_copy_impl(self, dim, index, source, out)


def index_fill_(self, dim, index, value):
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s).")
    o = atleast1d(self)
    dim = dim % o.dim()
    it = list(o.shape)
    it[dim] = atleast1d(index).numel()
    v = _value_tensor(value, self.dtype, self.device)
    _index_dim_launch(v, index, o, dim, it, [0] * len(it), False)
    return self


# ------------------------------------------------------------------ scans --
def _scan_dtype(self, dtype):
    rdt = dtype if dtype is not None else (torch.int64 if not is_float(self.dtype) else self.dtype)
    dtype_code(rdt)
    # ATen's CPU scans accumulate floats in double (acc_type) and ints in int64.
    cdt = torch.float64 if is_float(rdt) else torch.int64
    return rdt, cdt


def _scan(self, dim, dtype, out, prod):
    rdt, cdt = _scan_dtype(self, dtype)
    if out is None:
        out = empty(self.shape, rdt, self.device)
    else:
        resize_out(out, self.shape)
    if self.numel() == 0:
        return out
    xm, d = rows_last(self, dim)
    buf = contig(xm, cdt)
    res = empty(xm.shape, cdt, self.device)
    length = xm.shape[-1]
    rows = xm.numel() // length
    block = min(max(next_power_of_2(length), 16), _BLOCK)
    scan_kernel[(rows,)](buf, res, length, PROD=prod, BLOCK=block)
    res = res.movedim(-1, d)
    if self.dim() == 0:
        res = res.view(())
    return copy_into(out, res)


def cumsum(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, None, False)


def cumsum_out(self, dim, *, dtype=None, out):
    return _scan(self, dim, dtype, out, False)


def cumsum_(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, self, False)


def cumprod(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, None, True)


def cumprod_out(self, dim, *, dtype=None, out):
    return _scan(self, dim, dtype, out, True)


def cumprod_(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, self, True)


# ----------------------------------------------------------------- sorting --
def _sort_impl(self, dim, descending, values=None, indices=None):
    if self.dtype not in DTYPE_CODES:
        raise Unsupported(f"sort of {self.dtype}")
    xm, d = rows_last(self, dim)
    length = xm.shape[-1] if self.dim() else 1
    if length > _SORT_MAX:
        raise Unsupported(f"sort rows longer than {_SORT_MAX}")
    if values is None:
        values = empty(self.shape, self.dtype, self.device)
    else:
        resize_out(values, self.shape)
    if indices is None:
        indices = empty(self.shape, torch.int64, self.device)
    else:
        resize_out(indices, self.shape)
    if self.numel() == 0:
        return values, indices
    cdt = compute_dtype(self.dtype)
    buf = copy_into(empty(xm.shape, cdt, self.device), xm)
    vbuf = empty(xm.shape, cdt, self.device)
    ibuf = empty(xm.shape, torch.int64, self.device)
    rows = xm.numel() // length
    bi = min(max(next_power_of_2(length), 16), 64)
    bj = min(max(next_power_of_2(length), 16), 128)
    sort_rank_kernel[(rows,)](buf, vbuf, ibuf, length, DESC=bool(descending), BI=bi, BJ=bj)
    vres, ires = vbuf.movedim(-1, d), ibuf.movedim(-1, d)
    if self.dim() == 0:
        vres, ires = vres.view(()), ires.view(())
    copy_into(values, vres)
    copy_into(indices, ires)
    return values, indices


def sort_stable(self, *, stable, dim=-1, descending=False):
    return _sort_impl(self, dim, descending)


def sort_values_stable(self, *, stable, dim=-1, descending=False, values, indices):
    return _sort_impl(self, dim, descending, values, indices)


# -------------------------------------------------------------- selection --
def _prefix_count(flags_src, n, device):
    """(inclusive prefix count of non-zero elements of a flat contiguous tensor, total)."""
    flags = launch_pointwise("ne", empty((n,), torch.int64, device), [flags_src, 0], compute_code(flags_src.dtype))
    cum = empty((n,), torch.int64, device)
    scan_kernel[(1,)](flags, cum, n, PROD=False, BLOCK=_BLOCK)
    return cum, int(cum[n - 1].item())  # the output size depends on the data: one host read


def nonzero(self, *, out=None):
    nd = self.dim()
    n = self.numel()
    flat = contig(self).view(-1) if n else None
    total = 0
    if n:
        cum, total = _prefix_count(flat, n, self.device)
    if out is None:
        out = empty((total, nd), torch.int64, self.device)
    else:
        resize_out(out, (total, nd))
    if total == 0:
        return out
    inner = 1
    for d in range(nd - 1, -1, -1):
        col = out.select(1, d)
        compact_kernel[_launch_grid(n)](cum, flat, col, n, inner, self.shape[d], col.stride(0), total,
                                        MODE=1, BLOCK=_BLOCK)
        inner *= self.shape[d]
    return out


def nonzero_out(self, *, out):
    return nonzero(self, out=out)


def nonzero_static(self, *, size, fill_value=-1):
    """The first `size` rows of nonzero(self), padded with fill_value: no host read."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got {size}")
    nd = self.dim()
    n = self.numel()
    out = fill_into(empty((size, nd), torch.int64, self.device), fill_value)
    if n == 0 or size == 0 or nd == 0:  # a 0-dim self has no coordinate columns
        return out
    flat = contig(self).view(-1)
    flags = launch_pointwise("ne", empty((n,), torch.int64, self.device), [flat, 0], compute_code(flat.dtype))
    cum = empty((n,), torch.int64, self.device)
    scan_kernel[(1,)](flags, cum, n, PROD=False, BLOCK=_BLOCK)
    inner = 1
    for d in range(nd - 1, -1, -1):
        col = out.select(1, d)
        compact_kernel[_launch_grid(n)](cum, flat, col, n, inner, self.shape[d], col.stride(0), size,
                                        MODE=1, BLOCK=_BLOCK)
        inner *= self.shape[d]
    return out



def masked_select(self, mask, *, out=None):
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    n = 1
    for s in shape:
        n *= s
    total = 0
    if n:
        x = copy_into(empty(shape, self.dtype, self.device), self.expand(shape)).view(-1)
        mk = copy_into(empty(shape, torch.bool, self.device), mask.expand(shape)).view(-1)
        cum, total = _prefix_count(mk, n, self.device)
    if out is None:
        out = empty((total,), self.dtype, self.device)
    else:
        resize_out(out, (total,))
    if total:
        compact_kernel[_launch_grid(n)](cum, x, out, n, 1, 1, out.stride(0), total, MODE=0, BLOCK=_BLOCK)
    return out


def masked_select_out(self, mask, *, out):
    return masked_select(self, mask, out=out)


def masked_scatter_(self, mask, source):
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got {self.dtype} and {source.dtype}")
    n = self.numel()
    if n == 0:
        return self
    mk = copy_into(empty(self.shape, torch.bool, self.device), mask.expand(self.shape)).view(-1)
    cum, total = _prefix_count(mk, n, self.device)
    if total > source.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    if total == 0:
        return self
    buf = copy_into(empty(self.shape, self.dtype, self.device), self).view(-1)
    src = contig(source).view(-1)
    compact_kernel[_launch_grid(n)](cum, src, buf, n, 1, 1, 1, total, MODE=2, BLOCK=_BLOCK)
    return copy_into(self, buf.view(self.shape))


# ------------------------------------------------------- advanced indexing --
def _index_plan(self, indices):
    """Expand bool masks (nonzero), wrap negative indices and fold the index tensors into
    one flat offset tensor. Returns (result shape, [(size, self stride, offset stride)]
    per result dim, offset tensor)."""
    ix = []
    for t in indices:
        if t is not None and t.dtype in (torch.bool, torch.uint8):
            nz = nonzero(t if t.dtype == torch.bool else launch_pointwise(
                "ne", empty(t.shape, torch.bool, t.device), [t, 0], compute_code(t.dtype)))
            ix.extend(nz.select(1, k) for k in range(t.dim()))
        else:
            if t is not None and t.dtype not in (torch.int64, torch.int32):
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            ix.append(t)
    if len(ix) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()} (got {len(ix)})")
    ix += [None] * (self.dim() - len(ix))
    dims = [d for d, t in enumerate(ix) if t is not None]
    bshape = list(torch.broadcast_shapes(*[ix[d].shape for d in dims]))
    off = empty(bshape, torch.int64, self.device)
    tmp = empty(bshape, torch.int64, self.device)
    for k, d in enumerate(dims):
        # floor remainder maps -size..-1 onto 0..size-1 (in-range indices are unchanged)
        launch_pointwise("remainder", tmp, [ix[d], self.shape[d]], compute_code(torch.int64))
        if k == 0:
            launch_pointwise("mul", off, [tmp, self.stride(d)], compute_code(torch.int64))
        else:
            launch_pointwise("add_alpha", off, [off, tmp, self.stride(d)], compute_code(torch.int64))
    ost = list(off.stride())
    bdims = [(bshape[i], 0, ost[i]) for i in range(len(bshape))]
    rest = [(self.shape[d], self.stride(d), 0) for d in range(self.dim()) if ix[d] is None]
    if dims == list(range(dims[0], dims[-1] + 1)):
        before = [(self.shape[d], self.stride(d), 0) for d in range(dims[0])]
        plan = before + bdims + rest[len(before):]
    else:
        plan = bdims + rest
    return [p[0] for p in plan], plan, off


def _index_run(self, plan, off, other, put, add):
    n = 1
    for p in plan:
        n *= p[0]
    if n == 0:
        return
    if len(plan) > 6:
        raise Unsupported("advanced indexing with a result of more than 6 dims")
    pad = 6 - len(plan)
    sh = [1] * pad + [p[0] for p in plan]
    xs = [0] * pad + [p[1] for p in plan]
    fs = [0] * pad + [p[2] for p in plan]
    os_ = [0] * pad + list(other.stride())
    index_offset_kernel[_launch_grid(n)](self, off, other, n, *sh, *xs, *fs, *os_, PUT=put, ADD=add,
                                         ODT=dtype_code(self.dtype), BLOCK=_BLOCK)


def index_Tensor(self, indices, *, out=None):
    if all(t is None for t in indices):
        raise Unsupported("index without index tensors")
    shape, plan, off = _index_plan(self, indices)
    if out is None:
        out = empty(shape, self.dtype, self.device)
    else:
        resize_out(out, shape)
    _index_run(self, plan, off, out, False, False)
    return out


def index_Tensor_out(self, indices, *, out):
    return index_Tensor(self, indices, out=out)


# Accumulation in a dtype with an atomic add, for the dtypes without one: rounded once when
# stored back (16-bit floats: no less accurate than ATen's add-by-add rounding); integers and
# bool come back exact (a wrapping sum truncated to 8/16 bits is the wrapping 8/16-bit sum; bool
# accumulation is `or`, the sum's nonzero-ness).
_ACCUMULATE_IN = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.int8: torch.int32,
                  torch.uint8: torch.int32, torch.int16: torch.int32, torch.bool: torch.int32}


def _index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    if all(t is None for t in indices):
        raise Unsupported("index_put without index tensors")
    if accumulate and self.dtype not in (torch.float32, torch.float64, torch.int32, torch.int64):
        wide = _ACCUMULATE_IN.get(self.dtype)
        if wide is None:
            raise Unsupported(f"accumulating index_put on {self.dtype} (no atomic add)")
        if values.dtype != self.dtype:
            raise RuntimeError(f"Index put requires the source and destination dtypes match, got {self.dtype} for the destination and {values.dtype} for the source.")
        widened = contig(self, wide)
        _index_put_impl_(widened, indices, contig(values, wide), True)
        copy_into(self, widened)
        return self
    shape, plan, off = _index_plan(self, indices)
    if values.dtype != self.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {self.dtype} for the destination and {values.dtype} for the source.")
    v = operand(values, self.device)
    _index_run(self, plan, off, v.expand(shape), True, bool(accumulate))
    return self


def take(self, index, *, out=None):
    """self's elements in row-major order, picked by a flat index (any shape)."""
    if self.numel() == 0 and index.numel() > 0:
        raise IndexError("take(): tried to take from an empty tensor")
    flat = contig(self).view(-1)
    res = index_Tensor(flat, [index.reshape(-1)]).view(index.shape)
    if out is None:
        return res
    resize_out(out, index.shape)
    return copy_into(out, res)


def take_out(self, index, *, out):
    return take(self, index, out=out)


def put_(self, index, source, accumulate=False):
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if index.numel() == 0:
        return self
    flat = self.view(-1) if self.is_contiguous() else contig(self).view(-1)
    _index_put_impl_(flat, [index.reshape(-1)], source.reshape(-1), accumulate)
    if flat.data_ptr() != self.data_ptr():
        copy_into(self, flat.view(self.shape))
    return self


def repeat_interleave_Tensor(repeats, *, output_size=None):
    """out[j] = the i whose block cum[i-1] <= j < cum[i] holds j, i.e. #{i: cum[i] <= j}:
    a 1 is added at each block end cum[i] and the markers are prefix-summed."""
    if repeats.dim() != 1 or repeats.dtype not in (torch.int32, torch.int64):
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    n = repeats.numel()
    cum = _scan(repeats, 0, torch.int64, None, False) if n else None
    total = output_size if output_size is not None else (int(cum[n - 1].item()) if n else 0)
    res = empty((total,), torch.int64, repeats.device)
    if total == 0:
        return empty((0,), repeats.dtype, repeats.device)
    marks = fill_into(empty((total,), torch.int64, repeats.device), 0)
    ones = fill_into(empty((), torch.int64, repeats.device), 1)
    # block ends at `total` fall outside `marks` and are skipped by the kernel
    _scatter_launch(ones, cum, marks, [n], [0], cum.stride(), 0, add=True)
    scan_kernel[(1,)](marks, res, total, PROD=False, BLOCK=_BLOCK)
    if repeats.dtype == torch.int64:
        return res
    return copy_into(empty((total,), repeats.dtype, repeats.device), res)  # result has repeats' dtype



# ------------------------------------------------------------ binary search --
def searchsorted_Tensor(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites")
        right = side == "right"
    odt = torch.int32 if out_int32 else torch.int64
    if out is None:
        out = empty(self.shape, odt, self.device)
    else:
        resize_out(out, self.shape)
    n = self.numel()
    if n == 0:
        return out
    seq_rows = sorted_sequence.dim() > 1
    if seq_rows and tuple(sorted_sequence.shape[:-1]) != tuple(self.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match")
    cdt = compute_dtype(promote(sorted_sequence, self))
    seq = contig(sorted_sequence, cdt)
    xs = contig(self, cdt)
    length = sorted_sequence.shape[-1] if sorted_sequence.dim() else 1
    m = self.shape[-1] if self.dim() else 1
    if sorter is not None and tuple(sorter.shape) != tuple(sorted_sequence.shape):
        raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size")
    srt = contig(sorter) if sorter is not None else seq
    res = out if out.is_contiguous() else empty(self.shape, odt, self.device)
    searchsorted_kernel[_launch_grid(n)](seq, srt, xs, res, n, max(m, 1), length, int(seq_rows),
                                         max(length, 1).bit_length() + 1, RIGHT=bool(right),
                                         HAS_SORTER=sorter is not None, ODT=dtype_code(odt), BLOCK=_BLOCK)
    return out if res is out else copy_into(out, res)


def searchsorted_Tensor_out(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out):
    return searchsorted_Tensor(sorted_sequence, self, out_int32=out_int32, right=right, side=side, sorter=sorter,
                               out=out)


def bucketize_Tensor(self, boundaries, *, out_int32=False, right=False, out=None):
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return searchsorted_Tensor(boundaries, self, out_int32=out_int32, right=right, out=out)


def bucketize_Tensor_out(self, boundaries, *, out_int32=False, right=False, out):
    return bucketize_Tensor(self, boundaries, out_int32=out_int32, right=right, out=out)



# ---------------------------------------------------- values and indices --
def _dim_minmax(is_max):
    from . import kernel_for

    amax, argmax = kernel_for("amax" if is_max else "amin"), kernel_for("argmax" if is_max else "argmin")

    def fn(self, dim, keepdim=False, *, out_v=None, out_i=None):
        if self.numel() == 0:
            raise Unsupported("max/min of an empty tensor")
        v = amax(self, [dim], keepdim)
        i = argmax(self, dim, keepdim)
        if out_v is None:
            return v, i
        resize_out(out_v, v.shape)
        resize_out(out_i, i.shape)
        return copy_into(out_v, v), copy_into(out_i, i)
    return fn


def max_dim(self, dim, keepdim=False):
    return _dim_minmax(True)(self, dim, keepdim)


def max_dim_max(self, dim, keepdim=False, *, max, max_values):
    return _dim_minmax(True)(self, dim, keepdim, out_v=max, out_i=max_values)


def min_dim(self, dim, keepdim=False):
    return _dim_minmax(False)(self, dim, keepdim)


def min_dim_min(self, dim, keepdim=False, *, min, min_indices):
    return _dim_minmax(False)(self, dim, keepdim, out_v=min, out_i=min_indices)


# ---------------------------------------------------------- scatter_reduce --
_REDUCE = {"sum": 0, "prod": 1, "mean": 2, "amax": 3, "amin": 4}


def _scatter_reduce_impl(self, dim, index, src, reduce, include_self, out, value=None):
    red = _REDUCE[reduce]
    cdt = compute_code(self.dtype)
    if self.dtype == torch.bool:
        # As ATen on bool: sum/amax are `or`, prod/amin `and` (mean is an error there): the
        # reduction of 0/1 in int32, nonzero-ness stored back.
        if reduce == "mean":
            raise Unsupported("scatter_reduce mean on bool (an error on the CPU)")
        wide = _scatter_reduce_impl(contig(self, torch.int32), dim, index,
                                    None if src is None else contig(src, torch.int32), reduce,
                                    include_self, None, value)
        if out is None:
            return copy_into(empty(self.shape, torch.bool, self.device), wide)
        resize_out(out, self.shape)
        return copy_into(out, wide)
    res = empty(self.shape, self.dtype, self.device)
    x = atleast1d(self)
    ix = atleast1d(index)
    dim = dim % x.dim()
    rv = atleast1d(res)
    if value is not None:
        s = _value_tensor(value, self.dtype, self.device)
        s_st = [0] * x.dim()
    else:
        s = atleast1d(src)
        s_st = list(s.stride())
    n = x.numel()
    if ix.numel() == 0 or n == 0:
        copy_into(res, self)
    else:
        pad, sh, (cs, xs, is_, os_) = _iter6(list(x.shape), [list(ix.shape), s_st, list(ix.stride()), list(x.stride())])
        cs = [c if k >= pad else 1 for k, c in enumerate(cs)]
        cs[dim + pad] = x.shape[dim]  # no bound along the scattered dim
        # `self` is read through its own strides and `res` is contiguous: pass both layouts alike
        buf = contig(x)
        bst = list(buf.stride())
        _, _, (os_,) = _iter6(list(x.shape), [bst])
        scatter_reduce_kernel[_launch_grid(n)](buf, s, ix, rv, n, ix.shape[dim], *sh, *cs, *xs, *is_, *os_,
                                               s_st[dim], ix.stride(dim), DIM=dim + pad, RED=red,
                                               INCLUDE_SELF=bool(include_self),
                                               INT_MEAN=not is_float(self.dtype), CDT=cdt,
                                               ODT=dtype_code(self.dtype), BLOCK=_BLOCK)
    if out is None:
        return res
    resize_out(out, self.shape)
    return copy_into(out, res)


def scatter_reduce_two(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_impl(self, dim, index, src, reduce, include_self, None)


def scatter_reduce__two(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_impl(self, dim, index, src, reduce, include_self, self)


def scatter_reduce_two_out(self, dim, index, src, reduce, *, include_self=True, out):
    return _scatter_reduce_impl(self, dim, index, src, reduce, include_self, out)


_LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}


def _legacy(reduce):
    if reduce not in _LEGACY_REDUCE:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return _LEGACY_REDUCE[reduce]


def scatter_reduce(self, dim, index, src, *, reduce):
    return _scatter_reduce_impl(self, dim, index, src, _legacy(reduce), True, None)


def scatter__reduce(self, dim, index, src, *, reduce):
    return _scatter_reduce_impl(self, dim, index, src, _legacy(reduce), True, self)


def scatter_reduce_out(self, dim, index, src, *, reduce, out):
    return _scatter_reduce_impl(self, dim, index, src, _legacy(reduce), True, out)


def scatter_value_reduce(self, dim, index, value, *, reduce):
    return _scatter_reduce_impl(self, dim, index, None, _legacy(reduce), True, None, value)


def scatter__value_reduce(self, dim, index, value, *, reduce):
    return _scatter_reduce_impl(self, dim, index, None, _legacy(reduce), True, self, value)


def scatter_value_reduce_out(self, dim, index, value, *, reduce, out):
    return _scatter_reduce_impl(self, dim, index, None, _legacy(reduce), True, out, value)


def _index_reduce_impl(self, dim, index, source, reduce, include_self, out):
    """index_reduce is scatter_reduce with the 1-d index broadcast over source's shape."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    s = atleast1d(source)
    d = dim % s.dim()
    ix = atleast1d(index)
    shape = [1] * s.dim()
    shape[d] = ix.numel()
    ix = ix.view(shape).expand(s.shape)
    return _scatter_reduce_impl(self, d, ix, s, reduce, include_self, out)


def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_impl(self, dim, index, source, reduce, include_self, None)


def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_impl(self, dim, index, source, reduce, include_self, self)


def index_reduce_out(self, dim, index, source, reduce, *, include_self=True, out):
    return _index_reduce_impl(self, dim, index, source, reduce, include_self, out)



def count_nonzero_dim_IntList(self, dim):
    from . import kernel_for

    flags = launch_pointwise("ne", empty(self.shape, torch.int64, self.device), [self, 0], compute_code(self.dtype))
    return kernel_for("sum.dim_IntList")(flags, list(dim), False)


def _row_scan(self, dim, cdt, launch):
    """Pack rows (dim last) into a contiguous `cdt` buffer, launch(buf, rows, length) and
    return a function moving a row-layout result back to self's layout."""
    xm, d = rows_last(self, dim)
    buf = contig(xm, cdt)
    length = xm.shape[-1]
    block = min(max(next_power_of_2(length), 16), _BLOCK)
    launch(buf, xm.numel() // length, length, block)

    def back(t):
        t = t.movedim(-1, d)
        return t.view(()) if self.dim() == 0 else t
    return xm.shape, back


def _logcumsumexp(self, dim, *, out=None):
    if not is_float(self.dtype):
        raise Unsupported(f"logcumsumexp of {self.dtype}")
    if out is None:
        out = empty(self.shape, self.dtype, self.device)
    else:
        resize_out(out, self.shape)
    if self.numel() == 0:
        return out
    res = {}

    def launch(buf, rows, length, block):
        res["y"] = empty(buf.shape, buf.dtype, buf.device)
        logcumsumexp_kernel[(rows,)](buf, res["y"], length, BLOCK=block)
    _, back = _row_scan(self, dim, torch.float64, launch)
    return copy_into(out, back(res["y"]))


def _logcumsumexp_out(self, dim, *, out):
    return _logcumsumexp(self, dim, out=out)


def _cummaxmin_helper(is_max):
    def fn(self, values, indices, dim):
        resize_out(values, self.shape)
        resize_out(indices, self.shape)
        if self.numel() == 0:
            return
        res = {}

        def launch(buf, rows, length, block):
            res["v"] = empty(buf.shape, buf.dtype, buf.device)
            res["i"] = empty(buf.shape, torch.int64, buf.device)
            cummaxmin_kernel[(rows,)](buf, res["v"], res["i"], length, IS_MAX=is_max, BLOCK=block)
        _, back = _row_scan(self, dim, compute_dtype(self.dtype), launch)
        copy_into(values, back(res["v"]))
        copy_into(indices, back(res["i"]))
    return fn


_cummax_helper = _cummaxmin_helper(True)
_cummin_helper = _cummaxmin_helper(False)


# ------------------------------------------------- compositions of the above --
def isin_Tensor_Tensor_out(elements, test_elements, *, assume_unique=False, invert=False, out):
    """Membership by binary search in the sorted test elements (== semantics: NaN is in nothing)."""
    common = torch.result_type(elements, test_elements)
    if common == torch.bool or common.is_complex:
        raise Unsupported(f"isin of {common}")
    table = torch.sort(test_elements.reshape(-1).to(common)).values
    values = elements.to(common)
    if table.numel() == 0:
        found = torch.zeros(elements.shape, dtype=torch.bool, device=elements.device)
    else:
        at = torch.searchsorted(table, values).clamp_(max=table.numel() - 1)
        found = torch.take(table, at) == values
    if invert:
        found = torch.logical_not(found)
    resize_out(out, elements.shape)
    return out.copy_(found)


def _tri_indices(lower: bool):
    """tril_indices / triu_indices: the coordinates of a triangle's ones, row by row."""
    def indices(row, col, offset=0, *, dtype=torch.int64, layout=None, device=None, pin_memory=None):
        if dtype not in (torch.int32, torch.int64) or row < 0 or col < 0:
            raise Unsupported("tril/triu_indices outside int32/int64 and non-negative sides")
        ones = torch.ones((row, col), dtype=torch.int32, device=device)
        mask = torch.tril(ones, offset) if lower else torch.triu(ones, offset)
        return torch.nonzero(mask).t().contiguous().to(dtype or torch.int64)

    return indices


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "flip": flip,
    "roll": roll,
    "scatter.src": scatter_src, "scatter_.src": scatter__src, "scatter.src_out": scatter_src_out,
    "scatter.value": scatter_value, "scatter_.value": scatter__value, "scatter.value_out": scatter_value_out,
    "index_add": index_add, "index_add_": index_add_, "index_add.out": index_add_out,
    "index_copy": index_copy, "index_copy_": index_copy_, "index_copy.out": index_copy_out,
    "index_fill_.int_Scalar": index_fill_, "index_fill_.int_Tensor": index_fill_,
    "cumsum": cumsum, "cumsum_": cumsum_, "cumsum.out": cumsum_out,
    "cumprod": cumprod, "cumprod_": cumprod_, "cumprod.out": cumprod_out,
    "sort.stable": sort_stable,
    "sort.values_stable": sort_values_stable,
    "nonzero": nonzero, "nonzero.out": nonzero_out, "nonzero_static": nonzero_static,
    "masked_select": masked_select, "masked_select.out": masked_select_out,
    "masked_scatter_": masked_scatter_,
    "take": take, "take.out": take_out, "put_": put_, "repeat_interleave.Tensor": repeat_interleave_Tensor,
    "searchsorted.Tensor": searchsorted_Tensor, "searchsorted.Tensor_out": searchsorted_Tensor_out,
    "bucketize.Tensor": bucketize_Tensor, "bucketize.Tensor_out": bucketize_Tensor_out,
    "index.Tensor": index_Tensor, "index.Tensor_out": index_Tensor_out, "_index_put_impl_": _index_put_impl_,
    "scatter_reduce.two": scatter_reduce_two, "scatter_reduce_.two": scatter_reduce__two,
    "scatter_reduce.two_out": scatter_reduce_two_out,
    "scatter.reduce": scatter_reduce, "scatter_.reduce": scatter__reduce, "scatter.reduce_out": scatter_reduce_out,
    "scatter.value_reduce": scatter_value_reduce, "scatter_.value_reduce": scatter__value_reduce,
    "scatter.value_reduce_out": scatter_value_reduce_out,
    "index_reduce": index_reduce, "index_reduce_": index_reduce_, "index_reduce.out": index_reduce_out,
    "count_nonzero.dim_IntList": count_nonzero_dim_IntList,
    "_logcumsumexp": _logcumsumexp, "_logcumsumexp.out": _logcumsumexp_out,
    "_cummax_helper": _cummax_helper, "_cummin_helper": _cummin_helper,
    "max.dim": max_dim, "max.dim_max": max_dim_max, "min.dim": min_dim, "min.dim_min": min_dim_min,
    # compositions of the above
    "isin.Tensor_Tensor_out": isin_Tensor_Tensor_out,
    "tril_indices": _tri_indices(True), "triu_indices": _tri_indices(False),
}


# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
