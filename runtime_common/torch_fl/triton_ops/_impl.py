"""Python side of the Triton fallback library: aten-schema wrappers around `_kernels`.

Only metadata / allocation / views are done with torch here; every number is
produced by a Triton kernel (or by another op of this library).
"""
from __future__ import annotations

import math
import struct
from typing import Callable

import torch
import triton

from . import Unsupported
from . import _kernels as K

_DT = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4,
       torch.int64: 5, torch.bool: 6, torch.int8: 7, torch.uint8: 8, torch.int16: 9}
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_BLOCK = 1024
_MAXD = 6


def _odt(dtype: torch.dtype) -> int:
    try:
        return _DT[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} is not supported by the Triton kernels") from None


def _cdt(dtype: torch.dtype) -> int:
    """Compute dtype code: fp16/bf16 compute in fp32, small ints/bool in int32."""
    if dtype == torch.float64:
        return 1
    if dtype in _FLOATS:
        return 0
    if dtype == torch.int64:
        return 5
    _odt(dtype)
    return 4


def _cdt_torch(dtype: torch.dtype) -> torch.dtype:
    return {0: torch.float32, 1: torch.float64, 4: torch.int64, 5: torch.int64}[_cdt(dtype)]


def _is_float(dtype) -> bool:
    return dtype in _FLOATS


def _float_of(dtype) -> torch.dtype:
    return dtype if _is_float(dtype) else torch.get_default_dtype()


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def _promote(*args) -> torch.dtype:
    """torch.result_type semantics over any number of tensors / Python scalars."""
    args = [a for a in args if a is not None]
    if len(args) == 1:
        a = args[0]
        return a.dtype if _is_tensor(a) else _scalar_dtype(a)
    if len(args) == 2:
        return torch.result_type(args[0], args[1])
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
    return elementwise_dtypes(*args, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]


def _scalar_dtype(v) -> torch.dtype:
    if isinstance(v, bool):
        return torch.bool
    if isinstance(v, int):
        return torch.int64
    return torch.get_default_dtype()


def _device_of(*args) -> torch.device:
    dev = None
    for a in args:
        if _is_tensor(a):
            if a.device.type != "cpu" or a.dim() > 0:
                return a.device
            dev = dev or a.device
    return dev or torch.device("cpu")


def _grid1(n):
    return (triton.cdiv(n, _BLOCK),)


def _pad6(shape, strides_list):
    """Coalesce dims (drop size-1 dims, merge contiguous runs), pad to 6 dims."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    sh = [shape[i] for i in dims]
    sts = [[st[i] for i in dims] for st in strides_list]
    i = len(sh) - 1
    while i > 0:
        if all(st[i - 1] == st[i] * sh[i] for st in sts):
            sh[i - 1] *= sh[i]
            del sh[i]
            for st in sts:
                st[i - 1] = st[i]
                del st[i]
        i -= 1
    if len(sh) > _MAXD:
        raise Unsupported("more than 6 non-mergeable dims")
    pad = _MAXD - len(sh)
    return [1] * pad + sh, [[0] * pad + st for st in sts]


# ------------------------------------------------------------ scalars/fill --
def _bits(value, dtype):
    if _is_float(dtype):
        return struct.unpack("<q", struct.pack("<d", float(value)))[0], True
    if dtype == torch.bool:
        return int(bool(value)), False
    return int(value), False


def fill_into(t: torch.Tensor, value) -> torch.Tensor:
    """Fill a (strided) tensor with a Python scalar, exactly."""
    n = t.numel()
    if n == 0:
        return t
    bits, is_f = _bits(value, t.dtype)
    if not is_f and isinstance(value, float) and t.dtype != torch.bool:
        bits = int(value)
    sh, (st,) = _pad6(list(t.shape), [list(t.stride())])
    K.fill_kernel[_grid1(n)](t, n, *sh, *st, bits, IS_FLOAT=is_f, ODT=_odt(t.dtype), BLOCK=_BLOCK)
    return t


def _scalar_tensor(value, device, dtype=None) -> torch.Tensor:
    dtype = dtype or (torch.float64 if isinstance(value, float) else _scalar_dtype(value))
    t = torch.empty((), dtype=dtype, device=device)
    return fill_into(t, value)


def _operand(v, device) -> torch.Tensor:
    """Tensor operand on `device`; Python scalars and 0-dim CPU tensors become 0-dim device tensors."""
    if not _is_tensor(v):
        return _scalar_tensor(v, device)
    if v.device != device and v.dim() == 0 and v.device.type == "cpu":
        return _scalar_tensor(v.item(), device, v.dtype)
    return v


# --------------------------------------------------------- pointwise core --
def launch_pointwise(op: str, out: torch.Tensor, inputs, cdt: int) -> torch.Tensor:
    """out = op(*inputs) elementwise; inputs are broadcast (by strides) to out's shape."""
    n = out.numel()
    if n == 0:
        return out
    dev = out.device
    ins = [_operand(v, dev).expand(out.shape) for v in inputs]
    shape = list(out.shape)
    sh, sts = _pad6(shape, [list(out.stride())] + [list(t.stride()) for t in ins])
    nin = len(ins)
    ptrs = ins + [ins[0]] * (4 - nin)
    sts = sts + [sts[1]] * (4 - nin)
    flat = [s for st in sts for s in st]
    K.pointwise_kernel[_grid1(n)](out, *ptrs, n, *sh, *flat, OP=K.OP_ID[op], NIN=nin, CDT=cdt,
                                  ODT=_odt(out.dtype), BLOCK=_BLOCK)
    return out


