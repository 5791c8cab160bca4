"""The `gather` family's kernels: index_select, gather, scatter_add and
embedding_dense_backward, through one index kernel (gather by strides, or scatter with
atomic adds into a widened accumulator).
"""
from __future__ import annotations

from typing import Callable

import torch

from . import Unsupported
from . import _kernels as K
from ._common import (BLOCK, MAX_DIMS, acc_dtype, atleast1d, compute_code, contig, copy_into, dtype_code, empty,
                      fill_into, grid1, launch_pointwise, resize_out)


def _index_launch(src, idx, out, it_shape, src_st, idx_st, out_st, dim, size_dim, scatter, pad=None):
    n = 1
    for s in it_shape:
        n *= s
    if n == 0:
        return out
    nd = len(it_shape)
    if nd > MAX_DIMS:
        raise Unsupported("more than 6 dims")
    padn = MAX_DIMS - nd
    sh = [1] * padn + list(it_shape)
    sts = [[0] * padn + list(st) for st in (src_st, idx_st, out_st)]
    K.index_kernel[grid1(n)](src, idx, out, n, *sh, *sts[0], *sts[1], *sts[2], size_dim,
                             -1 if pad is None else pad, DIM=dim + padn, SCATTER=scatter,
                             HAS_PAD=pad is not None, ODT=dtype_code(out.dtype), BLOCK=BLOCK)
    return out


def gather(self, dim, index, *, sparse_grad=False, out=None):
    x = atleast1d(self)
    ix = atleast1d(index)
    dim = dim % x.dim()
    oshape = index.shape
    if out is None:
        out = empty(oshape, self.dtype, self.device)
    else:
        resize_out(out, oshape)
    o = atleast1d(out)
    _index_launch(x, ix, o, ix.shape, x.stride(), ix.stride(), o.stride(), dim, x.shape[dim], False)
    return out


def gather_out(self, dim, index, *, sparse_grad=False, out):
    return gather(self, dim, index, out=out)


def index_select(self, dim, index, *, out=None):
    x = atleast1d(self)
    ix = atleast1d(index)
    dim = dim % x.dim()
    oshape = list(x.shape)
    oshape[dim] = ix.numel()
    if self.dim() == 0:
        oshape = []  # as ATen: a 0-dim self gives a 0-dim result (the index holds one element)
    if out is None:
        out = empty(oshape, self.dtype, self.device)
    else:
        resize_out(out, oshape)
    o = out.view([ix.numel()]) if self.dim() == 0 else out
    it = list(x.shape)
    it[dim] = ix.numel()
    ist = [0] * x.dim()
    ist[dim] = ix.stride(0)
    _index_launch(x, ix, o, it, x.stride(), ist, o.stride(), dim, x.shape[dim], False)
    return out


def index_select_out(self, dim, index, *, out):
    return index_select(self, dim, index, out=out)


def _scatter_add_impl(self, dim, index, src, out):
    x = atleast1d(self)
    dim = dim % x.dim()
    acc_dt = acc_dtype(self.dtype)
    acc = copy_into(empty(x.shape, acc_dt, self.device), x)
    ix = atleast1d(index)
    s = atleast1d(src)
    _index_launch(s, ix, acc, ix.shape, s.stride(), ix.stride(), acc.stride(), dim, x.shape[dim], True)
    if out is None:
        out = empty(self.shape, self.dtype, self.device)
    else:
        resize_out(out, self.shape)
    return copy_into(out, acc.view(self.shape))


def scatter_add(self, dim, index, src):
    return _scatter_add_impl(self, dim, index, src, None)


def scatter_add_(self, dim, index, src):
    return _scatter_add_impl(self, dim, index, src, self)


def scatter_add_out(self, dim, index, src, *, out):
    return _scatter_add_impl(self, dim, index, src, out)


def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = grad_output.shape[-1]
    n = indices.numel()
    dev = grad_output.device
    acc_dt = acc_dtype(grad_output.dtype)
    g = contig(grad_output, acc_dt).view(n, d)
    ix = contig(indices).view(n)
    acc = fill_into(empty((num_weights, d), acc_dt, dev), 0)
    pad = padding_idx if padding_idx >= 0 else None
    _index_launch(g, ix, acc, (n, d), g.stride(), (ix.stride(0), 0), acc.stride(), 0, num_weights, True, pad)
    if scale_grad_by_freq:
        cnt = fill_into(empty((num_weights,), acc_dt, dev), 0)
        ones = fill_into(empty((n,), acc_dt, dev), 1)
        _index_launch(ones, ix, cnt, (n,), ones.stride(), ix.stride(), cnt.stride(), 0, num_weights, True, pad)
        cnt = launch_pointwise("clamp_min", empty((num_weights, 1), acc_dt, dev), [cnt.view(num_weights, 1), 1],
                               compute_code(acc_dt))
        acc = launch_pointwise("div", empty((num_weights, d), acc_dt, dev), [acc, cnt], compute_code(acc_dt))
    if acc_dt == grad_output.dtype:
        return acc
    return copy_into(empty((num_weights, d), grad_output.dtype, dev), acc)


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "index_select": index_select,
    "index_select.out": index_select_out,
    "gather": gather,
    "gather.out": gather_out,
    "scatter_add": scatter_add,
    "scatter_add_": scatter_add_,
    "scatter_add.out": scatter_add_out,
    "embedding_dense_backward": embedding_dense_backward,
}
