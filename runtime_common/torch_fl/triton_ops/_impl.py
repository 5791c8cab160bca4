"""Python side of the Triton fallback library: aten-schema wrappers around `_kernels`.

Only metadata / allocation / views are done with torch here; every number is
produced by a Triton kernel (or by another op of this library).
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from . import Unsupported
from . import _kernels as K
from ._common import (BLOCK, DTYPE_CODES, FILLS, FLOATS, MAX_DIMS, acc_dtype, atleast1d, cdiv, compute_code,
                      compute_dtype, contig, copy_into, device_of, dtype_code, empty, fill_into, float_of, grid1,
                      is_float, launch_pointwise, next_power_of_2, operand, promote, reduce_dims, resize_out, rows_last,
                      scalar_bits, shape_of)


def _pw_run(prep, args, kwargs, mode, out=None):
    op, operands, rdt, cdt, *params = prep(*args, **kwargs)
    shape = shape_of(operands)
    if mode == "func":
        dev = device_of(*operands)
        if op in FILLS:
            return fill_into(empty(shape, rdt, dev), FILLS[op])
        out = empty(shape, rdt, dev)
    elif mode == "inplace":
        out = args[0]
        if tuple(shape) != tuple(out.shape):
            raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
        if not torch.can_cast(rdt, out.dtype):
            raise RuntimeError(f"result type {rdt} can't be cast to the desired output type {out.dtype}")
    else:
        resize_out(out, shape)
    if op in FILLS:
        return fill_into(out, FILLS[op])
    return launch_pointwise(op, out, operands, cdt, params[0] if params else ())


# ---- unary
def _unary_float(op):
    def prep(self):
        rdt = float_of(self.dtype)
        return op, [self], rdt, compute_code(rdt)
    return prep


def _unary_same(op, int_op=None, bool_op=None):
    def prep(self):
        o = op
        if self.dtype == torch.bool and bool_op:
            o = bool_op
        elif not is_float(self.dtype) and int_op:
            o = int_op
        return o, [self], self.dtype, compute_code(self.dtype)
    return prep


def _variants(base, overload=None, out="out", inplace=True, func=True):
    ov = "." + overload if overload else ""
    d = {}
    if func:
        d["func"] = base + ov
    if inplace:
        d["inplace"] = base + "_" + ov
    if out:
        d["out"] = base + "." + out
    return d


def _prep_logical_not(self):
    return "logical_not", [self], torch.bool, compute_code(self.dtype)


def _prep_gelu(self, *, approximate="none"):
    return ("gelu_tanh" if approximate == "tanh" else "gelu"), [self], self.dtype, compute_code(self.dtype)


def _prep_gelu_bwd(grad_output, self, *, approximate="none"):
    rdt = promote(grad_output, self)
    op = "gelu_tanh_backward" if approximate == "tanh" else "gelu_backward"
    return op, [grad_output, self], rdt, compute_code(rdt)


def _binary(op, result=None, inputs_to_float=False):
    def prep(self, other):
        rdt = promote(self, other)
        if inputs_to_float:
            rdt = float_of(rdt)
        cdt = compute_code(rdt)
        return op, [self, other], (result or rdt), cdt
    return prep


def _prep_threshold_bwd(grad_output, self, threshold):
    rdt = promote(grad_output, self)
    return "threshold_backward", [grad_output, self, threshold], rdt, compute_code(rdt)


# ---- binary
def _addsub(op):
    def prep(self, other, *, alpha=1):
        rdt = promote(self, other)
        if alpha == 1 and not isinstance(alpha, bool):
            return op, [self, other], rdt, compute_code(rdt)
        return op + "_alpha", [self, other, alpha], rdt, compute_code(rdt)
    return prep


def _prep_div_mode(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _binary("div", inputs_to_float=True)(self, other)
    rdt = promote(self, other)
    return ("div_trunc" if rounding_mode == "trunc" else "div_floor"), [self, other], rdt, compute_code(rdt)


def _pow_cdt(rdt):
    # exp(y * log|x|) in fp32 loses |y log x| ulps: floating powers are computed in fp64
    return _F64 if is_float(rdt) else compute_code(rdt)


def _prep_pow_tt(self, exponent):
    rdt = promote(self, exponent)
    return "pow", [self, exponent], rdt, _pow_cdt(rdt)


_POW_SPECIAL = {2: "square", 3: "cube", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", -2: "inv_square", 1: "copy"}


def _prep_pow_ts(self, exponent):
    rdt = promote(self, exponent)
    if not is_float(rdt) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if exponent == 0 and not isinstance(exponent, bool):
        return "fill_one", [self], rdt, compute_code(rdt)
    sp = _POW_SPECIAL.get(exponent)
    if sp and (is_float(rdt) or exponent in (1, 2, 3)):
        return sp, [self], rdt, compute_code(rdt)
    return "pow", [self, exponent], rdt, _pow_cdt(rdt)


def _prep_pow_s(self, exponent):
    rdt = promote(self, exponent)
    return "pow", [self, exponent], rdt, _pow_cdt(rdt)


# ---- ternary
def _prep_where(condition, self, other):
    rdt = promote(self, other)
    return "where", [condition, self, other], rdt, compute_code(rdt)


def _prep_masked_fill(self, mask, value):
    # in-place only (the functional masked_fill is CompositeExplicit: clone + masked_fill_)
    return "where", [mask, value, self], self.dtype, compute_code(self.dtype)


def _prep_clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    rdt = promote(self, min, max)
    if min is None:
        return "clamp_max", [self, max], rdt, compute_code(rdt)
    if max is None:
        return "clamp_min", [self, min], rdt, compute_code(rdt)
    return "clamp", [self, min, max], rdt, compute_code(rdt)


def _prep_clamp_min(self, min):
    rdt = promote(self, min)
    return "clamp_min", [self, min], rdt, compute_code(rdt)


def _prep_clamp_max(self, max):
    rdt = promote(self, max)
    return "clamp_max", [self, max], rdt, compute_code(rdt)


def _prep_lerp(self, end, weight):
    rdt = self.dtype
    return "lerp", [self, end, weight], rdt, compute_code(rdt)


def _addc(op):
    def prep(self, tensor1, tensor2, *, value=1):
        rdt = promote(self, tensor1, tensor2)
        return op, [self, tensor1, tensor2, value], rdt, compute_code(rdt)
    return prep


# ---- special functions: floating results computed in fp64 (accurate to the fp32
# tolerance with plain formulas; the interpreter has no libdevice to lean on)
_F64 = DTYPE_CODES[torch.float64]


def _unary_special(op):
    def prep(self):
        return op, [self], float_of(self.dtype), _F64
    return prep


def _has_op(name):
    """The op exists in this torch and is not a composite (those decompose before reaching us)."""
    base, _, ov = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None or (ov or "default") not in packet.overloads():
        return False
    qualified = f"aten::{name}"
    return not any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
                   for key in ("CompositeImplicitAutograd", "CompositeExplicitAutograd"))


def _prep_sinc(self):
    # fp32 stays fp32: ATen rounds pi * x to the input's precision before the sine
    rdt = float_of(self.dtype)
    return "sinc", [self], rdt, compute_code(rdt)


def _prep_polygamma(n, self):
    rdt = float_of(self.dtype)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return "digamma", [self], rdt, _F64
    if n == 1:
        return "trigamma", [self], rdt, _F64
    return "polygamma", [self], rdt, _F64, (n,)


def _prep_frac(self):
    return "frac", [self], self.dtype, compute_code(self.dtype)


def _prep_angle(self):
    rdt = float_of(self.dtype)
    return "angle", [self], rdt, compute_code(rdt if is_float(self.dtype) else self.dtype)


def _bool_test(op, int_result=None):
    def prep(self):
        if not is_float(self.dtype):
            return "fill_zero", [self], torch.bool, compute_code(self.dtype)
        return op, [self], torch.bool, compute_code(self.dtype)
    return prep


def _prep_signbit(self):
    if self.dtype == torch.bool:
        return "fill_zero", [self], torch.bool, compute_code(self.dtype)
    cdt = _F64 if is_float(self.dtype) else compute_code(self.dtype)
    return "signbit", [self], torch.bool, cdt


def _prep_nan_to_num(self, nan=None, posinf=None, neginf=None):
    if not is_float(self.dtype):
        return "copy", [self], self.dtype, compute_code(self.dtype)
    info = torch.finfo(self.dtype)
    params = (0.0 if nan is None else nan, info.max if posinf is None else posinf,
              info.min if neginf is None else neginf)
    return "nan_to_num", [self], self.dtype, compute_code(self.dtype), params


def _prep_round_decimals(self, *, decimals):
    if not is_float(self.dtype):
        raise RuntimeError("round_vml_cpu not implemented for 'Long'" if self.dtype == torch.int64 else
                           f"round with decimals is not implemented for {self.dtype}")
    # 10^|d| rounded to the input dtype first, as ATen does
    ten_pow = torch.tensor(10.0 ** abs(decimals), dtype=torch.float64).to(self.dtype).item()
    return "round_decimals", [self], self.dtype, compute_code(self.dtype), (ten_pow, 1 if decimals < 0 else 0)


# ---- activations with scalar parameters
def _act(op, params=lambda **kw: ()):
    def prep(self, *args, **kwargs):
        return op, [self], self.dtype, compute_code(self.dtype), params(*args, **kwargs)
    return prep


def _elu_params(alpha=1, scale=1, input_scale=1):
    return (float(alpha) * float(scale), scale, input_scale)


def _prep_elu_bwd(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    rdt = promote(grad_output, self_or_result)
    op = "elu_backward_result" if is_result else "elu_backward"
    return op, [grad_output, self_or_result], rdt, compute_code(rdt), _elu_params(alpha, scale, input_scale)


def _prep_hardtanh(self, min_val=-1, max_val=1):
    rdt = self.dtype
    return "clamp", [self, min_val, max_val], rdt, compute_code(rdt)


def _prep_logit(self, eps=None):
    rdt = float_of(self.dtype)
    return "logit", [self], rdt, compute_code(rdt), ((0.0, 0) if eps is None else (eps, 1))


def _grad_act(op, params=lambda *a, **kw: ()):
    def prep(grad_output, self, *args, **kwargs):
        rdt = promote(grad_output, self)
        return op, [grad_output, self], rdt, compute_code(rdt), params(*args, **kwargs)
    return prep


def _grad_variants(name, out="grad_input"):
    return {"func": name, "out": f"{name}.{out}"}


def _prep_log_sigmoid_bwd(grad_output, self, buffer):
    # the buffer (CPU's saved intermediates) is not needed: recomputed from self, as on CUDA
    rdt = promote(grad_output, self)
    return "log_sigmoid_backward", [grad_output, self], rdt, compute_code(rdt)


def _prep_logit_bwd(grad_output, self, eps=None):
    rdt = promote(grad_output, self)
    return "logit_backward", [grad_output, self], rdt, compute_code(rdt), ((0.0, 0) if eps is None else (eps, 1))


def _prep_dropout_bwd(grad_output, mask, scale):
    rdt = promote(grad_output, mask, scale)  # an integer grad times a float scale is float, as in ATen
    return "mul_scale", [grad_output, mask, scale], rdt, compute_code(rdt)


# ---- binary
def _float_binary(op, cdt64=True):
    def prep(self, other):
        rdt = float_of(promote(self, other))
        return op, [self, other], rdt, (_F64 if cdt64 else compute_code(rdt))
    return prep


def _prep_nextafter(self, other):
    rdt = promote(self, other)
    if rdt not in (torch.float32, torch.float64):
        raise Unsupported(f"nextafter on {rdt}: the kernel steps fp32/fp64 bit patterns only")
    return "nextafter", [self, other], rdt, compute_code(rdt)


def _shift(op):
    def prep(self, other):
        rdt = promote(self, other)
        return op, [self, other], rdt, compute_code(rdt), (torch.iinfo(rdt).bits if rdt != torch.bool else 8,)
    return prep


def _prep_rsub(self, other, *, alpha=1):
    rdt = promote(self, other)
    return "sub_alpha", [other, self, alpha], rdt, compute_code(rdt)


# ------------------------------------------------------------- reductions --

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


# ---------------------------------------------------------------- softmax --
_ONE_PASS_MAX = 8192  # row elements a program keeps in registers (one read of the row)


def _row_launch(kk: int) -> dict:
    """Block size, pass count and warps of the row kernels (softmax, layer norm) for rows of kk."""
    if kk <= _ONE_PASS_MAX:
        bk = max(next_power_of_2(kk), 16)
        return {"BLOCK_K": bk, "ONE_PASS": True, "num_warps": 4 if bk < 2048 else 8 if bk < 4096 else 16}
    return {"BLOCK_K": 1024, "ONE_PASS": False}


def _softmax_impl(self, dim, half_to_float, log, out=None):
    odt = torch.float32 if (half_to_float and self.dtype in (torch.float16, torch.bfloat16)) else self.dtype
    xm, d = rows_last(self, dim)
    kk = xm.shape[-1]
    m = xm.numel() // max(kk, 1)
    buf = contig(xm, compute_dtype(self.dtype))
    # Softmax over the last dim writes the result in place: no copy after the kernel.
    direct = d == max(self.dim(), 1) - 1 and (out is None or (out.dtype == odt and out.shape == self.shape
                                                              and out.is_contiguous()))
    res = (out if out is not None else empty(self.shape, odt, self.device)) if direct else \
        empty(xm.shape, odt, self.device)
    if m > 0 and kk > 0:
        K.softmax_kernel[(m,)](buf, res, m, kk, LOG=log, ODT=dtype_code(odt), **_row_launch(kk))
    if direct:
        return res
    res = res.movedim(-1, d)
    if self.dim() == 0:
        res = res.view(())
    if out is None:
        out = empty(self.shape, odt, self.device)
    else:
        resize_out(out, self.shape)
    return copy_into(out, res)


def _softmax_bwd_impl(grad_output, output, dim, input_dtype, log, out=None):
    if output.dim() == 0 and output.device != grad_output.device:
        output = output.to(grad_output.device)  # a host 0-dim tensor, as for pointwise ops
    gm, d = rows_last(grad_output, dim)
    ym, _ = rows_last(output, dim)
    kk = gm.shape[-1]
    m = gm.numel() // max(kk, 1)
    cd = compute_dtype(grad_output.dtype)
    gb, yb = contig(gm, cd), contig(ym, cd)
    direct = d == max(grad_output.dim(), 1) - 1 and (out is None or (
        out.dtype == input_dtype and out.shape == grad_output.shape and out.is_contiguous()))
    res = (out if out is not None else empty(grad_output.shape, input_dtype, grad_output.device)) if direct \
        else empty(gm.shape, input_dtype, grad_output.device)
    if m > 0 and kk > 0:
        K.softmax_bwd_kernel[(m,)](gb, yb, res, m, kk, LOG=log, ODT=dtype_code(input_dtype), **_row_launch(kk))
    if direct:
        return res
    res = res.movedim(-1, d)
    if grad_output.dim() == 0:
        res = res.view(())
    if out is None:
        out = empty(grad_output.shape, input_dtype, grad_output.device)
    else:
        resize_out(out, grad_output.shape)
    return copy_into(out, res)


def _softmax(self, dim, half_to_float):
    return _softmax_impl(self, dim, half_to_float, False)


def _softmax_out(self, dim, half_to_float, *, out):
    return _softmax_impl(self, dim, half_to_float, False, out)


def _log_softmax(self, dim, half_to_float):
    return _softmax_impl(self, dim, half_to_float, True)


def _log_softmax_out(self, dim, half_to_float, *, out):
    return _softmax_impl(self, dim, half_to_float, True, out)


def _softmax_backward_data(grad_output, output, dim, input_dtype):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, False)


def _softmax_backward_data_out(grad_output, output, dim, input_dtype, *, grad_input):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, False, grad_input)


def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, True)


def _log_softmax_backward_data_out(grad_output, output, dim, input_dtype, *, out):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, True, out)


# ------------------------------------------------------------- layer norm --
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    nk = len(normalized_shape)
    lead = list(input.shape[: input.dim() - nk])
    kk = 1
    for s in normalized_shape:
        kk *= s
    m = 1
    for s in lead:
        m *= s
    cd = compute_dtype(input.dtype)
    xb = contig(input, cd)
    out = empty(input.shape, input.dtype, input.device)
    sshape = lead + [1] * nk
    mean = empty(sshape, input.dtype, input.device)
    rstd = empty(sshape, input.dtype, input.device)
    wb = contig(weight, cd) if weight is not None else xb
    bb = contig(bias, cd) if bias is not None else xb
    if m > 0 and kk > 0:
        K.layer_norm_kernel[(m,)](xb, wb, bb, out, mean, rstd, m, kk, float(eps), HAS_W=weight is not None,
                                  HAS_B=bias is not None, ODT=dtype_code(input.dtype), SDT=dtype_code(input.dtype),
                                  **_row_launch(kk))
    return out, mean, rstd


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    nk = len(normalized_shape)
    lead = list(input.shape[: input.dim() - nk])
    kk = 1
    for s in normalized_shape:
        kk *= s
    m = 1
    for s in lead:
        m *= s
    cd = compute_dtype(input.dtype)
    dev = input.device
    xb = contig(input, cd).view(m, kk)
    gb = contig(grad_out, cd).view(m, kk)
    mb = contig(mean, cd).view(m, 1)
    rb = contig(rstd, cd).view(m, 1)
    dx = dw = db = None
    if output_mask[0]:
        dx = empty(input.shape, input.dtype, dev)
        wb = contig(weight, cd) if weight is not None else xb
        if m > 0 and kk > 0:
            K.layer_norm_bwd_kernel[(m,)](gb, xb, mb, rb, wb, dx, m, kk, HAS_W=weight is not None,
                                          ODT=dtype_code(input.dtype), **_row_launch(kk))
    if output_mask[1] and weight is not None:
        xmu = launch_pointwise("sub", empty((m, kk), cd, dev), [xb, mb], compute_code(cd))
        gx = launch_pointwise("mul_scale", empty((m, kk), cd, dev), [gb, xmu, rb], compute_code(cd))
        dw = reduce_dims(gx, [0], False, "sum", cd, weight.dtype).view(weight.shape)
    if output_mask[2] and bias is not None:
        db = reduce_dims(gb, [0], False, "sum", cd, bias.dtype).view(bias.shape)
    return dx, dw, db


# ----------------------------------------------------------------- matmul --
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


# ------------------------------------------------------------ index ops -----
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
    off = 0
    for t in ts:
        sz = t.shape[dim]
        if sz:
            copy_into(out.narrow(dim, off, sz), t)
        off += sz
    return out


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


# ---------------------------------------------- more reductions and matmuls --
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


# -------------------------------------------------- activations with views --
def log_sigmoid_forward(self, *, output=None, buffer=None):
    res = empty(self.shape, self.dtype, self.device) if output is None else resize_out(output, self.shape)
    launch_pointwise("log_sigmoid", res, [self], compute_code(self.dtype))
    # the buffer holds CPU-kernel intermediates; like CUDA we keep it empty (backward recomputes)
    buf = empty((0,), self.dtype, self.device) if buffer is None else resize_out(buffer, (0,))
    return res, buf


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


# ------------------------------------------------------------------ tables ----
class PointwiseOp(NamedTuple):
    """One pointwise op: its preparation (the op's arguments -> (kernel op, operands,
    result dtype, compute dtype code[, scalar parameters])), its variant ("func",
    "inplace" or "out") and the name of its out= argument."""
    prep: Callable
    mode: str
    out_arg: str


def _pointwise_table() -> dict[str, PointwiseOp]:
    table: dict[str, PointwiseOp] = {}

    def add(names, prep, out_arg="out"):
        """The variants of one op (names: dict variant -> op name), one preparation."""
        for mode, name in names.items():
            table[name] = PointwiseOp(prep, mode, out_arg)

    def add_if_in_torch(names, prep, out_arg="out"):
        """As add, for the variants that this torch has as non-composite ops."""
        add({mode: name for mode, name in names.items() if _has_op(name)}, prep, out_arg)

    # unary
    for n in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
              "tanh", "sigmoid", "erf", "reciprocal"):
        add(_variants(n), _unary_float(n))
    for n in ("floor", "ceil", "round", "trunc"):
        add(_variants(n), _unary_same(n, int_op="copy"))
    add(_variants("neg"), _unary_same("neg"))
    add(_variants("sign"), _unary_same("sign", bool_op="copy"))
    add({"out": "abs.out"}, _unary_same("abs", bool_op="copy"))
    add(_variants("relu", out=None), _unary_same("relu"))
    add(_variants("bitwise_not"), _unary_same("bitwise_not", bool_op="logical_not"))
    add({"out": "logical_not.out"}, _prep_logical_not)
    add(_variants("gelu"), _prep_gelu)
    add(_variants("silu"), _unary_same("silu"))
    add({"func": "gelu_backward", "out": "gelu_backward.grad_input"}, _prep_gelu_bwd, out_arg="grad_input")
    add({"out": "silu_backward.grad_input"}, _binary("silu_backward"), out_arg="grad_input")
    add({"func": "sigmoid_backward", "out": "sigmoid_backward.grad_input"}, _binary("sigmoid_backward"),
        out_arg="grad_input")
    add({"func": "tanh_backward", "out": "tanh_backward.grad_input"}, _binary("tanh_backward"), out_arg="grad_input")
    add({"func": "threshold_backward", "out": "threshold_backward.grad_input"}, _prep_threshold_bwd,
        out_arg="grad_input")

    # binary
    add(_variants("add", "Tensor"), _addsub("add"))
    add(_variants("sub", "Tensor"), _addsub("sub"))
    add(_variants("mul", "Tensor"), _binary("mul"))
    add(_variants("div", "Tensor"), _binary("div", inputs_to_float=True))
    add(_variants("div", "Tensor_mode", out="out_mode"), _prep_div_mode)
    for n in ("maximum", "minimum"):
        add(_variants(n, inplace=False), _binary(n))
    for n in ("fmod", "remainder"):
        add(_variants(n, "Tensor", out="Tensor_out"), _binary(n))
    add(_variants("atan2"), _binary("atan2", inputs_to_float=True))
    for n in ("eq", "ne", "lt", "le", "gt", "ge"):
        add(_variants(n, "Tensor", out="Tensor_out"), _binary(n, result=torch.bool))
        add(_variants(n, "Scalar", out="Scalar_out"), _binary(n, result=torch.bool))
    for n in ("logical_and", "logical_or", "logical_xor"):
        add({"out": n + ".out"}, _binary(n, result=torch.bool))
    for n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        add(_variants(n, "Tensor", out="Tensor_out"), _binary(n))
    add({"func": "pow.Tensor_Tensor", "inplace": "pow_.Tensor", "out": "pow.Tensor_Tensor_out"}, _prep_pow_tt)
    add({"func": "pow.Tensor_Scalar", "inplace": "pow_.Scalar", "out": "pow.Tensor_Scalar_out"}, _prep_pow_ts)
    add({"func": "pow.Scalar", "out": "pow.Scalar_out"}, _prep_pow_s)

    # ternary
    add({"func": "where.self", "out": "where.self_out"}, _prep_where)
    add({"inplace": "masked_fill_.Scalar"}, _prep_masked_fill)
    add({"inplace": "masked_fill_.Tensor"}, _prep_masked_fill)
    add(_variants("clamp"), _prep_clamp)
    add(_variants("clamp", "Tensor", out="Tensor_out"), _prep_clamp)
    add(_variants("clamp_min"), _prep_clamp_min)
    add(_variants("clamp_min", "Tensor", out="Tensor_out"), _prep_clamp_min)
    add(_variants("clamp_max"), _prep_clamp_max)
    add(_variants("clamp_max", "Tensor", out="Tensor_out"), _prep_clamp_max)
    add(_variants("lerp", "Scalar", out="Scalar_out"), _prep_lerp)
    add(_variants("lerp", "Tensor", out="Tensor_out"), _prep_lerp)
    add(_variants("addcmul"), _addc("addcmul"))
    add(_variants("addcdiv"), _addc("addcdiv"))

    # special functions (computed in fp64)
    for n in ("acos", "asin", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "erfc", "erfinv", "lgamma",
              "digamma"):
        add_if_in_torch(_variants(n), _unary_special(n))
    for n, op in (("special_erfcx", "erfcx"), ("special_log_ndtr", "log_ndtr"), ("special_ndtri", "ndtri"),
                  ("special_entr", "entr")):
        add_if_in_torch(_variants(n, inplace=False), _unary_special(op))
    add_if_in_torch(_variants("sinc"), _prep_sinc)
    add_if_in_torch({"func": "polygamma", "out": "polygamma.out", "inplace": "polygamma_"}, _prep_polygamma)
    add(_variants("frac"), _prep_frac)
    add(_variants("sgn"), _unary_same("sign", bool_op="copy"))
    add({"func": "angle", "out": "angle.out"}, _prep_angle)
    add({"func": "isnan"}, _bool_test("isnan"))
    add({"func": "isposinf", "out": "isposinf.out"}, _bool_test("isposinf"))
    add({"func": "isneginf", "out": "isneginf.out"}, _bool_test("isneginf"))
    add({"func": "signbit", "out": "signbit.out"}, _prep_signbit)
    add_if_in_torch(_variants("nan_to_num"), _prep_nan_to_num)
    add(_variants("round", "decimals", out="decimals_out"), _prep_round_decimals)

    # activations with scalar parameters
    add_if_in_torch(_variants("elu"), _act("elu", _elu_params))
    add_if_in_torch({"func": "elu_backward", "out": "elu_backward.grad_input"}, _prep_elu_bwd, out_arg="grad_input")
    add_if_in_torch(_variants("softplus", inplace=False),
                    _act("softplus", lambda beta=1, threshold=20: (beta, threshold)))
    add_if_in_torch(_variants("mish"), _act("mish"))
    add_if_in_torch(_variants("threshold"), _act("threshold", lambda threshold, value: (threshold, value)))
    add_if_in_torch(_variants("leaky_relu"), _act("leaky_relu", lambda negative_slope=0.01: (negative_slope,)))
    add_if_in_torch(_variants("hardsigmoid"), _act("hardsigmoid"))
    add_if_in_torch(_variants("hardswish"), _act("hardswish"))
    add_if_in_torch(_variants("softshrink", inplace=False), _act("softshrink", lambda lambd=0.5: (lambd,)))
    add_if_in_torch(_variants("hardshrink", inplace=False), _act("hardshrink", lambda lambd=0.5: (lambd,)))
    add_if_in_torch(_variants("hardtanh"), _prep_hardtanh)
    add_if_in_torch(_variants("logit"), _prep_logit)
    add_if_in_torch(_grad_variants("hardtanh_backward"), _grad_act("hardtanh_backward", lambda lo, hi: (lo, hi)),
                    out_arg="grad_input")
    add_if_in_torch(_grad_variants("softplus_backward"),
                    _grad_act("softplus_backward", lambda beta, threshold: (beta, threshold)),
                    out_arg="grad_input")
    add_if_in_torch({"func": "mish_backward"}, _grad_act("mish_backward"))
    add_if_in_torch(_grad_variants("leaky_relu_backward"),
                    _grad_act("leaky_relu_backward", lambda negative_slope, self_is_result: (negative_slope,)),
                    out_arg="grad_input")
    add_if_in_torch(_grad_variants("hardsigmoid_backward"), _grad_act("hardsigmoid_backward"), out_arg="grad_input")
    add_if_in_torch({"func": "hardswish_backward", "out": "hardswish_backward.out"}, _grad_act("hardswish_backward"))
    for n in ("softshrink_backward", "hardshrink_backward"):
        add_if_in_torch(_grad_variants(n), _grad_act("shrink_backward", lambda lambd: (lambd,)), out_arg="grad_input")
    add_if_in_torch(_grad_variants("log_sigmoid_backward"), _prep_log_sigmoid_bwd, out_arg="grad_input")
    add_if_in_torch(_grad_variants("logit_backward"), _prep_logit_bwd, out_arg="grad_input")
    add_if_in_torch({"func": "native_dropout_backward", "out": "native_dropout_backward.out"}, _prep_dropout_bwd)

    # binary
    for n in ("logaddexp", "logaddexp2", "hypot"):
        add_if_in_torch(_variants(n, inplace=n == "hypot"), _float_binary(n))
    add_if_in_torch(_variants("copysign", "Tensor", out="out"), _float_binary("copysign"))
    add_if_in_torch({"func": "xlogy.Tensor", "inplace": "xlogy_.Tensor", "out": "xlogy.OutTensor"},
                    _float_binary("xlogy"))
    add_if_in_torch({"out": "xlogy.OutScalar_Self"}, _float_binary("xlogy"))
    add_if_in_torch({"out": "xlogy.OutScalar_Other"}, _float_binary("xlogy"))
    add_if_in_torch({"func": "special_xlog1py", "out": "special_xlog1py.out"}, _float_binary("xlog1py"))
    add_if_in_torch({"out": "special_xlog1py.self_scalar_out"}, _float_binary("xlog1py"))
    add_if_in_torch({"out": "special_xlog1py.other_scalar_out"}, _float_binary("xlog1py"))
    add_if_in_torch({"func": "special_zeta", "out": "special_zeta.out"}, _float_binary("zeta"))
    add_if_in_torch({"out": "special_zeta.self_scalar_out"}, _float_binary("zeta"))
    add_if_in_torch({"out": "special_zeta.other_scalar_out"}, _float_binary("zeta"))
    for n in ("fmax", "fmin"):
        add_if_in_torch(_variants(n, inplace=False), _binary(n))
    add_if_in_torch(_variants("heaviside"), _binary("heaviside"))
    for n in ("gcd", "lcm"):
        add_if_in_torch(_variants(n), _binary(n))
    add_if_in_torch(_variants("floor_divide", "", out="out"), _binary("div_floor"))
    add_if_in_torch({"inplace": "floor_divide_.Tensor"}, _binary("div_floor"))
    add_if_in_torch(_variants("nextafter"), _prep_nextafter)
    add_if_in_torch(_variants("bitwise_left_shift", "Tensor", out="Tensor_out"), _shift("shl"))
    add_if_in_torch(_variants("bitwise_right_shift", "Tensor", out="Tensor_out"), _shift("shr"))
    add_if_in_torch({"func": "rsub.Tensor", "out": "rsub.Tensor_out"}, _prep_rsub)
    return table


def _pointwise_kernel(entry: PointwiseOp) -> Callable:
    prep, mode, out_arg = entry
    if mode == "out":
        def fn(*args, **kwargs):
            out = kwargs.pop(out_arg)
            return _pw_run(prep, args, kwargs, "out", out)
    else:
        def fn(*args, **kwargs):
            return _pw_run(prep, args, kwargs, mode)
    return fn


# The pointwise ops by name (torch_fl._triton_fast replays their launches, _foreach runs
# their preparations per tensor).
POINTWISE: dict[str, PointwiseOp] = _pointwise_table()

KERNELS: dict[str, Callable] = {
    **{name: _pointwise_kernel(entry) for name, entry in POINTWISE.items()},
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
    "_softmax": _softmax,
    "_softmax.out": _softmax_out,
    "_log_softmax": _log_softmax,
    "_log_softmax.out": _log_softmax_out,
    "_softmax_backward_data": _softmax_backward_data,
    "_softmax_backward_data.out": _softmax_backward_data_out,
    "_log_softmax_backward_data": _log_softmax_backward_data,
    "_log_softmax_backward_data.out": _log_softmax_backward_data_out,
    "native_layer_norm": native_layer_norm,
    "native_layer_norm_backward": native_layer_norm_backward,
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
    "index_select": index_select,
    "index_select.out": index_select_out,
    "gather": gather,
    "gather.out": gather_out,
    "scatter_add": scatter_add,
    "scatter_add_": scatter_add_,
    "scatter_add.out": scatter_add_out,
    "embedding_dense_backward": embedding_dense_backward,
    "cat": cat,
    "cat.out": cat_out,
    "fill_.Scalar": fill__Scalar,
    "fill_.Tensor": fill__Tensor,
    "zero_": zero_,
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
    "dot": dot,
    "vdot": dot,
    "addmv": addmv,
    "addmv_": addmv_,
    "addmv.out": addmv,
    "addbmm": addbmm,
    "addbmm_": addbmm_,
    "addbmm.out": addbmm,
    "log_sigmoid_forward": log_sigmoid_forward,
    "log_sigmoid_forward.output": log_sigmoid_forward,
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