def copy_into(dst: torch.Tensor, src) -> torch.Tensor:
    """Strided -> strided copy with dtype conversion (src broadcast to dst). A helper, not an op."""
    s = _operand(src, dst.device)
    return launch_pointwise("copy", dst, [s], _cdt(s.dtype))


def _empty(shape, dtype, device):
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def _contig(x: torch.Tensor, dtype=None) -> torch.Tensor:
    dtype = dtype or x.dtype
    if x.dtype == dtype and x.is_contiguous():
        return x
    return copy_into(_empty(x.shape, dtype, x.device), x)


def _resize_out(out: torch.Tensor, shape) -> torch.Tensor:
    if tuple(out.shape) != tuple(shape):
        out.resize_(tuple(shape))
    return out


# A pointwise "prep" returns (op, operands, result dtype, compute dtype code).
_POINTWISE: dict[str, tuple] = {}


def _shape_of(operands):
    shapes = [tuple(o.shape) for o in operands if _is_tensor(o)]
    return torch.broadcast_shapes(*shapes) if shapes else ()


def _pw_run(prep, args, kwargs, mode, out=None):
    op, operands, rdt, cdt = prep(*args, **kwargs)
    shape = _shape_of(operands)
    if mode == "func":
        dev = _device_of(*operands)
        if op == "fill_one":
            return fill_into(_empty(shape, rdt, dev), 1)
        out = _empty(shape, rdt, dev)
    elif mode == "inplace":
        out = args[0]
        if tuple(shape) != tuple(out.shape):
            raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
        if not torch.can_cast(rdt, out.dtype):
            raise RuntimeError(f"result type {rdt} can't be cast to the desired output type {out.dtype}")
    else:
        _resize_out(out, shape)
    if op == "fill_one":
        return fill_into(out, 1)
    return launch_pointwise(op, out, operands, cdt)


def _pw(names, prep, out_arg="out"):
    """Register the functional/in-place/out variants (names: dict variant -> op name)."""
    for mode, name in names.items():
        _POINTWISE[name] = (prep, mode, out_arg)


def _make_pointwise(name):
    prep, mode, out_arg = _POINTWISE[name]
    if mode == "out":
        def fn(*args, **kwargs):
            out = kwargs.pop(out_arg)
            return _pw_run(prep, args, kwargs, "out", out)
    else:
        def fn(*args, **kwargs):
            return _pw_run(prep, args, kwargs, mode)
    return fn


# ---- unary
def _unary_float(op):
    def prep(self):
        rdt = _float_of(self.dtype)
        return op, [self], rdt, _cdt(rdt)
    return prep


def _unary_same(op, int_op=None, bool_op=None):
    def prep(self):
        o = op
        if self.dtype == torch.bool and bool_op:
            o = bool_op
        elif not _is_float(self.dtype) and int_op:
            o = int_op
        return o, [self], self.dtype, _cdt(self.dtype)
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


for _n in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
           "tanh", "sigmoid", "erf", "reciprocal"):
    _pw(_variants(_n), _unary_float(_n))
for _n in ("floor", "ceil", "round", "trunc"):
    _pw(_variants(_n), _unary_same(_n, int_op="copy"))
_pw(_variants("neg"), _unary_same("neg"))
_pw(_variants("sign"), _unary_same("sign", bool_op="copy"))
_pw({"out": "abs.out"}, _unary_same("abs", bool_op="copy"))
_pw(_variants("relu", out=None), _unary_same("relu"))
_pw(_variants("bitwise_not"), _unary_same("bitwise_not", bool_op="logical_not"))


