"""The fused RNN cells: `nn.LSTM`/`nn.GRU` (and their cells) on a chip reach
`aten::_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell`, which torch implements for CUDA
only, so the CPU step of a chain cannot run them. Here each cell step is one Triton launch
with the gate arithmetic of torch's CUDA kernels (aten/src/ATen/native/cuda/RNN.cu), in
float32 for half types as there; the workspace layouts are CUDA's, so torch's autograd
formulas for these ops apply unchanged. One launch (no chip ops run from Python) also lets
the C++ front replay a step's program (torch_fl/_triton_fast.py).
"""
from __future__ import annotations

from typing import Callable

import torch

from . import _kernels as K
from ._common import BLOCK, compute_dtype, contig, empty, grid1, reduce_dims


def _flags(t: torch.Tensor) -> dict:
    return {"F64": t.dtype == torch.float64, "BLOCK": BLOCK}


def _bias(bias, like):
    return contig(bias) if bias is not None else like


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """(hy, cy, workspace): workspace holds the activated gates i, f, g, o side by side."""
    ig, hg, c = contig(input_gates), contig(hidden_gates), contig(cx)
    hy, cy = empty(cx.shape, cx.dtype, cx.device), empty(cx.shape, cx.dtype, cx.device)
    ws = empty(input_gates.shape, input_gates.dtype, input_gates.device)
    n = cx.numel()
    if n:
        K.lstm_cell_kernel[grid1(n)](ig, hg, c, _bias(input_bias, ig), _bias(hidden_bias, ig), hy, cy, ws, n,
                                     cx.shape[-1], HAS_BI=input_bias is not None, HAS_BH=hidden_bias is not None,
                                     **_flags(cx))
    return hy, cy, ws


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """(grad_gates, grad_cx, grad_bias) of lstm_cell; an undefined output gradient is zero."""
    c, y, ws = contig(cx), contig(cy), contig(workspace)
    gh = contig(grad_hy) if grad_hy is not None else y
    gc = contig(grad_cy) if grad_cy is not None else y
    grad_gates = empty(workspace.shape, workspace.dtype, workspace.device)
    grad_cx = empty(cx.shape, cx.dtype, cx.device)
    n = cx.numel()
    if n:
        K.lstm_cell_bwd_kernel[grid1(n)](gh, gc, c, y, ws, grad_gates, grad_cx, n, cx.shape[-1],
                                         HAS_GHY=grad_hy is not None, HAS_GCY=grad_cy is not None, **_flags(cx))
    grad_bias = _column_sums(grad_gates) if has_bias else None
    return grad_gates, grad_cx, grad_bias


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """(hy, workspace): workspace holds r, z, n, hx and the hidden gates' n part, side by side."""
    ig, hg, h = contig(input_gates), contig(hidden_gates), contig(hx)
    hy = empty(hx.shape, hx.dtype, hx.device)
    ws = empty((hx.shape[0], 5 * hx.shape[-1]), hx.dtype, hx.device)
    n = hx.numel()
    if n:
        K.gru_cell_kernel[grid1(n)](ig, hg, h, _bias(input_bias, ig), _bias(hidden_bias, ig), hy, ws, n,
                                    hx.shape[-1], HAS_BI=input_bias is not None, HAS_BH=hidden_bias is not None,
                                    **_flags(hx))
    return hy, ws


def gru_cell_backward(grad_hy, workspace, has_bias):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    gh, ws = contig(grad_hy), contig(workspace)
    rows, hidden = grad_hy.shape[0], grad_hy.shape[-1]
    grad_input = empty((rows, 3 * hidden), grad_hy.dtype, grad_hy.device)
    grad_hidden = empty((rows, 3 * hidden), grad_hy.dtype, grad_hy.device)
    grad_hx = empty(grad_hy.shape, grad_hy.dtype, grad_hy.device)
    n = grad_hy.numel()
    if n:
        K.gru_cell_bwd_kernel[grid1(n)](gh, ws, grad_input, grad_hidden, grad_hx, n, hidden, **_flags(grad_hy))
    if has_bias:
        return grad_input, grad_hidden, grad_hx, _column_sums(grad_input), _column_sums(grad_hidden)
    return grad_input, grad_hidden, grad_hx, None, None


def _column_sums(t: torch.Tensor) -> torch.Tensor:
    return reduce_dims(t, [0], False, "sum", compute_dtype(t.dtype), t.dtype)


KERNELS: dict[str, Callable] = {
    "_thnn_fused_lstm_cell": lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": lstm_cell_backward,
    "_thnn_fused_gru_cell": gru_cell,
    "_thnn_fused_gru_cell_backward": gru_cell_backward,
}
