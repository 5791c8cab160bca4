"""The fused optimizers: `torch.optim.Adam/AdamW/SGD(..., fused=True)` reach
`aten::_fused_adam_`, `_fused_adamw_` and `_fused_sgd_` (and their `tensor_lr` overloads),
which torch implements for CPU and CUDA only: on a chip the step would copy every parameter,
gradient and state to the host and back. Here a call updates every tensor of its lists in
place with the arithmetic of torch's CUDA kernels (aten/src/ATen/native/cuda/fused_adam_utils.cuh,
FusedSgdKernel.cu): float32 for half types, gradients unscaled by `grad_scale` and written
back when it is given, nothing written when `found_inf` is 1.

A call is one launch over a table, as the foreach family's (a row per chunk of a tensor:
parameter, gradient, two state tensors, the step, the element range, and AMSGrad's running
maximum), so the C++ front replays it (csrc/src/triton_foreach_launch.cpp) when it takes no
tensor besides its lists. Like the foreach family, routed only where Triton compiles
(COMPILED_ONLY): under the interpreter the table's raw addresses would not reach a chip's
memory, and a launch per tensor there (~10 ms each) is slower than the host's step; the tests
run the table kernel on CPU tensors under the interpreter.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import family_ops
from ._common import CAPTURE, TableLaunch, compute_code, dtype_code, scalar_bits
from ._foreach import _CHUNK, _as_pointer, _table_serves, cached_table
from ._kernels import _to_cdt, _to_odt

OPS = family_ops("optim")

_BLOCK = 1024
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


@triton.jit
def _f64(bits):
    """A double passed as its bit pattern (an int64 parameter, so Triton neither narrows it to
    float32 nor specialises it)."""
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def _row(table):
    """This program's table row and its element range."""
    row = table + tl.program_id(0).to(tl.int64) * 8
    return row, tl.load(row + 5), tl.load(row + 6)


@triton.jit
def _skipped(end, start, found_inf, HAS_INF: tl.constexpr):
    """The range's end, or its start (nothing to do) when found_inf holds 1 (GradScaler found
    an inf or a nan: the step is skipped, as CUDA's kernel returns at once)."""
    if HAS_INF:
        end = tl.where(tl.load(found_inf) == 1, start, end)
    return end


@triton.jit
def _param_and_grad(p, g, i, mask, scale_ptr, DT: tl.constexpr, CDT: tl.constexpr, HAS_SCALE: tl.constexpr,
                    MAXIMIZE: tl.constexpr):
    """A block's parameters and gradients in the compute type: the gradients unscaled (and
    stored back so, as CUDA's kernels do) when GradScaler passed its scale, negated to maximize."""
    param = _to_cdt(tl.load(p + i, mask=mask), CDT)
    grad = _to_cdt(tl.load(g + i, mask=mask), CDT)
    if HAS_SCALE:
        grad = grad / _to_cdt(tl.load(scale_ptr), CDT)
        tl.store(g + i, _to_odt(grad, DT), mask=mask)
    if MAXIMIZE:
        grad = -grad
    return param, grad