def _prep_logical_not(self):
    return "logical_not", [self], torch.bool, _cdt(self.dtype)


_pw({"out": "logical_not.out"}, _prep_logical_not)


def _prep_gelu(self, *, approximate="none"):
    return ("gelu_tanh" if approximate == "tanh" else "gelu"), [self], self.dtype, _cdt(self.dtype)


_pw(_variants("gelu"), _prep_gelu)
_pw(_variants("silu"), _unary_same("silu"))


def _prep_gelu_bwd(grad_output, self, *, approximate="none"):
    rdt = _promote(grad_output, self)
    return ("gelu_tanh_backward" if approximate == "tanh" else "gelu_backward"), [grad_output, self], rdt, _cdt(rdt)


_pw({"func": "gelu_backward", "out": "gelu_backward.grad_input"}, _prep_gelu_bwd, out_arg="grad_input")


def _binary(op, result=None, inputs_to_float=False):
    def prep(self, other):
        rdt = _promote(self, other)
        if inputs_to_float:
            rdt = _float_of(rdt)
        cdt = _cdt(rdt)
        return op, [self, other], (result or rdt), cdt
    return prep


_pw({"out": "silu_backward.grad_input"}, _binary("silu_backward"), out_arg="grad_input")
_pw({"func": "sigmoid_backward", "out": "sigmoid_backward.grad_input"}, _binary("sigmoid_backward"), out_arg="grad_input")
_pw({"func": "tanh_backward", "out": "tanh_backward.grad_input"}, _binary("tanh_backward"), out_arg="grad_input")


def _prep_threshold_bwd(grad_output, self, threshold):
    rdt = _promote(grad_output, self)
    return "threshold_backward", [grad_output, self, threshold], rdt, _cdt(rdt)


_pw({"func": "threshold_backward", "out": "threshold_backward.grad_input"}, _prep_threshold_bwd,
    out_arg="grad_input")


# ---- binary
def _addsub(op):
    def prep(self, other, *, alpha=1):
        rdt = _promote(self, other)
        if alpha == 1 and not isinstance(alpha, bool):
            return op, [self, other], rdt, _cdt(rdt)
        return op + "_alpha", [self, other, alpha], rdt, _cdt(rdt)
    return prep


_pw(_variants("add", "Tensor"), _addsub("add"))
_pw(_variants("sub", "Tensor"), _addsub("sub"))
_pw(_variants("mul", "Tensor"), _binary("mul"))
_pw(_variants("div", "Tensor"), _binary("div", inputs_to_float=True))


