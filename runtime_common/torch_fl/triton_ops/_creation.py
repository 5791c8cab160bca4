"""The `creation` family's kernels: cat, fill_/zero_, arange, linspace, logspace, eye and
tril/triu (one triangle kernel serves them and eye).
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from . import _kernels as K
from ._common import (BLOCK, cdiv, compute_code, contig, copy_into, dtype_code, empty, fill_into, grid1, is_float,
                      next_power_of_2, resize_out, scalar_bits)


# ------------------------------------------------------------- cat / fill ---
def _cat_impl(tensors, dim, out):
    ts = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]  # legacy empty tensors are skipped
    if not ts:
        r = out if out is not None else empty((0,), tensors[0].dtype, tensors[0].device)
        return r
    ref = ts[0]
    dim = dim % ref.dim()
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    shape = list(ref.shape)
    shape[dim] = sum(t.shape[dim] for t in ts)
    if out is None:
        out = empty(shape, dtype, ref.device)
    else:
        resize_out(out, shape)
    if _batched_cat(ts, dim, out):
        return out
    off = 0
    for t in ts:
        sz = t.shape[dim]
        if sz:
            copy_into(out.narrow(dim, off, sz), t)
        off += sz
    return out


def _batched_cat(ts, dim, out) -> bool:
    """cat in ceil(n / 8) launches where every input is contiguous in the output's dtype (the
    usual case): each input is a [rows, width] block of the output seen as [rows, columns].
    False (nothing written) otherwise: one strided copy per input then."""
    if not out.is_contiguous() or any(t.dtype != out.dtype or not t.is_contiguous() or t.dim() != out.dim()
                                      for t in ts):
        return False
    rows = math.prod(out.shape[:dim])
    inner = math.prod(out.shape[dim + 1:])
    if rows * inner == 0:
        return True   # an empty output: nothing to copy
    parts, column = [], 0
    for t in ts:
        width = t.shape[dim] * inner
        if width:
            parts.append((t, width, column))
        column += width
    for start in range(0, len(parts), K.CAT_INPUTS):
        chunk = parts[start:start + K.CAT_INPUTS]
        pad = [chunk[0]] * (K.CAT_INPUTS - len(chunk))   # unused slots: never read (N says how many)
        xs, widths, columns = zip(*(chunk + pad))
        grid = (cdiv(rows * max(widths), BLOCK), len(chunk))
        K.cat_kernel[grid](out, *xs, *widths, *columns, rows, column, N=len(chunk), BLOCK=BLOCK)
    return True


def cat(tensors, dim=0):
    return _cat_impl(tensors, dim, None)


def cat_out(tensors, dim=0, *, out):
    return _cat_impl(tensors, dim, out)


def fill__Scalar(self, value):
    return fill_into(self, value)


def fill__Tensor(self, value):
    if value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions.")
    if value.device.type == "cpu":
        return fill_into(self, value.item())
    return copy_into(self, value)


def zero_(self):
    return fill_into(self, 0)


# ------------------------------------------------------------------ creation --
def _range_launch(out, mode, start, step, end, half, cdtype):
    n = out.numel()
    if n == 0:
        return out
    is_f = is_float(out.dtype) or mode != 0
    conv = (lambda v: scalar_bits(v, torch.float64)[0]) if is_f else int
    K.range_kernel[grid1(n)](out, n, out.stride(0) if out.dim() else 1, conv(start), conv(step), conv(end), half,
                             MODE=mode, IS_FLOAT=is_f, CDT=compute_code(cdtype), ODT=dtype_code(out.dtype), BLOCK=BLOCK)
    return out


def _scalar(v):
    return v.item() if isinstance(v, torch.Tensor) else v


def arange_start_out(start, end, step=1, *, out):
    start, end, step = _scalar(start), _scalar(end), _scalar(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if is_float(out.dtype) or any(isinstance(v, float) for v in (start, end, step)):
        size = math.ceil((float(end) - float(start)) / float(step))
    else:
        size = (int(end) - int(start) + int(step) - (1 if step > 0 else -1)) // int(step)
    if ((step > 0) and start > end) or ((step < 0) and start < end):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    resize_out(out, (max(size, 0),))
    if not is_float(out.dtype):
        start, step = int(start), int(step)
    buf = out if out.is_contiguous() else empty(out.shape, out.dtype, out.device)
    _range_launch(buf, 0, start, step, 0, 0, out.dtype)
    return out if buf is out else copy_into(out, buf)


def _lin_params(start, end, steps, dtype):
    # ATen's CPU kernel: step in the output dtype (double for integer outputs)
    cdtype = dtype if is_float(dtype) else torch.float64
    st = torch.tensor(_scalar(start), dtype=torch.float64).to(cdtype)
    en = torch.tensor(_scalar(end), dtype=torch.float64).to(cdtype)
    if not is_float(dtype):  # integer outputs: start/end are converted to the output type first
        st, en = st.to(dtype).to(cdtype), en.to(dtype).to(cdtype)
    step = ((en - st) / (steps - 1)) if steps > 1 else en * 0
    return st.item(), step.item(), en.item(), cdtype


def linspace_out(start, end, steps, *, out):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    resize_out(out, (steps,))
    if steps == 0:
        return out
    st, step, en, cdtype = _lin_params(start, end, steps, out.dtype)
    buf = out if out.is_contiguous() else empty(out.shape, out.dtype, out.device)
    if steps == 1:
        fill_into(buf, st)
    else:
        _range_launch(buf, 1, st, step, en, steps // 2, cdtype)
    return out if buf is out else copy_into(out, buf)


def logspace_out(start, end, steps, base=10.0, *, out):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    resize_out(out, (steps,))
    if steps == 0:
        return out
    st, step, en, cdtype = _lin_params(start, end, steps, out.dtype)
    exps = empty((steps,), torch.float64, out.device)
    if steps == 1:
        fill_into(exps, st)
    else:
        _range_launch(exps, 1, st, step, en, steps // 2, cdtype)
    K.pow_base_kernel[grid1(steps)](exps, steps, 1, scalar_bits(float(base), torch.float64)[0], BLOCK=BLOCK,
                                    ODT=dtype_code(torch.float64))
    return copy_into(out, exps)


def _tri_launch(x, out, diagonal, lower, eye=False):
    r, c = out.shape[-2], out.shape[-1]
    if out.numel() == 0:
        return out
    bsz = out.numel() // (r * c)
    ob = out.view(bsz, r, c) if out.is_contiguous() else None
    tgt = ob if ob is not None else empty((bsz, r, c), out.dtype, out.device)
    if eye:
        xb = tgt  # not read
    elif x.dim() == 3:
        xb = x
    else:
        xb = x.reshape(bsz, r, c) if x.is_contiguous() else contig(x).view(bsz, r, c)
    br = min(max(next_power_of_2(r), 16), 64)
    bc = min(max(next_power_of_2(c), 16), 64)
    K.tri_kernel[(cdiv(r, br), cdiv(c, bc), bsz)](
        xb, tgt, bsz, r, c, *xb.stride(), *tgt.stride(), int(diagonal), LOWER=lower, EYE=eye,
        ODT=dtype_code(out.dtype), BR=br, BC=bc)
    if ob is None:
        copy_into(out, tgt.view(out.shape))
    return out


def _tri(lower):
    def fn(self, diagonal=0, *, out=None):
        if self.dim() < 2:
            raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions")
        res = empty(self.shape, self.dtype, self.device) if out is None else resize_out(out, self.shape)
        if out is not None and out.data_ptr() == self.data_ptr() and not self.is_contiguous():
            res = empty(self.shape, self.dtype, self.device)
            _tri_launch(self, res, diagonal, lower)
            return copy_into(out, res)
        return _tri_launch(self, res, diagonal, lower)
    return fn


def _tri_(lower):
    def fn(self, diagonal=0):
        res = _tri(lower)(self, diagonal)
        return copy_into(self, res)
    return fn


def eye_m_out(n, m=None, *, out):
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n if n < 0 else m}")
    resize_out(out, (n, m))
    return _tri_launch(None, out, 0, True, eye=True)


def eye_out(n, *, out):
    return eye_m_out(n, n, out=out)


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "cat": cat,
    "cat.out": cat_out,
    "fill_.Scalar": fill__Scalar,
    "fill_.Tensor": fill__Tensor,
    "zero_": zero_,
    "arange.start_out": arange_start_out,
    "linspace.out": linspace_out,
    "logspace.out": logspace_out,
    "tril": _tri(True),
    "tril.out": _tri(True),
    "tril_": _tri_(True),
    "triu": _tri(False),
    "triu.out": _tri(False),
    "triu_": _tri_(False),
    "eye.m_out": eye_m_out,
    "eye.out": eye_out,
}