@triton.jit(do_not_specialize=["LR", "BETA1", "BETA2", "WD", "EPS"])
def fused_adam_kernel(table, lr_ptr, scale_ptr, inf_ptr, LR, BETA1, BETA2, WD, EPS, DT: tl.constexpr,
                      CDT: tl.constexpr, ADAMW: tl.constexpr, DECAY: tl.constexpr, AMSGRAD: tl.constexpr,
                      MAXIMIZE: tl.constexpr, LR_TENSOR: tl.constexpr, HAS_SCALE: tl.constexpr,
                      HAS_INF: tl.constexpr, BLOCK: tl.constexpr):
    """Adam (ADAMW=False: weight decay added to the gradient) or AdamW (decoupled decay) on one
    table row: parameter, gradient, exp_avg, exp_avg_sq, the step (float32), start, end, and
    AMSGrad's running maximum."""
    row, start, end = _row(table)
    p = _as_pointer(tl.load(row), DT)
    g = _as_pointer(tl.load(row + 1), DT)
    m = _as_pointer(tl.load(row + 2), DT)
    v = _as_pointer(tl.load(row + 3), DT)
    step_at = tl.load(row + 4).to(tl.pointer_type(tl.float32))
    vmax = _as_pointer(tl.load(row + 7), DT)
    end = _skipped(end, start, inf_ptr, HAS_INF)
    # The step's coefficients in float64 (one per program), as CUDA computes them in double:
    # 1 - beta2 ** step cancels badly in float32 (beta2 = 0.999 at step 3 loses 5 digits).
    if LR_TENSOR:
        lr64 = tl.load(lr_ptr).to(tl.float64)
    else:
        lr64 = _f64(LR)
    beta1_64 = _f64(BETA1)
    beta2_64 = _f64(BETA2)
    step64 = tl.load(step_at).to(tl.float64)
    bias_correction1 = 1 - tl.exp(step64 * tl.log(beta1_64))
    step_size = _to_cdt(lr64 / bias_correction1, CDT)
    bias_correction2_sqrt = _to_cdt(tl.sqrt(1 - tl.exp(step64 * tl.log(beta2_64))), CDT)
    beta1 = _to_cdt(beta1_64, CDT)
    beta2 = _to_cdt(beta2_64, CDT)
    rest1 = _to_cdt(1 - beta1_64, CDT)
    rest2 = _to_cdt(1 - beta2_64, CDT)
    wd = _to_cdt(_f64(WD), CDT)
    lr_wd = _to_cdt(lr64 * _f64(WD), CDT)
    eps = _to_cdt(_f64(EPS), CDT)
    for offset in range(start, end, BLOCK):
        i = offset + tl.arange(0, BLOCK)
        mask = i < end
        param, grad = _param_and_grad(p, g, i, mask, scale_ptr, DT, CDT, HAS_SCALE, MAXIMIZE)
        if DECAY:
            if ADAMW:
                param = param - lr_wd * param
            else:
                grad = grad + param * wd
        exp_avg = beta1 * _to_cdt(tl.load(m + i, mask=mask), CDT) + rest1 * grad
        exp_avg_sq = beta2 * _to_cdt(tl.load(v + i, mask=mask), CDT) + rest2 * grad * grad
        if AMSGRAD:
            running = _to_cdt(tl.load(vmax + i, mask=mask), CDT)
            running = tl.where(running < exp_avg_sq, exp_avg_sq, running)  # std::max(running, exp_avg_sq)
            denom = tl.sqrt(running) / bias_correction2_sqrt + eps
            tl.store(vmax + i, _to_odt(running, DT), mask=mask)
        else:
            denom = tl.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps
        param = param - step_size * exp_avg / denom
        tl.store(p + i, _to_odt(param, DT), mask=mask)
        tl.store(m + i, _to_odt(exp_avg, DT), mask=mask)
        tl.store(v + i, _to_odt(exp_avg_sq, DT), mask=mask)


@triton.jit(do_not_specialize=["LR", "WD", "MOMENTUM", "DAMPENING"])
def fused_sgd_kernel(table, lr_ptr, scale_ptr, inf_ptr, LR, WD, MOMENTUM, DAMPENING, DT: tl.constexpr,
                     CDT: tl.constexpr, DECAY: tl.constexpr, HAS_BUF: tl.constexpr, FIRST: tl.constexpr,
                     NESTEROV: tl.constexpr, MAXIMIZE: tl.constexpr, LR_TENSOR: tl.constexpr,
                     HAS_SCALE: tl.constexpr, HAS_INF: tl.constexpr, BLOCK: tl.constexpr):
    """SGD with optional momentum (HAS_BUF; FIRST: the buffer starts as the gradient), Nesterov
    momentum and weight decay, on one table row: parameter, gradient, momentum buffer, start, end."""
    row, start, end = _row(table)
    p = _as_pointer(tl.load(row), DT)
    g = _as_pointer(tl.load(row + 1), DT)
    buf = _as_pointer(tl.load(row + 2), DT)
    end = _skipped(end, start, inf_ptr, HAS_INF)
    if LR_TENSOR:
        lr = _to_cdt(tl.load(lr_ptr), CDT)
    else:
        lr = _to_cdt(_f64(LR), CDT)
    wd = _to_cdt(_f64(WD), CDT)
    momentum = _to_cdt(_f64(MOMENTUM), CDT)
    rest = _to_cdt(1 - _f64(DAMPENING), CDT)
    for offset in range(start, end, BLOCK):
        i = offset + tl.arange(0, BLOCK)
        mask = i < end
        param, grad = _param_and_grad(p, g, i, mask, scale_ptr, DT, CDT, HAS_SCALE, MAXIMIZE)
        if DECAY:
            grad = grad + wd * param
        if HAS_BUF:
            if FIRST:
                momentum_buffer = grad
            else:
                momentum_buffer = momentum * _to_cdt(tl.load(buf + i, mask=mask), CDT) + rest * grad
            tl.store(buf + i, _to_odt(momentum_buffer, DT), mask=mask)
            if NESTEROV:
                grad = grad + momentum * momentum_buffer
            else:
                grad = momentum_buffer
        param = param - lr * grad
        tl.store(p + i, _to_odt(param, DT), mask=mask)


