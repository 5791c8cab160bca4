"""The `softmax_norm` family's kernels: softmax / log_softmax and their backwards, and layer
norm (forward and backward). One program per row with the normalised dim moved last;
rows up to `_ONE_PASS_MAX` elements are read once, held in registers.
"""
from __future__ import annotations

from typing import Callable

import torch

from . import _kernels as K
from ._common import (cdiv, compute_dtype, contig, copy_into, dtype_code, empty,
                      next_power_of_2, reduce_dims, resize_out, rows_last)


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
    # The statistics in the compute dtype (float32 for half and bfloat16), as CUDA's kernel and
    # torch's meta function for every device but the CPU return them.
    mean = empty(sshape, cd, input.device)
    rstd = empty(sshape, cd, input.device)
    wb = contig(weight, cd) if weight is not None else xb
    bb = contig(bias, cd) if bias is not None else xb
    if m > 0 and kk > 0:
        K.layer_norm_kernel[(m,)](xb, wb, bb, out, mean, rstd, m, kk, float(eps), HAS_W=weight is not None,
                                  HAS_B=bias is not None, ODT=dtype_code(input.dtype), SDT=dtype_code(cd),
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
    want_w, want_b = bool(output_mask[1] and weight is not None), bool(output_mask[2] and bias is not None)
    if want_w or want_b:
        dw, db = _layer_norm_weight_grads(gb, xb, mb, rb, m, kk, weight if want_w else None,
                                          bias if want_b else None, cd)
    return dx, dw, db


# Column blocks and row parts of the weight and bias gradients' kernel: enough programs to fill
# a GPU (row parts summed after, in a second launch), one launch when the rows are few.
_WB_BLOCK_K, _WB_BLOCK_M, _WB_PROGRAMS = 64, 32, 256


def _layer_norm_weight_grads(gb, xb, mb, rb, m, kk, weight, bias, cd):
    """(dw, db) of layer norm (None where not asked for) from the compute-dtype buffers."""
    dev = gb.device
    columns = cdiv(kk, _WB_BLOCK_K)
    parts = max(1, min(cdiv(m, _WB_BLOCK_M), _WB_PROGRAMS // max(columns, 1)))
    rows = cdiv(cdiv(max(m, 1), parts), _WB_BLOCK_M) * _WB_BLOCK_M  # a part's rows, whole blocks
    parts = cdiv(max(m, 1), rows)

    def buffer(param):  # the result itself for one part, else per-part sums in the compute dtype
        if param is None:
            return None
        return empty((kk,), param.dtype, dev) if parts == 1 else empty((parts, kk), cd, dev)

    bw, bb = buffer(weight), buffer(bias)
    if kk > 0:
        K.layer_norm_bwd_wb_kernel[(columns, parts)](
            gb, xb, mb, rb, bw if bw is not None else bb, bb if bb is not None else bw, m, kk, rows,
            HAS_W=weight is not None, HAS_B=bias is not None, F64=cd == torch.float64,
            BLOCK_M=_WB_BLOCK_M, BLOCK_K=_WB_BLOCK_K)

    def result(param, buf):
        if param is None:
            return None
        if parts > 1:
            buf = reduce_dims(buf, [0], False, "sum", cd, param.dtype)
        return buf.view(param.shape)

    return result(weight, bw), result(bias, bb)


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
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
}
