"""The `reductions` family's kernels: sum, mean, prod, max/min and their indices, var/std,
all/any, vector norms, and compositions (aminmax, var_mean, nansum, trace, equal). Every
reduction packs the reduced dims last and reduces rows (`_common.reduce_dims`).
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ._common import (compute_code, compute_dtype, contig, copy_into, empty, float_of, is_float, launch_pointwise,
                      promote, reduce_dims, resize_out)


# ------------------------------------------------------ sum, mean, prod, ... --
def _sum_dt(x, dtype):
    if dtype is not None:
        return dtype
    return torch.int64 if not is_float(x.dtype) else x.dtype


def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else _sum_dt(self, dtype)
    return reduce_dims(_cast_in(self, dtype), dim, keepdim, "sum", compute_dtype(dtype or self.dtype), odt, out)


def _cast_in(x, dtype):
    return x if dtype is None or dtype == x.dtype else contig(x, dtype)


def mean_dim(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else (dtype or self.dtype)
    if not is_float(dtype or self.dtype):
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                           "or complex dtype.")
    return reduce_dims(_cast_in(self, dtype), dim, keepdim, "mean", compute_dtype(dtype or self.dtype), odt, out)


def prod_dim_int(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else _sum_dt(self, dtype)
    return reduce_dims(_cast_in(self, dtype), [dim], keepdim, "prod", compute_dtype(dtype or self.dtype), odt, out)


def prod_full(self, *, dtype=None):
    return reduce_dims(_cast_in(self, dtype), None, False, "prod", compute_dtype(dtype or self.dtype),
                       _sum_dt(self, dtype), None)


def _amaxmin(rop):
    def fn(self, dim=(), keepdim=False, *, out=None):
        odt = out.dtype if out is not None else self.dtype
        return reduce_dims(self, dim, keepdim, rop, compute_dtype(self.dtype), odt, out)
    return fn


def _argmaxmin(rop):
    def fn(self, dim=None, keepdim=False, *, out=None):
        if dim is None:
            x = self.reshape(-1) if self.is_contiguous() else contig(self).view(-1)
            r = reduce_dims(x, [0], False, rop, compute_dtype(self.dtype), torch.int64)
            if keepdim:
                r = r.view([1] * self.dim())
            if out is None:
                return r
            resize_out(out, r.shape)
            return copy_into(out, r)
        return reduce_dims(self, [dim], keepdim, rop, compute_dtype(self.dtype), torch.int64, out)
    return fn


def _var_std(is_std):
    def fn(self, dim=None, *, correction=None, keepdim=False, out=None):
        corr = 1.0 if correction is None else float(correction)
        rdt = float_of(self.dtype)
        return reduce_dims(self, dim, keepdim, "var", compute_dtype(rdt), out.dtype if out is not None else rdt, out,
                           p=1.0 if is_std else 0.0, corr=corr)
    return fn


def _allany(rop, full):
    if full:
        def fn(self, *, out=None):
            odt = out.dtype if out is not None else (torch.uint8 if self.dtype == torch.uint8 else torch.bool)
            return reduce_dims(contig(self, torch.bool), None, False, rop, torch.int64, odt, out)
    else:
        def fn(self, dim, keepdim=False, *, out=None):
            odt = out.dtype if out is not None else (torch.uint8 if self.dtype == torch.uint8 else torch.bool)
            return reduce_dims(contig(self, torch.bool), [dim], keepdim, rop, torch.int64, odt, out)
    return fn


def _vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    ordf = float(ord)
    rop, p = {2.0: "norm2", 1.0: "norm1", 0.0: "norm0", math.inf: "amax_abs", -math.inf: "amin_abs"}.get(
        ordf, "normp"), ordf
    x = _cast_in(self, dtype)
    rdt = dtype or float_of(self.dtype)
    return reduce_dims(x, dim, keepdim, rop, compute_dtype(rdt), out.dtype if out is not None else rdt, out, p=p)


def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _vector_norm(self, ord, dim, keepdim, dtype=dtype)


def linalg_vector_norm_out(self, ord=2, dim=None, keepdim=False, *, dtype=None, out):
    return _vector_norm(self, ord, dim, keepdim, dtype=dtype, out=out)


def norm_ScalarOpt_dim(self, p, dim, keepdim=False):
    return _vector_norm(self, 2 if p is None else p, dim, keepdim)


def norm_out(self, p, dim, keepdim=False, *, out):
    return _vector_norm(self, 2 if p is None else p, dim, keepdim, out=out)


# ------------------------------------------------------------- compositions --
def _full_reduce(rop):
    def fn(self, *, out=None):
        if self.numel() == 0:
            raise RuntimeError(f"{'max' if rop == 'max' else 'min'}(): Expected reduction dim to be specified "
                               "for input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
        odt = out.dtype if out is not None else self.dtype
        return reduce_dims(self, (), False, rop, compute_dtype(self.dtype), odt, out)
    return fn


def aminmax(self, *, dim=None, keepdim=False, min=None, max=None):
    dims = () if dim is None else [dim]
    if dim is None and keepdim:
        # ATen keeps every dim as size 1 when reducing the whole tensor
        dims = list(range(self.dim()))
    lo = reduce_dims(self, dims, keepdim, "min", compute_dtype(self.dtype), self.dtype, min)
    hi = reduce_dims(self, dims, keepdim, "max", compute_dtype(self.dtype), self.dtype, max)
    return lo, hi


def _mean_var(is_std):
    def fn(self, dim=None, *, correction=None, keepdim=False):
        var = _var_std(is_std)(self, dim, correction=correction, keepdim=keepdim)
        rdt = float_of(self.dtype)
        mean = reduce_dims(self, dim, keepdim, "mean", compute_dtype(rdt), rdt)
        return var, mean
    return fn


def nansum(self, dim=None, keepdim=False, *, dtype=None, out=None):
    x = self
    if is_float(self.dtype):
        x = launch_pointwise("nan_to_num", empty(self.shape, self.dtype, self.device), [self], compute_code(self.dtype),
                             (0.0, math.inf, -math.inf))
    return sum_dim_IntList(x, dim, keepdim, dtype=dtype, out=out)


def trace(self):
    if self.dim() != 2:
        raise RuntimeError("trace: expected a matrix")
    return reduce_dims(self.diagonal(), (), False, "sum", compute_dtype(self.dtype), _sum_dt(self, None))


def equal(self, other):
    if self.shape != other.shape:
        return False
    if self.numel() == 0:
        return True
    ne = launch_pointwise("ne", empty(self.shape, torch.bool, self.device), [self, other],
                          compute_code(promote(self, other)))
    # the answer is a Python bool: one host read, as on every backend
    return not bool(reduce_dims(ne, (), False, "any", torch.int32, torch.bool).item())


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "sum.dim_IntList": sum_dim_IntList,
    "sum.IntList_out": sum_dim_IntList,
    "mean.dim": mean_dim,
    "mean.out": mean_dim,
    "prod.dim_int": prod_dim_int,
    "prod.int_out": prod_dim_int,
    "prod": prod_full,
    "amax": _amaxmin("max"),
    "amax.out": _amaxmin("max"),
    "amin": _amaxmin("min"),
    "amin.out": _amaxmin("min"),
    "argmax": _argmaxmin("argmax"),
    "argmax.out": _argmaxmin("argmax"),
    "argmin": _argmaxmin("argmin"),
    "argmin.out": _argmaxmin("argmin"),
    "var.correction": _var_std(False),
    "var.correction_out": _var_std(False),
    "std.correction": _var_std(True),
    "std.correction_out": _var_std(True),
    "all": _allany("all", True),
    "all.all_out": _allany("all", True),
    "all.dim": _allany("all", False),
    "all.out": _allany("all", False),
    "any": _allany("any", True),
    "any.all_out": _allany("any", True),
    "any.dim": _allany("any", False),
    "any.out": _allany("any", False),
    "linalg_vector_norm": linalg_vector_norm,
    "linalg_vector_norm.out": linalg_vector_norm_out,
    "norm.ScalarOpt_dim": norm_ScalarOpt_dim,
    "norm.out": norm_out,
    "max": _full_reduce("max"),
    "max.unary_out": _full_reduce("max"),
    "min": _full_reduce("min"),
    "min.unary_out": _full_reduce("min"),
    "aminmax": aminmax,
    "aminmax.out": aminmax,
    "var_mean.correction": _mean_var(False),
    "std_mean.correction": _mean_var(True),
    "nansum": nansum,
    "nansum.out": nansum,
    "trace": trace,
    "equal": equal,
}
