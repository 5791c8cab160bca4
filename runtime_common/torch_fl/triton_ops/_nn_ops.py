"""Ops of the `nn` family (neural-network ops: pooling, upsampling, losses, normalisation, sampling); kernels in `_nn.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    # pooling (one kernel pair, see _nn.py)
    "avg_pool2d", "avg_pool2d.out", "avg_pool2d_backward", "avg_pool2d_backward.grad_input",
    "avg_pool3d", "avg_pool3d.out", "avg_pool3d_backward", "avg_pool3d_backward.grad_input",
    "max_pool3d_with_indices", "max_pool3d_with_indices.out", "max_pool3d_with_indices_backward",
    "max_pool3d_with_indices_backward.grad_input",
    "adaptive_max_pool2d", "adaptive_max_pool2d.out", "adaptive_max_pool2d_backward",
    "adaptive_max_pool2d_backward.grad_input",
    "adaptive_max_pool3d", "adaptive_max_pool3d.out", "adaptive_max_pool3d_backward",
    "adaptive_max_pool3d_backward.grad_input",
    "_adaptive_avg_pool3d", "adaptive_avg_pool3d.out", "_adaptive_avg_pool3d_backward",
    "adaptive_avg_pool3d_backward.grad_input",
    "max_unpool2d", "max_unpool2d.out", "max_unpool3d", "max_unpool3d.out",
)
