"""The fused RNN cells: `nn.LSTM`/`nn.GRU` (and their cells) on a chip reach
`aten::_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell`, which torch implements for CUDA
only, so the CPU step of a chain cannot run them. Here each cell is the gate arithmetic of
torch's CUDA kernels (aten/src/ATen/native/cuda/RNN.cu) written with the chip's own
pointwise ops, which the Triton kernels (or the vendor's) run; the workspace layouts are
CUDA's, so torch's autograd formulas for these ops apply unchanged.
"""
from __future__ import annotations

from typing import Callable

import torch


def _gates(input_gates, hidden_gates, input_bias, hidden_bias):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias
    if hidden_bias is not None:
        gates = gates + hidden_bias
    return gates


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """(hy, cy, workspace): workspace holds the activated gates i, f, g, o side by side."""
    i, f, g, o = _gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat((i, f, g, o), 1)


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """(grad_gates, grad_cx, grad_bias) of lstm_cell; an undefined output gradient is zero."""
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_c = torch.zeros_like(cy) if grad_cy is None else grad_cy
    if grad_hy is not None:
        grad_c = grad_c + grad_hy * o * (1 - tanh_cy * tanh_cy)
        grad_o = grad_hy * tanh_cy * o * (1 - o)
    else:
        grad_o = torch.zeros_like(o)
    grad_gates = torch.cat((grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f), grad_c * i * (1 - g * g), grad_o), 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * f, grad_bias


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """(hy, workspace): workspace holds r, z, n, hx and the hidden gates' n part, side by side."""
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    in_r, in_z, in_n = input_gates.chunk(3, 1)
    hid_r, hid_z, hid_n = hidden_gates.chunk(3, 1)
    r = (in_r + hid_r).sigmoid()
    z = (in_z + hid_z).sigmoid()
    n = (in_n + r * hid_n).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat((r, z, n, hx, hid_n), 1)


def gru_cell_backward(grad_hy, workspace, has_bias):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    r, z, n, hx, hid_n = workspace.chunk(5, 1)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_n * hid_n * r * (1 - r)
    grad_input = torch.cat((grad_r, grad_z, grad_n), 1)
    grad_hidden = torch.cat((grad_r, grad_z, grad_n * r), 1)
    if has_bias:
        return grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)
    return grad_input, grad_hidden, grad_hy * z, None, None


KERNELS: dict[str, Callable] = {
    "_thnn_fused_lstm_cell": lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": lstm_cell_backward,
    "_thnn_fused_gru_cell": gru_cell,
    "_thnn_fused_gru_cell_backward": gru_cell_backward,
}
