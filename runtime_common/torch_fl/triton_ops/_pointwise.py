"""The `pointwise` family's kernels: elementwise unary, binary, ternary and quaternary ops
(math, comparisons, logical and bitwise ops, special functions, activations and their
backwards), all through one Triton kernel specialised on an op id (`_common.launch_pointwise`).

Each op is a *preparation* (`prep`: the op's arguments -> (kernel op, operands, result
dtype, compute dtype code[, scalar parameters]): type promotion and op choice, ATen's
rules) used by its functional, in-place and out= variants; `POINTWISE` lists them by op
name (torch_fl._triton_fast replays their launches from C++, `_foreach` runs their
preparations per tensor of a list).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from . import Unsupported
from ._common import (DTYPE_CODES, FILLS, compute_code, device_of, empty, empty_result, fill_into, float_of, is_float,
                      launch_pointwise, promote, resize_out, shape_of)


def _pw_run(prep, args, kwargs, mode, out=None):
    op, operands, rdt, cdt, *params = prep(*args, **kwargs)
    shape = shape_of(operands)
    if mode == "func":
        dev = device_of(*operands)
        out = empty_result(shape, rdt, dev, operands)
        if op in FILLS:
            return fill_into(out, FILLS[op])
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


def _binary(op, result=None, inputs_to_float=False, floats_in_float64=False):
    def prep(self, other):
        rdt = promote(self, other)
        if inputs_to_float:
            rdt = float_of(rdt)
        cdt = _F64 if floats_in_float64 and is_float(rdt) else compute_code(rdt)
        return op, [self, other], (result or rdt), cdt
    return prep


def _prep_threshold_bwd(grad_output, self, threshold):
    rdt = promote(grad_output, self)
    return "threshold_backward", [grad_output, self, threshold], rdt, compute_code(rdt)


# ---- binary
def _is_bool(value) -> bool:
    return value.dtype == torch.bool if isinstance(value, torch.Tensor) else isinstance(value, bool)


def _sub_check(self, other) -> None:
    """torch's sub_check, which runs in aten's shared meta function, not in the kernels: a backend
    with its own sub kernel must refuse bool operands itself, with torch's words."""
    if _is_bool(self) and _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(self) or _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _addsub(op):
    def prep(self, other, *, alpha=1):
        if op == "sub":
            _sub_check(self, other)
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
    _sub_check(self, other)
    rdt = promote(self, other)
    return "sub_alpha", [other, self, alpha], rdt, compute_code(rdt)


# -------------------------------------------------- activations with views --
def log_sigmoid_forward(self, *, output=None, buffer=None):
    res = empty(self.shape, self.dtype, self.device) if output is None else resize_out(output, self.shape)
    launch_pointwise("log_sigmoid", res, [self], compute_code(self.dtype))
    # the buffer holds CPU-kernel intermediates; like CUDA we keep it empty (backward recomputes)
    buf = empty((0,), self.dtype, self.device) if buffer is None else resize_out(buffer, (0,))
    return res, buf


# ------------------------------------------------------------------- table ----
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
    # fmod and remainder are exact on the CPU and CUDA (the remainder is representable): floats
    # narrower than float64 compute in float64, where the quotient's product with the divisor is
    # exact for quotients below 2**29 (in float32 it rounded: fmod(3.6116, 1.0101) was 1 ulp off).
    for n in ("fmod", "remainder"):
        add(_variants(n, "Tensor", out="Tensor_out"), _binary(n, floats_in_float64=True))
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
    "log_sigmoid_forward": log_sigmoid_forward,
    "log_sigmoid_forward.output": log_sigmoid_forward,
}
