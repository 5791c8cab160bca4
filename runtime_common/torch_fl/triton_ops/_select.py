"""Triton kernels of the `select` family (order statistics: topk, kthvalue, median,
nanmedian, mode).

`KERNELS` maps each name of the `select` family of `ops.yaml` to a function with the aten schema's
signature (see the package README).

Every op sorts along its dim with the index family's stable sort (`_index._sort_impl`:
NaN the largest value and equal to NaN, equal values kept in index order, rows up to
`_index._SORT_MAX`, longer ones declined) and reads its answer off the sorted rows:
topk and kthvalue are slices of them; median, nanmedian and mode take a position that
depends on the row (its NaN count, its longest run of equal values), which
`pick_sorted_kernel` finds, one program per row. Where equal values leave the index open
it is the sort's choice (ATen's CPU kernels pick by std::nth_element / std::sort, whose
tie order is the library's); median's NaN and mode's last occurrence follow ATen.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
import triton
import triton.language as tl
from torch._prims_common import canonicalize_dim

from . import Unsupported
from . import _launch
from ._common import compute_dtype, contig, copy_into, empty, fill_into, is_float, next_power_of_2, resize_out
from ._index import _sort_impl

_BLOCK = 1024
# What pick_sorted_kernel takes from a sorted row.
_MEDIAN, _NANMEDIAN, _MODE = 0, 1, 2


# ----------------------------------------------------------------- kernels --
@triton.jit
def _same(a, b):
    # equal as the sort orders values: NaN equals NaN
    return (a == b) | ((a != a) & (b != b))


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def pick_sorted_kernel(vals, idxs, out_v, out_i, L, PICK: tl.constexpr, BLOCK: tl.constexpr):
    """Value and source index of one position of each contiguous row of L > 0 elements
    sorted ascending (NaN last), the position PICK chooses:
    median: the lower middle, or the first NaN when there is one (ATen returns the first
    NaN in index order; the stable sort keeps NaNs in that order);
    nanmedian: the lower middle of the non-NaN prefix (position 0 when all are NaN);
    mode: the end of the first longest run of equal values, i.e. the smallest of the most
    frequent values at its last occurrence, as ATen's CPU kernel answers."""
    row = tl.program_id(0).to(tl.int64)
    base = row * L
    offs = tl.arange(0, BLOCK)
    zero = tl.sum(tl.zeros([BLOCK], dtype=tl.int32), axis=0)  # a typed scalar for loop carries
    if PICK == 2:
        best_len = zero
        pos = zero
        run_start = zero  # start of the run still open at the end of the previous chunk
        for j0 in range(0, L, BLOCK):
            j = j0 + offs
            m = j < L
            v = tl.load(vals + base + j, mask=m)
            prev = tl.load(vals + base + j - 1, mask=m & (j > 0))
            nxt = tl.load(vals + base + j + 1, mask=(j + 1) < L)
            starts = m & ((j == 0) | (_same(v, prev) == 0))
            ends = m & ((j == L - 1) | (_same(v, nxt) == 0))
            start = tl.maximum(tl.associative_scan(tl.where(starts, j, -1), 0, _max_combine), run_start)
            length = tl.where(ends, j - start + 1, 0)
            chunk_len = tl.max(length, axis=0)
            chunk_pos = tl.min(tl.where(length == chunk_len, j, L), axis=0)
            better = chunk_len > best_len  # strictly: an equally long later run holds a larger value
            pos = tl.where(better, chunk_pos, pos)
            best_len = tl.where(better, chunk_len, best_len)
            run_start = tl.max(start, axis=0)
    else:
        nans = zero
        for j0 in range(0, L, BLOCK):
            j = j0 + offs
            v = tl.load(vals + base + j, mask=j < L, other=0)
            nans += tl.sum((v != v).to(tl.int32), axis=0)
        if PICK == 0:
            pos = tl.where(nans > 0, L - nans, (L - 1) // 2)
        else:
            pos = tl.maximum(L - nans - 1, 0) // 2
    tl.store(out_v + row, tl.load(vals + base + pos))
    tl.store(out_i + row, tl.load(idxs + base + pos))


# ----------------------------------------------------------------- helpers --
def _decline_bool(self, op):
    # ATen's CPU kernels raise for bool (mode aside); the CPU step gives that error
    if self.dtype == torch.bool:
        raise Unsupported(f"{op} of bool")


def _reduction_dim(self, dim, op):
    """`dim` wrapped, with aten's IndexErrors: out of range, or reducing a dim of size 0."""
    d = canonicalize_dim(self.dim(), dim)
    if self.dim() and self.shape[d] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    return d


def _check_outs(op, dtype, values, indices):
    """aten raises a RuntimeError for out= tensors of another dtype, before writing anything."""
    if values is not None and (values.dtype != dtype or indices.dtype != torch.int64):
        raise RuntimeError(f"{op}(): expected out tensors of dtype {dtype} (values) and torch.int64 "
                           f"(indices), but got {values.dtype} and {indices.dtype}")


def _sorted_rows(self, d, descending=False):
    """(values, indices) of `self` sorted along `d`, moved last: contiguous rows."""
    rows = self.view(1) if self.dim() == 0 else self.movedim(d, -1)
    return _sort_impl(rows, -1, descending)


def _pick_sorted(pick, sorted_values, sorted_indices):
    """Per-row (value, index) of sorted rows at the position `pick` chooses, in the compute
    dtype (the kernel sees fp32/fp64/int64 only), shaped as the rows without their last dim."""
    length = sorted_values.shape[-1]
    cdt = compute_dtype(sorted_values.dtype)
    sorted_values = contig(sorted_values, cdt)
    v = empty(sorted_values.shape[:-1], cdt, sorted_values.device)
    i = empty(v.shape, torch.int64, v.device)
    block = min(max(next_power_of_2(length), 16), _BLOCK)
    pick_sorted_kernel[(v.numel(),)](sorted_values, sorted_indices, v, i, length, PICK=pick, BLOCK=block)
    return v, i


def _results(v, i, dtype, values, indices):
    """The op's (values, indices) from views v, i of the output's shape: copied into the
    out= tensors (resized) when given, else into new dense tensors (v, i when already so)."""
    if values is None:
        return contig(v, dtype), contig(i)
    resize_out(values, v.shape)
    resize_out(indices, i.shape)
    return copy_into(values, v), copy_into(indices, i)


def _reduce(op, self, d, keepdim, values, indices, take):
    """A reduction along `d` (dim already checked): `take(sorted values, sorted indices)`
    gives per-row views shaped as the rows without their last dim."""
    _check_outs(op, self.dtype, values, indices)
    if self.numel() == 0:  # a dim of size 0 other than d: nothing to sort
        shape = [s for k, s in enumerate(self.shape) if k != d]
        v, i = empty(shape, self.dtype, self.device), empty(shape, torch.int64, self.device)
    else:
        v, i = take(*_sorted_rows(self, d))
    if keepdim and self.dim():
        v, i = v.unsqueeze(d), i.unsqueeze(d)
    return _results(v, i, self.dtype, values, indices)


# -------------------------------------------------------------------- topk --
def _topk(self, k, dim, largest, values=None, indices=None):
    _decline_bool(self, "topk")
    d = canonicalize_dim(self.dim(), dim)
    if not 0 <= k <= (self.shape[d] if self.dim() else 1):
        raise RuntimeError("selected index k out of range")
    _check_outs("topk", self.dtype, values, indices)
    shape = list(self.shape)
    if self.dim():
        shape[d] = k  # a 0-dim input gives its element whatever k (0 or 1), as aten does
    if 0 in shape:
        v, i = empty(shape, self.dtype, self.device), empty(shape, torch.int64, self.device)
    elif self.dim() == 0:
        v, i = (t.view(()) for t in _sorted_rows(self, d))
    else:
        sv, si = _sorted_rows(self, d, descending=largest)
        v, i = sv.narrow(-1, 0, k).movedim(-1, d), si.narrow(-1, 0, k).movedim(-1, d)
    return _results(v, i, self.dtype, values, indices)


# `sorted=False` leaves the order open: the sorted order is one of the valid answers.
def topk(self, k, dim=-1, largest=True, sorted=True):
    return _topk(self, k, dim, largest)


def topk_values(self, k, dim=-1, largest=True, sorted=True, *, values, indices):
    return _topk(self, k, dim, largest, values, indices)


# ---------------------------------------------------------------- kthvalue --
def _kthvalue(self, k, dim, keepdim, values=None, indices=None):
    _decline_bool(self, "kthvalue")
    d = _reduction_dim(self, dim, "kthvalue")
    if not 1 <= k <= (self.shape[d] if self.dim() else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _reduce("kthvalue", self, d, keepdim, values, indices,
                   lambda sv, si: (sv.select(-1, k - 1), si.select(-1, k - 1)))


def kthvalue(self, k, dim=-1, keepdim=False):
    return _kthvalue(self, k, dim, keepdim)


def kthvalue_values(self, k, dim=-1, keepdim=False, *, values, indices):
    return _kthvalue(self, k, dim, keepdim, values, indices)


# ------------------------------------------------------- median, nanmedian --
def _median_all(self, pick):
    _decline_bool(self, "median")
    if self.numel() == 0:
        if not is_float(self.dtype):
            raise Unsupported("median of an empty integer tensor (ATen casts NaN to the integer type)")
        return fill_into(empty((), self.dtype, self.device), float("nan"))
    v, _ = _pick_sorted(pick, *_sorted_rows(contig(self).view(-1), 0))
    return contig(v, self.dtype)


def _median_dim(pick, self, dim, keepdim, values=None, indices=None):
    _decline_bool(self, "median")
    d = _reduction_dim(self, dim, "median")  # nanmedian's errors say median() too
    op = "median" if pick == _MEDIAN else "nanmedian"
    return _reduce(op, self, d, keepdim, values, indices, functools.partial(_pick_sorted, pick))


def median(self):
    return _median_all(self, _MEDIAN)


def median_dim(self, dim, keepdim=False):
    return _median_dim(_MEDIAN, self, dim, keepdim)


def median_dim_values(self, dim, keepdim=False, *, values, indices):
    return _median_dim(_MEDIAN, self, dim, keepdim, values, indices)


def nanmedian(self):
    return _median_all(self, _NANMEDIAN)


def nanmedian_dim(self, dim, keepdim=False):
    return _median_dim(_NANMEDIAN, self, dim, keepdim)


def nanmedian_dim_values(self, dim, keepdim=False, *, values, indices):
    return _median_dim(_NANMEDIAN, self, dim, keepdim, values, indices)


# -------------------------------------------------------------------- mode --
# NaN rows: ATen's CPU mode sorts with `<`, which is no ordering once a NaN is in the row,
# so its answer there is std::sort's accident; here NaNs count as one value, the largest.
def _mode(self, dim, keepdim, values=None, indices=None):
    d = _reduction_dim(self, dim, "mode")
    return _reduce("mode", self, d, keepdim, values, indices, functools.partial(_pick_sorted, _MODE))


def mode(self, dim=-1, keepdim=False):
    return _mode(self, dim, keepdim)


def mode_values(self, dim=-1, keepdim=False, *, values, indices):
    return _mode(self, dim, keepdim, values, indices)


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "topk": topk, "topk.values": topk_values,
    "kthvalue": kthvalue, "kthvalue.values": kthvalue_values,
    "median": median, "median.dim": median_dim, "median.dim_values": median_dim_values,
    "nanmedian": nanmedian, "nanmedian.dim": nanmedian_dim, "nanmedian.dim_values": nanmedian_dim_values,
    "mode": mode, "mode.values": mode_values,
}

# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
