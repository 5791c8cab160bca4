"""Triton fallback kernels for generated PrivateUse1 backends.

`SUPPORTED_OPS` lists aten op names (with overload, as in native_functions.yaml);
`kernel_for(name)` returns a Python function with that op's schema signature,
ready for ``torch.library.Library("aten", "IMPL").impl(name, fn, "PrivateUse1")``.
Every numeric result is computed by a Triton kernel: compiled on a GPU, or run by
Triton's interpreter (``TRITON_INTERPRET=1``, set before triton is imported).

Importing this package never imports triton; `available()` says whether the
kernels can run here. See README.md for the mechanism and the interpreter's limits.

The library is split into families: the core (`_impl.py`: pointwise, reductions,
softmax, norms, matmul, basic indexing) and one module pair per further family,
`_<family>_ops.py` (its op names, no imports, so this list stays triton-free) and
`_<family>.py` (its kernels; a `KERNELS` dict op name -> function).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Callable

__all__ = ["COMPILED_ONLY", "SUPPORTED_OPS", "Unsupported", "available", "copy_into", "fill_into", "kernel_for"]

# Families beside the core, in the order their ops are listed.
FAMILIES: tuple[str, ...] = ("index", "linalg", "nn", "fft", "foreach", "rnn", "special", "select", "complex")


class Unsupported(NotImplementedError):
    """Raised by a kernel, before it writes anything, for inputs it does not handle
    (a layout, size or dtype outside its design). The op then takes the next step of
    its chain (the CPU where the spec allows it), exactly as if Triton lacked it."""


_CORE_OPS: tuple[str, ...] = (
    "exp", "exp_", "exp.out", "exp2", "exp2_", "exp2.out", "expm1", "expm1_", "expm1.out", "log",
    "log_", "log.out", "log2", "log2_", "log2.out", "log10", "log10_", "log10.out", "log1p",
    "log1p_", "log1p.out", "sqrt", "sqrt_", "sqrt.out", "rsqrt", "rsqrt_", "rsqrt.out", "sin",
    "sin_", "sin.out", "cos", "cos_", "cos.out", "tan", "tan_", "tan.out", "tanh", "tanh_",
    "tanh.out", "sigmoid", "sigmoid_", "sigmoid.out", "erf", "erf_", "erf.out", "reciprocal",
    "reciprocal_", "reciprocal.out", "floor", "floor_", "floor.out", "ceil", "ceil_", "ceil.out",
    "round", "round_", "round.out", "trunc", "trunc_", "trunc.out", "neg", "neg_", "neg.out",
    "sign", "sign_", "sign.out", "abs.out", "relu", "relu_", "bitwise_not", "bitwise_not_",
    "bitwise_not.out", "logical_not.out", "gelu", "gelu_", "gelu.out", "silu", "silu_", "silu.out",
    "gelu_backward", "gelu_backward.grad_input", "silu_backward.grad_input", "sigmoid_backward",
    "sigmoid_backward.grad_input", "tanh_backward", "tanh_backward.grad_input",
    "threshold_backward", "threshold_backward.grad_input", "add.Tensor", "add_.Tensor", "add.out",
    "sub.Tensor", "sub_.Tensor", "sub.out", "mul.Tensor", "mul_.Tensor", "mul.out", "div.Tensor",
    "div_.Tensor", "div.out", "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode", "maximum",
    "maximum.out", "minimum", "minimum.out", "fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out",
    "remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out", "atan2", "atan2_", "atan2.out",
    "eq.Tensor", "eq_.Tensor", "eq.Tensor_out", "eq.Scalar", "eq_.Scalar", "eq.Scalar_out",
    "ne.Tensor", "ne_.Tensor", "ne.Tensor_out", "ne.Scalar", "ne_.Scalar", "ne.Scalar_out",
    "lt.Tensor", "lt_.Tensor", "lt.Tensor_out", "lt.Scalar", "lt_.Scalar", "lt.Scalar_out",
    "le.Tensor", "le_.Tensor", "le.Tensor_out", "le.Scalar", "le_.Scalar", "le.Scalar_out",
    "gt.Tensor", "gt_.Tensor", "gt.Tensor_out", "gt.Scalar", "gt_.Scalar", "gt.Scalar_out",
    "ge.Tensor", "ge_.Tensor", "ge.Tensor_out", "ge.Scalar", "ge_.Scalar", "ge.Scalar_out",
    "logical_and.out", "logical_or.out", "logical_xor.out", "bitwise_and.Tensor",
    "bitwise_and_.Tensor", "bitwise_and.Tensor_out", "bitwise_or.Tensor", "bitwise_or_.Tensor",
    "bitwise_or.Tensor_out", "bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out",
    "pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out", "pow.Tensor_Scalar", "pow_.Scalar",
    "pow.Tensor_Scalar_out", "pow.Scalar", "pow.Scalar_out", "where.self", "where.self_out",
    "masked_fill_.Scalar", "masked_fill_.Tensor", "clamp", "clamp_", "clamp.out", "clamp.Tensor",
    "clamp_.Tensor", "clamp.Tensor_out", "clamp_min", "clamp_min_", "clamp_min.out",
    "clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out", "clamp_max", "clamp_max_",
    "clamp_max.out", "clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out", "lerp.Scalar",
    "lerp_.Scalar", "lerp.Scalar_out", "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out", "addcmul",
    "addcmul_", "addcmul.out", "addcdiv", "addcdiv_", "addcdiv.out", "sum.dim_IntList",
    "sum.IntList_out", "mean.dim", "mean.out", "prod.dim_int", "prod.int_out", "prod", "amax",
    "amax.out", "amin", "amin.out", "argmax", "argmax.out", "argmin", "argmin.out",
    "var.correction", "var.correction_out", "std.correction", "std.correction_out", "all",
    "all.all_out", "all.dim", "all.out", "any", "any.all_out", "any.dim", "any.out",
    "linalg_vector_norm", "linalg_vector_norm.out", "norm.ScalarOpt_dim", "norm.out", "_softmax",
    "_softmax.out", "_log_softmax", "_log_softmax.out", "_softmax_backward_data",
    "_softmax_backward_data.out", "_log_softmax_backward_data", "_log_softmax_backward_data.out",
    "native_layer_norm", "native_layer_norm_backward", "mm", "mm.out", "bmm", "bmm.out", "addmm",
    "addmm_", "addmm.out", "baddbmm", "baddbmm_", "baddbmm.out", "index_select", "index_select.out",
    "gather", "gather.out", "scatter_add", "scatter_add_", "scatter_add.out",
    "embedding_dense_backward", "cat", "cat.out", "fill_.Scalar", "fill_.Tensor", "zero_",
    # special functions, activations, more binaries, reductions, matmuls, creation
    "acos", "acos_", "acos.out", "asin", "asin_", "asin.out", "atan", "atan_", "atan.out",
    "asinh", "asinh_", "asinh.out", "acosh", "acosh_", "acosh.out", "atanh", "atanh_",
    "atanh.out", "sinh", "sinh_", "sinh.out", "cosh", "cosh_", "cosh.out", "erfc", "erfc_",
    "erfc.out", "erfinv", "erfinv_", "erfinv.out", "lgamma", "lgamma_", "lgamma.out", "digamma",
    "digamma_", "digamma.out", "special_erfcx", "special_erfcx.out", "special_log_ndtr",
    "special_log_ndtr.out", "special_ndtri", "special_ndtri.out", "special_entr",
    "special_entr.out", "sinc", "sinc_", "sinc.out", "polygamma", "polygamma.out", "frac",
    "frac_", "frac.out", "sgn", "sgn_", "sgn.out", "angle", "angle.out", "isnan", "isposinf",
    "isposinf.out", "isneginf", "isneginf.out", "signbit", "signbit.out", "nan_to_num.out",
    "round.decimals", "round_.decimals", "round.decimals_out", "elu", "elu_", "elu.out",
    "elu_backward", "elu_backward.grad_input", "softplus", "softplus.out", "mish", "mish_",
    "mish.out", "threshold", "threshold_", "threshold.out", "leaky_relu", "leaky_relu_",
    "leaky_relu.out", "hardsigmoid", "hardsigmoid_", "hardsigmoid.out", "hardswish",
    "hardswish_", "hardswish.out", "softshrink", "softshrink.out", "hardshrink",
    "hardshrink.out", "hardtanh", "hardtanh_", "hardtanh.out", "logit", "logit_", "logit.out",
    "hardtanh_backward", "hardtanh_backward.grad_input", "softplus_backward",
    "softplus_backward.grad_input", "leaky_relu_backward", "leaky_relu_backward.grad_input",
    "hardsigmoid_backward", "hardsigmoid_backward.grad_input", "hardswish_backward",
    "softshrink_backward", "softshrink_backward.grad_input", "hardshrink_backward",
    "hardshrink_backward.grad_input", "log_sigmoid_backward", "log_sigmoid_backward.grad_input",
    "logit_backward", "logit_backward.grad_input", "native_dropout_backward", "logaddexp",
    "logaddexp.out", "logaddexp2", "logaddexp2.out", "hypot", "hypot_", "hypot.out",
    "copysign.Tensor", "copysign_.Tensor", "copysign.out", "xlogy.Tensor", "xlogy_.Tensor",
    "xlogy.OutTensor", "special_xlog1py", "special_xlog1py.out", "special_zeta",
    "special_zeta.out", "fmax", "fmax.out", "fmin", "fmin.out", "heaviside", "heaviside_",
    "heaviside.out", "gcd", "gcd_", "gcd.out", "lcm", "lcm_", "lcm.out", "floor_divide",
    "floor_divide.out", "floor_divide_.Tensor", "nextafter", "nextafter_", "nextafter.out",
    "bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor", "bitwise_left_shift.Tensor_out",
    "bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor",
    "bitwise_right_shift.Tensor_out", "rsub.Tensor", "max", "max.unary_out", "min",
    "min.unary_out", "aminmax", "aminmax.out", "var_mean.correction", "std_mean.correction",
    "nansum", "nansum.out", "trace", "equal", "dot", "vdot", "addmv", "addmv_", "addmv.out",
    "addbmm", "addbmm_", "addbmm.out", "log_sigmoid_forward", "log_sigmoid_forward.output",
    "arange.start_out",
    "linspace.out", "logspace.out", "tril", "tril.out", "tril_", "triu", "triu.out", "triu_",
    "eye.m_out", "eye.out",
)


def _family_ops(family: str) -> tuple[str, ...]:
    return tuple(importlib.import_module(f"._{family}_ops", __name__).OPS)


_FAMILY_OF: dict[str, str] = {op: family for family in FAMILIES for op in _family_ops(family)}
SUPPORTED_OPS: tuple[str, ...] = _CORE_OPS + tuple(op for family in FAMILIES for op in _family_ops(family))
# Ops routed to Triton only where it compiles: a foreach kernel pays off as one launch per list,
# while under the interpreter the per-tensor ops that torch's own decomposition calls are
# faster (a chip's vendor kernels among them).
COMPILED_ONLY: frozenset[str] = frozenset(_family_ops("foreach"))


def available() -> bool:
    """True when triton is importable and kernels can run: a GPU driver or TRITON_INTERPRET=1."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        from ._launch import serialize_interpreter

        serialize_interpreter()  # kernels run from several threads (one per device, autograd's)
        return True
    try:
        import torch

        return bool(torch.cuda.is_available()) or bool(getattr(torch, "xpu", None) and torch.xpu.is_available())
    except Exception:  # noqa: BLE001
        return False


def kernel_for(op_name: str) -> Callable:
    """The Triton-backed implementation of aten `op_name` (an entry of SUPPORTED_OPS)."""
    if op_name not in _SUPPORTED_SET:
        raise KeyError(f"torch_fl.triton_ops has no kernel for aten::{op_name}")
    from . import _impl

    family = _FAMILY_OF.get(op_name)
    if family is None:
        return _impl.make_kernel(op_name)
    module = importlib.import_module(f"._{family}", __name__)
    return _impl.wrap_kernel(op_name, module.KERNELS[op_name])


def copy_into(dst, src):
    """Strided -> strided copy with dtype conversion (src broadcast to dst); returns dst."""
    from . import _impl

    return _impl.copy_into(dst, src)


def fill_into(dst, value):
    """Fill a strided tensor with a Python scalar (exact for float64/int64); returns dst."""
    from . import _impl

    return _impl.fill_into(dst, value)


_SUPPORTED_SET = frozenset(SUPPORTED_OPS)
