"""Ops of the `rnn` family (the fused LSTM and GRU cells torch implements for GPUs only); kernels in `_rnn.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    "_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl",
    "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward",
)
