"""The `matmul` family's kernels: mm, bmm, addmm, baddbmm, dot/vdot, addmv, addbmm, all
through one batched `tl.dot` kernel on strided operands (`_bmm_launch`).
"""
from __future__ import annotations

from typing import Callable

import torch

from . import Unsupported
from . import _kernels as K
from ._common import (FLOATS, cdiv, compute_code, contig, copy_into, dtype_code, empty, fill_into, next_power_of_2,
                      operand, resize_out)


def _bmm_launch(a, b, c, bias=None, alpha=1, beta=1):
    """c (B, M, N) = beta*bias + alpha * a (B, M, K) @ b (B, K, N); all strided."""
    is_int = a.dtype not in FLOATS
    if a.dtype == torch.bool or (is_int and (alpha != int(alpha) or beta != int(beta))):
        raise Unsupported(f"{a.dtype} matmul with alpha={alpha!r}, beta={beta!r}")
    bt, m, kk = a.shape
    n = b.shape[2]
    if c.numel() == 0:
        return c
    if kk == 0 and bias is None:
        return fill_into(c, 0)
    bm = min(max(next_power_of_2(m), 16), 64)
    bn = min(max(next_power_of_2(n), 16), 64)
    bk = min(max(next_power_of_2(kk), 16), 64)
    has_bias = bias is not None and beta != 0
    bi = bias.expand(c.shape) if has_bias else c
    grid = (cdiv(m, bm), cdiv(n, bn), bt)
    if is_int:  # small blocks: the integer path materialises a BM x BK x BN product
        bm, bn, bk = min(bm, 16), min(bn, 16), min(bk, 16)
        grid = (cdiv(m, bm), cdiv(n, bn), bt)
        alpha, beta = int(alpha), int(beta)
    else:
        alpha, beta = float(alpha), float(beta)
    K.bmm_kernel[grid](a, b, c, bi, m, n, kk, *a.stride(), *b.stride(), *c.stride(), *bi.stride(),
                       alpha, beta, HAS_BIAS=has_bias, CDT=compute_code(a.dtype), ODT=dtype_code(c.dtype),
                       BM=bm, BN=bn, BK=bk)
    return c


def _check_mm(a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")


def mm(self, mat2, *, out=None):
    _check_mm(self, mat2)
    shape = (self.shape[0], mat2.shape[1])
    out = empty(shape, self.dtype, self.device) if out is None else resize_out(out, shape)
    _bmm_launch(self.unsqueeze(0), mat2.unsqueeze(0), out.unsqueeze(0))
    return out


def mm_out(self, mat2, *, out):
    return mm(self, mat2, out=out)


def bmm(self, mat2, *, out=None):
    _check_mm(self, mat2)
    shape = (self.shape[0], self.shape[1], mat2.shape[2])
    out = empty(shape, self.dtype, self.device) if out is None else resize_out(out, shape)
    return _bmm_launch(self, mat2, out)


def bmm_out(self, mat2, *, out):
    return bmm(self, mat2, out=out)


def _addmm_impl(self, mat1, mat2, beta, alpha, out):
    _check_mm(mat1, mat2)
    shape = (mat1.shape[0], mat2.shape[1])
    bias = operand(self, mat1.device)
    if out is None:
        out = empty(shape, mat1.dtype, mat1.device)
    elif out is self:
        bias = copy_into(empty(shape, self.dtype, self.device), self)
    else:
        resize_out(out, shape)
    _bmm_launch(mat1.unsqueeze(0), mat2.unsqueeze(0), out.unsqueeze(0),
                bias.expand(shape).unsqueeze(0), alpha, beta)
    return out


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    return _addmm_impl(self, mat1, mat2, beta, alpha, None)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    return _addmm_impl(self, mat1, mat2, beta, alpha, self)


def addmm_out(self, mat1, mat2, *, beta=1, alpha=1, out):
    return _addmm_impl(self, mat1, mat2, beta, alpha, out)


def _baddbmm_impl(self, batch1, batch2, beta, alpha, out):
    _check_mm(batch1, batch2)
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    bias = operand(self, batch1.device)
    if out is None:
        out = empty(shape, batch1.dtype, batch1.device)
    elif out is self:
        bias = copy_into(empty(shape, self.dtype, self.device), self)
    else:
        resize_out(out, shape)
    return _bmm_launch(batch1, batch2, out, bias.expand(shape), alpha, beta)


def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    return _baddbmm_impl(self, batch1, batch2, beta, alpha, None)


def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    return _baddbmm_impl(self, batch1, batch2, beta, alpha, self)


def baddbmm_out(self, batch1, batch2, *, beta=1, alpha=1, out):
    return _baddbmm_impl(self, batch1, batch2, beta, alpha, out)


def dot(self, tensor):
    if self.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors")
    if self.shape[0] != tensor.shape[0]:
        raise RuntimeError("inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number "
                           "of elements, but got {} and {} elements respectively".format(
                               self.shape[0], tensor.shape[0], self.shape[0], tensor.shape[0]))
    _check_mm(self, tensor)
    res = empty((1, 1, 1), self.dtype, self.device)
    _bmm_launch(self.view(1, 1, -1) if self.numel() else self.reshape(1, 1, 0),
                tensor.view(1, -1, 1) if tensor.numel() else tensor.reshape(1, 0, 1), res)
    return res.view(())


def addmv(self, mat, vec, *, beta=1, alpha=1, out=None):
    _check_mm(mat, vec)
    n = mat.shape[0]
    res = empty((n,), mat.dtype, mat.device) if out is None else resize_out(out, (n,))
    bias = self.expand(n).view(1, n, 1)
    _bmm_launch(mat.unsqueeze(0), vec.view(1, -1, 1), res.view(1, n, 1) if res.is_contiguous() else
                res.as_strided((1, n, 1), (0, res.stride(0), 0)), bias=bias, alpha=alpha, beta=beta)
    return res


def addmv_(self, mat, vec, *, beta=1, alpha=1):
    return addmv(self, mat, vec, beta=beta, alpha=alpha, out=self)


def addbmm(self, batch1, batch2, *, beta=1, alpha=1, out=None):
    # sum_b A_b @ B_b is one matmul over the concatenated K axis
    b, n, k = batch1.shape
    m = batch2.shape[2]
    a2 = contig(batch1.permute(1, 0, 2)).view(n, b * k)
    b2 = contig(batch2).view(b * k, m)
    res = empty((n, m), batch1.dtype, batch1.device)
    _bmm_launch(a2.unsqueeze(0), b2.unsqueeze(0), res.unsqueeze(0), bias=self.expand(n, m).unsqueeze(0),
                alpha=alpha, beta=beta)
    if out is None:
        return res
    resize_out(out, (n, m))
    return copy_into(out, res)


def addbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    return addbmm(self, batch1, batch2, beta=beta, alpha=alpha, out=self)


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "mm": mm,
    "mm.out": mm_out,
    "bmm": bmm,
    "bmm.out": bmm_out,
    "addmm": addmm,
    "addmm_": addmm_,
    "addmm.out": addmm_out,
    "baddbmm": baddbmm,
    "baddbmm_": baddbmm_,
    "baddbmm.out": baddbmm_out,
    "dot": dot,
    "vdot": dot,
    "addmv": addmv,
    "addmv_": addmv_,
    "addmv.out": addmv,
    "addbmm": addbmm,
    "addbmm_": addbmm_,
    "addbmm.out": addbmm,
}