# ------------------------------------------------------------ preparation --
def _bits(value: float) -> int:
    """A Python float's bit pattern as a signed int64 (what _f64 reads back)."""
    return scalar_bits(value, torch.float64)[0]


def _dense(t: torch.Tensor) -> bool:
    """Whether t's elements fill its storage span without gaps or overlaps, in any dimension
    order (channels-last parameters do): the kernels index each tensor flat from its start."""
    if t.is_contiguous():
        return True
    expected = 1
    for size, stride in sorted((d for d in zip(t.shape, t.stride()) if d[0] != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _checked(lists: dict[str, list], steps: list | None = None) -> tuple[torch.device, torch.dtype, int]:
    """The device, dtype and length every list shares, as torch's fused kernels require them
    (a parameter's gradient and states alike in dtype, shape and layout; steps float32 scalars)."""
    lead_name, lead = next(iter(lists.items()))
    n = len(lead)
    for name, tensors in lists.items():
        if len(tensors) != n:
            raise RuntimeError(f"Tensor lists must have the same number of tensors: {lead_name} has {n}, "
                               f"{name} {len(tensors)}")
    if steps is not None and len(steps) != n:
        raise RuntimeError(f"Tensor lists must have the same number of tensors: {lead_name} has {n}, "
                           f"state_steps {len(steps)}")
    if n == 0:
        return torch.device("cpu"), torch.float32, 0
    device, dtype = lead[0].device, lead[0].dtype
    if dtype not in _DTYPES:
        raise RuntimeError(f"fused optimizers take floating-point tensors (float32, float64, float16, bfloat16), "
                           f"got {dtype}")
    for i in range(n):
        ref = lead[i]
        for name, tensors in lists.items():
            t = tensors[i]
            if t.device != device or t.dtype != dtype or t.shape != ref.shape or t.stride() != ref.stride() \
                    or t.layout != torch.strided or not _dense(t):
                raise RuntimeError(f"fused optimizer: {name}[{i}] ({t.dtype}, {tuple(t.shape)}, {t.device}) must "
                                   f"match {lead_name}[{i}] ({ref.dtype}, {tuple(ref.shape)}, {ref.device}) in dtype, "
                                   "device, shape and strides")
        if steps is not None and (steps[i].device != device or steps[i].numel() != 1):
            raise RuntimeError(f"fused optimizer: state_steps[{i}] must be a one-element tensor on {device}, "
                               f"got {tuple(steps[i].shape)} on {steps[i].device}")
        if steps is not None and steps[i].dtype != torch.float32:
            raise Unsupported("state steps other than float32 (torch's fused optimizers keep them in float32)")
    return device, dtype, n


def _step_inputs(lr, grad_scale, found_inf, device: torch.device) -> tuple[int, tuple, dict]:
    """What both kernels take besides their lists: the lr's bits (0 for an lr tensor on the
    device, which the kernel reads; a host lr tensor is read here, as CUDA's kernels do), the
    tensor parameters (lr, grad_scale, found_inf; None where absent) and the flags saying which
    are there."""
    if isinstance(lr, torch.Tensor) and not (lr.device.type == "cpu" and lr.numel() == 1):
        lr_tensor = _scalar_tensor(lr, "lr", device)
    else:
        lr_tensor = None
    scale = _scalar_tensor(grad_scale, "grad_scale", device)
    inf = _scalar_tensor(found_inf, "found_inf", device)
    lr_bits = 0 if lr_tensor is not None else _bits(lr.item() if isinstance(lr, torch.Tensor) else lr)
    flags = dict(LR_TENSOR=lr_tensor is not None, HAS_SCALE=scale is not None, HAS_INF=inf is not None)
    return lr_bits, (lr_tensor, scale, inf), flags


def _scalar_tensor(t, name: str, device: torch.device):
    """grad_scale / found_inf / a tensor lr: a one-element tensor on the lists' device, or None."""
    if t is None:
        return None
    if t.numel() != 1:
        raise RuntimeError(f"fused optimizer: {name} must have one element, got shape {tuple(t.shape)}")
    if t.device != device:
        raise Unsupported(f"{name} on {t.device}, the tensors on {device}")
    return t


def _launch(kernel, fields: list, n: int, device: torch.device, pointers: tuple, bits: list, consts: dict) -> None:
    """One launch of `kernel` over the call's table: per tensor, its row fields 0..4 and 7 from
    `fields` (a list, or None for a field the kernel does not read), then the tensor parameters
    and the doubles' bits."""
    if not _table_serves(device):
        raise Unsupported("the fused optimizers' table under the interpreter (a chip's memory)")
    ints = []
    fields = (fields + [None] * 6)[:6]
    for i in range(n):
        slots = [0 if f is None else f[i].data_ptr() for f in fields]
        ints += (*slots[:5], fields[0][i].numel(), slots[5])
    table, rows, host_rows = cached_table(ints, device, width=7)
    if rows == 0:
        return
    # Absent tensors pass as None, compile-time constants: the C++ replay takes the table and
    # integers only.
    values = (table, *pointers, *bits)
    launched = kernel[(rows,)](*values, BLOCK=_BLOCK, **consts)
    if CAPTURE.launches is not None:
        CAPTURE.launches.append(TableLaunch(launched, values, host_rows, _CHUNK))


def _adam(adamw: bool) -> Callable:
    def fused_adam_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
                    weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        lists = {"self": self, "grads": grads, "exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs}
        if amsgrad:
            lists["max_exp_avg_sqs"] = max_exp_avg_sqs
        device, dtype, n = _checked(lists, state_steps)
        if n == 0:
            return
        lr_bits, pointers, flags = _step_inputs(lr, grad_scale, found_inf, device)
        # Row fields: parameter, gradient, exp_avg, exp_avg_sq, step, then (7) AMSGrad's maximum.
        fields = [self, grads, exp_avgs, exp_avg_sqs, state_steps, max_exp_avg_sqs if amsgrad else None]
        bits = [lr_bits, _bits(beta1), _bits(beta2), _bits(weight_decay), _bits(eps)]
        consts = dict(DT=dtype_code(dtype), CDT=compute_code(dtype), ADAMW=adamw, DECAY=weight_decay != 0,
                      AMSGRAD=bool(amsgrad), MAXIMIZE=bool(maximize), **flags)
        _launch(fused_adam_kernel, fields, n, device, pointers, bits, consts)

    fused_adam_.__name__ = "_fused_adamw_" if adamw else "_fused_adam_"
    return fused_adam_


def fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize,
               is_first_step, grad_scale=None, found_inf=None):
    has_buf = momentum != 0
    lists = {"self": self, "grads": grads}
    if has_buf:
        lists["momentum_buffer_list"] = momentum_buffer_list
    device, dtype, n = _checked(lists)
    if n == 0:
        return
    lr_bits, pointers, flags = _step_inputs(lr, grad_scale, found_inf, device)
    fields = [self, grads, momentum_buffer_list if has_buf else None]
    bits = [lr_bits, _bits(weight_decay), _bits(momentum), _bits(dampening)]
    consts = dict(DT=dtype_code(dtype), CDT=compute_code(dtype), DECAY=weight_decay != 0, HAS_BUF=has_buf,
                  FIRST=bool(is_first_step), NESTEROV=bool(nesterov), MAXIMIZE=bool(maximize), **flags)
    _launch(fused_sgd_kernel, fields, n, device, pointers, bits, consts)


KERNELS: dict[str, Callable] = {
    "_fused_adam_": _adam(False),
    "_fused_adam_.tensor_lr": _adam(False),
    "_fused_adamw_": _adam(True),
    "_fused_adamw_.tensor_lr": _adam(True),
    "_fused_sgd_": fused_sgd_,
    "_fused_sgd_.tensor_lr": fused_sgd_,
}