def _prep_div_mode(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _binary("div", inputs_to_float=True)(self, other)
    rdt = _promote(self, other)
    return ("div_trunc" if rounding_mode == "trunc" else "div_floor"), [self, other], rdt, _cdt(rdt)


_pw(_variants("div", "Tensor_mode", out="out_mode"), _prep_div_mode)
for _n in ("maximum", "minimum"):
    _pw(_variants(_n, inplace=False), _binary(_n))
for _n in ("fmod", "remainder"):
    _pw(_variants(_n, "Tensor", out="Tensor_out"), _binary(_n))
_pw(_variants("atan2"), _binary("atan2", inputs_to_float=True))
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    _pw(_variants(_n, "Tensor", out="Tensor_out"), _binary(_n, result=torch.bool))
    _pw(_variants(_n, "Scalar", out="Scalar_out"), _binary(_n, result=torch.bool))
for _n in ("logical_and", "logical_or", "logical_xor"):
    _pw({"out": _n + ".out"}, _binary(_n, result=torch.bool))
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _pw(_variants(_n, "Tensor", out="Tensor_out"), _binary(_n))


def _prep_pow_tt(self, exponent):
    rdt = _promote(self, exponent)
    return "pow", [self, exponent], rdt, _cdt(rdt)


_POW_SPECIAL = {2: "square", 3: "cube", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", -2: "inv_square", 1: "copy"}


def _prep_pow_ts(self, exponent):
    rdt = _promote(self, exponent)
    if not _is_float(rdt) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if exponent == 0 and not isinstance(exponent, bool):
        return "fill_one", [self], rdt, _cdt(rdt)
    sp = _POW_SPECIAL.get(exponent)
    if sp and (_is_float(rdt) or exponent in (1, 2, 3)):
        return sp, [self], rdt, _cdt(rdt)
    return "pow", [self, exponent], rdt, _cdt(rdt)


def _prep_pow_s(self, exponent):
    rdt = _promote(self, exponent)
    return "pow", [self, exponent], rdt, _cdt(rdt)


_pw({"func": "pow.Tensor_Tensor", "inplace": "pow_.Tensor", "out": "pow.Tensor_Tensor_out"}, _prep_pow_tt)
_pw({"func": "pow.Tensor_Scalar", "inplace": "pow_.Scalar", "out": "pow.Tensor_Scalar_out"}, _prep_pow_ts)
_pw({"func": "pow.Scalar", "out": "pow.Scalar_out"}, _prep_pow_s)


# ---- ternary
def _prep_where(condition, self, other):
    rdt = _promote(self, other)
    return "where", [condition, self, other], rdt, _cdt(rdt)


_pw({"func": "where.self", "out": "where.self_out"}, _prep_where)


def _prep_masked_fill(self, mask, value):
    # in-place only (the functional masked_fill is CompositeExplicit: clone + masked_fill_)
    return "where", [mask, value, self], self.dtype, _cdt(self.dtype)


_pw({"inplace": "masked_fill_.Scalar"}, _prep_masked_fill)
_pw({"inplace": "masked_fill_.Tensor"}, _prep_masked_fill)


def _prep_clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    rdt = _promote(self, min, max)
    if min is None:
        return "clamp_max", [self, max], rdt, _cdt(rdt)
    if max is None:
        return "clamp_min", [self, min], rdt, _cdt(rdt)
    return "clamp", [self, min, max], rdt, _cdt(rdt)


_pw(_variants("clamp"), _prep_clamp)
_pw(_variants("clamp", "Tensor", out="Tensor_out"), _prep_clamp)


def _prep_clamp_min(self, min):
    rdt = _promote(self, min)
    return "clamp_min", [self, min], rdt, _cdt(rdt)


def _prep_clamp_max(self, max):
    rdt = _promote(self, max)
    return "clamp_max", [self, max], rdt, _cdt(rdt)


_pw(_variants("clamp_min"), _prep_clamp_min)
_pw(_variants("clamp_min", "Tensor", out="Tensor_out"), _prep_clamp_min)
_pw(_variants("clamp_max"), _prep_clamp_max)
_pw(_variants("clamp_max", "Tensor", out="Tensor_out"), _prep_clamp_max)


def _prep_lerp(self, end, weight):
    rdt = self.dtype
    return "lerp", [self, end, weight], rdt, _cdt(rdt)


_pw(_variants("lerp", "Scalar", out="Scalar_out"), _prep_lerp)
_pw(_variants("lerp", "Tensor", out="Tensor_out"), _prep_lerp)


def _addc(op):
    def prep(self, tensor1, tensor2, *, value=1):
        rdt = _promote(self, tensor1, tensor2)
        return op, [self, tensor1, tensor2, value], rdt, _cdt(rdt)
    return prep


_pw(_variants("addcmul"), _addc("addcmul"))
_pw(_variants("addcdiv"), _addc("addcdiv"))


# ------------------------------------------------------------- reductions --
def _norm_dims(dim, ndim):
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if not dim:
        return list(range(ndim))
    nd = max(ndim, 1)
    out = sorted({d % nd for d in dim})
    return [d for d in out if d < ndim] if ndim else []


def _reduce(x, dim, keepdim, rop, cdtype, odtype, out=None, p=0.0, corr=0.0):
    """Generic row reduction: reduced dims are permuted last and packed into a
    contiguous (M, K) buffer of the compute dtype, then reduce_kernel reduces rows."""
    ndim = x.dim()
    dims = _norm_dims(dim, ndim)
    kept = [d for d in range(ndim) if d not in dims]
    xp = x.permute(kept + dims) if ndim else x
    m = 1
    for d in kept:
        m *= x.shape[d]
    k = 1
    for d in dims:
        k *= x.shape[d]
    oshape = [1 if d in dims else x.shape[d] for d in range(ndim)] if keepdim else [x.shape[d] for d in kept]
    buf = _contig(xp, cdtype)
    res = _empty(oshape, odtype, x.device)
    if m > 0:
        bk = min(max(triton.next_power_of_2(max(k, 1)), 16), 256)
        bm = max(1, min(triton.next_power_of_2(m), 4096 // bk))
        K.reduce_kernel[(triton.cdiv(m, bm),)](buf, res, m, k, float(p), float(corr), OP=K.RED_ID[rop],
                                               CDT=_cdt(cdtype), ODT=_odt(odtype), BLOCK_M=bm, BLOCK_K=bk)
    if out is None:
        return res
    _resize_out(out, oshape)
    return copy_into(out, res)


def _sum_dt(x, dtype):
    if dtype is not None:
        return dtype
    return torch.int64 if not _is_float(x.dtype) else x.dtype


def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else _sum_dt(self, dtype)
    return _reduce(_cast_in(self, dtype), dim, keepdim, "sum", _cdt_torch(dtype or self.dtype), odt, out)


def _cast_in(x, dtype):
    return x if dtype is None or dtype == x.dtype else _contig(x, dtype)


def mean_dim(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else (dtype or self.dtype)
    if not _is_float(dtype or self.dtype):
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                           "or complex dtype.")
    return _reduce(_cast_in(self, dtype), dim, keepdim, "mean", _cdt_torch(dtype or self.dtype), odt, out)


def prod_dim_int(self, dim, keepdim=False, *, dtype=None, out=None):
    odt = out.dtype if out is not None else _sum_dt(self, dtype)
    return _reduce(_cast_in(self, dtype), [dim], keepdim, "prod", _cdt_torch(dtype or self.dtype), odt, out)


def prod_full(self, *, dtype=None):
    return _reduce(_cast_in(self, dtype), None, False, "prod", _cdt_torch(dtype or self.dtype),
                   _sum_dt(self, dtype), None)


def _amaxmin(rop):
    def fn(self, dim=(), keepdim=False, *, out=None):
        return _reduce(self, dim, keepdim, rop, _cdt_torch(self.dtype), out.dtype if out is not None else self.dtype, out)
    return fn


def _argmaxmin(rop):
    def fn(self, dim=None, keepdim=False, *, out=None):
        if dim is None:
            x = self.reshape(-1) if self.is_contiguous() else _contig(self).view(-1)
            r = _reduce(x, [0], False, rop, _cdt_torch(self.dtype), torch.int64)
            if keepdim:
                r = r.view([1] * self.dim())
            if out is None:
                return r
            _resize_out(out, r.shape)
            return copy_into(out, r)
        return _reduce(self, [dim], keepdim, rop, _cdt_torch(self.dtype), torch.int64, out)
    return fn


def _var_std(is_std):
    def fn(self, dim=None, *, correction=None, keepdim=False, out=None):
        corr = 1.0 if correction is None else float(correction)
        rdt = _float_of(self.dtype)
        return _reduce(self, dim, keepdim, "var", _cdt_torch(rdt), out.dtype if out is not None else rdt, out,
                       p=1.0 if is_std else 0.0, corr=corr)
    return fn


def _allany(rop, full):
    if full:
        def fn(self, *, out=None):
            odt = out.dtype if out is not None else (torch.uint8 if self.dtype == torch.uint8 else torch.bool)
            return _reduce(_contig(self, torch.bool), None, False, rop, torch.int64, odt, out)
    else:
        def fn(self, dim, keepdim=False, *, out=None):
            odt = out.dtype if out is not None else (torch.uint8 if self.dtype == torch.uint8 else torch.bool)
            return _reduce(_contig(self, torch.bool), [dim], keepdim, rop, torch.int64, odt, out)
    return fn


def _vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    ordf = float(ord)
    rop, p = {2.0: "norm2", 1.0: "norm1", 0.0: "norm0", math.inf: "amax_abs", -math.inf: "amin_abs"}.get(
        ordf, "normp"), ordf
    x = _cast_in(self, dtype)
    rdt = dtype or _float_of(self.dtype)
    return _reduce(x, dim, keepdim, rop, _cdt_torch(rdt), out.dtype if out is not None else rdt, out, p=p)


def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _vector_norm(self, ord, dim, keepdim, dtype=dtype)


def linalg_vector_norm_out(self, ord=2, dim=None, keepdim=False, *, dtype=None, out):
    return _vector_norm(self, ord, dim, keepdim, dtype=dtype, out=out)


def norm_ScalarOpt_dim(self, p, dim, keepdim=False):
    return _vector_norm(self, 2 if p is None else p, dim, keepdim)


def norm_out(self, p, dim, keepdim=False, *, out):
    return _vector_norm(self, 2 if p is None else p, dim, keepdim, out=out)


# ---------------------------------------------------------------- softmax --
def _rows_last(x, dim):
    """(contiguous (M, K) compute buffer, moved shape) with `dim` moved last."""
    nd = max(x.dim(), 1)
    dim = dim % nd
    xv = x.view(1) if x.dim() == 0 else x
    xm = xv.movedim(dim, -1)
    return xm, dim


def _softmax_impl(self, dim, half_to_float, log, out=None):
    odt = torch.float32 if (half_to_float and self.dtype in (torch.float16, torch.bfloat16)) else self.dtype
    xm, d = _rows_last(self, dim)
    kk = xm.shape[-1]
    m = xm.numel() // max(kk, 1)
    buf = _contig(xm, _cdt_torch(self.dtype))
    res = _empty(xm.shape, odt, self.device)
    if m > 0 and kk > 0:
        bk = min(max(triton.next_power_of_2(kk), 16), 1024)
        K.softmax_kernel[(m,)](buf, res, m, kk, LOG=log, ODT=_odt(odt), BLOCK_K=bk)
    res = res.movedim(-1, d)
    if self.dim() == 0:
        res = res.view(())
    if out is None:
        out = _empty(self.shape, odt, self.device)
    else:
        _resize_out(out, self.shape)
    return copy_into(out, res)


def _softmax_bwd_impl(grad_output, output, dim, input_dtype, log, out=None):
    gm, d = _rows_last(grad_output, dim)
    ym, _ = _rows_last(output, dim)
    kk = gm.shape[-1]
    m = gm.numel() // max(kk, 1)
    cd = _cdt_torch(grad_output.dtype)
    gb, yb = _contig(gm, cd), _contig(ym, cd)
    res = _empty(gm.shape, input_dtype, grad_output.device)
    if m > 0 and kk > 0:
        bk = min(max(triton.next_power_of_2(kk), 16), 1024)
        K.softmax_bwd_kernel[(m,)](gb, yb, res, m, kk, LOG=log, ODT=_odt(input_dtype), BLOCK_K=bk)
    res = res.movedim(-1, d)
    if grad_output.dim() == 0:
        res = res.view(())
    if out is None:
        out = _empty(grad_output.shape, input_dtype, grad_output.device)
    else:
        _resize_out(out, grad_output.shape)
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
    cd = _cdt_torch(input.dtype)
    xb = _contig(input, cd)
    out = _empty(input.shape, input.dtype, input.device)
    sshape = lead + [1] * nk
    mean = _empty(sshape, input.dtype, input.device)
    rstd = _empty(sshape, input.dtype, input.device)
    wb = _contig(weight, cd) if weight is not None else xb
    bb = _contig(bias, cd) if bias is not None else xb
    if m > 0 and kk > 0:
        bk = min(max(triton.next_power_of_2(kk), 16), 1024)
        K.layer_norm_kernel[(m,)](xb, wb, bb, out, mean, rstd, m, kk, float(eps), HAS_W=weight is not None,
                                  HAS_B=bias is not None, ODT=_odt(input.dtype), SDT=_odt(input.dtype),
                                  BLOCK_K=bk)
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
    cd = _cdt_torch(input.dtype)
    dev = input.device
    xb = _contig(input, cd).view(m, kk)
    gb = _contig(grad_out, cd).view(m, kk)
    mb = _contig(mean, cd).view(m, 1)
    rb = _contig(rstd, cd).view(m, 1)
    dx = dw = db = None
    if output_mask[0]:
        dx = _empty(input.shape, input.dtype, dev)
        wb = _contig(weight, cd) if weight is not None else xb
        if m > 0 and kk > 0:
            bk = min(max(triton.next_power_of_2(kk), 16), 1024)
            K.layer_norm_bwd_kernel[(m,)](gb, xb, mb, rb, wb, dx, m, kk, HAS_W=weight is not None,
                                          ODT=_odt(input.dtype), BLOCK_K=bk)
    if output_mask[1] and weight is not None:
        xmu = launch_pointwise("sub", _empty((m, kk), cd, dev), [xb, mb], _cdt(cd))
        gx = launch_pointwise("mul_scale", _empty((m, kk), cd, dev), [gb, xmu, rb], _cdt(cd))
        dw = _reduce(gx, [0], False, "sum", cd, weight.dtype).view(weight.shape)
    if output_mask[2] and bias is not None:
        db = _reduce(gb, [0], False, "sum", cd, bias.dtype).view(bias.shape)
    return dx, dw, db


# ----------------------------------------------------------------- matmul --
def _bmm_launch(a, b, c, bias=None, alpha=1.0, beta=1.0):
    """c (B, M, N) = beta*bias + alpha * a (B, M, K) @ b (B, K, N); all strided."""
    if a.dtype not in _FLOATS:
        raise Unsupported("integer matmul (tl.dot takes floating-point operands)")
    bt, m, kk = a.shape
    n = b.shape[2]
    if c.numel() == 0:
        return c
    if kk == 0 and bias is None:
        return fill_into(c, 0)
    bm = min(max(triton.next_power_of_2(m), 16), 64)
    bn = min(max(triton.next_power_of_2(n), 16), 64)
    bk = min(max(triton.next_power_of_2(kk), 16), 64)
    has_bias = bias is not None and beta != 0
    bi = bias.expand(c.shape) if has_bias else c
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn), bt)
    K.bmm_kernel[grid](a, b, c, bi, m, n, kk, *a.stride(), *b.stride(), *c.stride(), *bi.stride(),
                       float(alpha), float(beta), HAS_BIAS=has_bias, CDT=_cdt(a.dtype), ODT=_odt(c.dtype),
                       BM=bm, BN=bn, BK=bk)
    return c


def _check_mm(a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")


def mm(self, mat2, *, out=None):
    _check_mm(self, mat2)
    shape = (self.shape[0], mat2.shape[1])
    out = _empty(shape, self.dtype, self.device) if out is None else _resize_out(out, shape)
    _bmm_launch(self.unsqueeze(0), mat2.unsqueeze(0), out.unsqueeze(0))
    return out


def mm_out(self, mat2, *, out):
    return mm(self, mat2, out=out)


def bmm(self, mat2, *, out=None):
    _check_mm(self, mat2)
    shape = (self.shape[0], self.shape[1], mat2.shape[2])
    out = _empty(shape, self.dtype, self.device) if out is None else _resize_out(out, shape)
    return _bmm_launch(self, mat2, out)


def bmm_out(self, mat2, *, out):
    return bmm(self, mat2, out=out)


def _addmm_impl(self, mat1, mat2, beta, alpha, out):
    _check_mm(mat1, mat2)
    shape = (mat1.shape[0], mat2.shape[1])
    bias = _operand(self, mat1.device)
    if out is None:
        out = _empty(shape, mat1.dtype, mat1.device)
    elif out is self:
        bias = copy_into(_empty(shape, self.dtype, self.device), self)
    else:
        _resize_out(out, shape)
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
    bias = _operand(self, batch1.device)
    if out is None:
        out = _empty(shape, batch1.dtype, batch1.device)
    elif out is self:
        bias = copy_into(_empty(shape, self.dtype, self.device), self)
    else:
        _resize_out(out, shape)
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
    if nd > _MAXD:
        raise Unsupported("more than 6 dims")
    padn = _MAXD - nd
    sh = [1] * padn + list(it_shape)
    sts = [[0] * padn + list(st) for st in (src_st, idx_st, out_st)]
    K.index_kernel[_grid1(n)](src, idx, out, n, *sh, *sts[0], *sts[1], *sts[2], size_dim,
                              -1 if pad is None else pad, DIM=dim + padn, SCATTER=scatter,
                              HAS_PAD=pad is not None, ODT=_odt(out.dtype), BLOCK=_BLOCK)
    return out


def _atleast1d(t):
    return t.view(1) if t.dim() == 0 else t


def gather(self, dim, index, *, sparse_grad=False, out=None):
    x = _atleast1d(self)
    ix = _atleast1d(index)
    dim = dim % x.dim()
    oshape = index.shape
    if out is None:
        out = _empty(oshape, self.dtype, self.device)
    else:
        _resize_out(out, oshape)
    o = _atleast1d(out)
    _index_launch(x, ix, o, ix.shape, x.stride(), ix.stride(), o.stride(), dim, x.shape[dim], False)
    return out


def gather_out(self, dim, index, *, sparse_grad=False, out):
    return gather(self, dim, index, out=out)


def index_select(self, dim, index, *, out=None):
    x = _atleast1d(self)
    ix = _atleast1d(index)
    dim = dim % x.dim()
    oshape = list(x.shape)
    oshape[dim] = ix.numel()
    if self.dim() == 0:
        oshape = [] if index.dim() == 0 else [ix.numel()]
    if out is None:
        out = _empty(oshape, self.dtype, self.device)
    else:
        _resize_out(out, oshape)
    o = out.view([ix.numel()]) if self.dim() == 0 else out
    it = list(x.shape)
    it[dim] = ix.numel()
    ist = [0] * x.dim()
    ist[dim] = ix.stride(0)
    _index_launch(x, ix, o, it, x.stride(), ist, o.stride(), dim, x.shape[dim], False)
    return out


def index_select_out(self, dim, index, *, out):
    return index_select(self, dim, index, out=out)


def _acc_dtype(dt):
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


def _scatter_add_impl(self, dim, index, src, out):
    x = _atleast1d(self)
    dim = dim % x.dim()
    acc_dt = _acc_dtype(self.dtype)
    acc = copy_into(_empty(x.shape, acc_dt, self.device), x)
    ix = _atleast1d(index)
    s = _atleast1d(src)
    _index_launch(s, ix, acc, ix.shape, s.stride(), ix.stride(), acc.stride(), dim, x.shape[dim], True)
    if out is None:
        out = _empty(self.shape, self.dtype, self.device)
    else:
        _resize_out(out, self.shape)
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
    acc_dt = _acc_dtype(grad_output.dtype)
    g = _contig(grad_output, acc_dt).view(n, d)
    ix = _contig(indices).view(n)
    acc = fill_into(_empty((num_weights, d), acc_dt, dev), 0)
    pad = padding_idx if padding_idx >= 0 else None
    _index_launch(g, ix, acc, (n, d), g.stride(), (ix.stride(0), 0), acc.stride(), 0, num_weights, True, pad)
    if scale_grad_by_freq:
        cnt = fill_into(_empty((num_weights,), acc_dt, dev), 0)
        ones = fill_into(_empty((n,), acc_dt, dev), 1)
        _index_launch(ones, ix, cnt, (n,), ones.stride(), ix.stride(), cnt.stride(), 0, num_weights, True, pad)
        cnt = launch_pointwise("clamp_min", _empty((num_weights, 1), acc_dt, dev), [cnt.view(num_weights, 1), 1],
                               _cdt(acc_dt))
        acc = launch_pointwise("div", _empty((num_weights, d), acc_dt, dev), [acc, cnt], _cdt(acc_dt))
    if acc_dt == grad_output.dtype:
        return acc
    return copy_into(_empty((num_weights, d), grad_output.dtype, dev), acc)


# ------------------------------------------------------------- cat / fill ---
def _cat_impl(tensors, dim, out):
    ts = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]  # legacy empty tensors are skipped
    if not ts:
        r = out if out is not None else _empty((0,), tensors[0].dtype, tensors[0].device)
        return r
    ref = ts[0]
    dim = dim % ref.dim()
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    shape = list(ref.shape)
    shape[dim] = sum(t.shape[dim] for t in ts)
    if out is None:
        out = _empty(shape, dtype, ref.device)
    else:
        _resize_out(out, shape)
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


# ----------------------------------------------------------------- table ----
_SPECIAL: dict[str, Callable] = {
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
}


def all_ops() -> list[str]:
    """Every op with an implementation: the core's and each family's `KERNELS`."""
    import importlib

    from . import FAMILIES

    ops = list(_POINTWISE) + list(_SPECIAL)
    for family in FAMILIES:
        ops += list(importlib.import_module(f"._{family}", __package__).KERNELS)
    return ops


def _signature(op_name):
    """inspect.Signature of the aten schema (documentation / introspection only)."""
    import inspect
    base, _, ov = op_name.partition(".")
    try:
        schema = getattr(getattr(torch.ops.aten, base), ov or "default")._schema
    except Exception:  # noqa: BLE001
        return None
    params = []
    for a in schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if not a.has_default_value() else a.default_value
        params.append(inspect.Parameter(a.name, kind, default=default))
    try:
        return inspect.Signature(params)
    except ValueError:
        return None


def make_kernel(op_name: str) -> Callable:
    """The core library's kernel for `op_name` (families: see the package docstring)."""
    if op_name in _POINTWISE:
        fn = _make_pointwise(op_name)
    elif op_name in _SPECIAL:
        fn = _SPECIAL[op_name]
    else:
        raise KeyError(op_name)
    return wrap_kernel(op_name, fn)


def wrap_kernel(op_name: str, fn: Callable) -> Callable:
    """`fn` named after the op and carrying the aten schema's signature."""
    def kernel(*args, **kwargs):
        return fn(*args, **kwargs)

    kernel.__name__ = "triton_" + op_name.replace(".", "_")
    kernel.__qualname__ = kernel.__name__
    sig = _signature(op_name)
    if sig is not None:
        kernel.__signature__ = sig
    return kernel
