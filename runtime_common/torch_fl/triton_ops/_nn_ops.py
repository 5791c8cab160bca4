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
    # resampling and padding (one gather kernel; backward: atomics)
    "upsample_nearest1d", "upsample_nearest1d.out", "upsample_nearest1d_backward",
    "upsample_nearest1d_backward.grad_input", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact1d.out", "_upsample_nearest_exact1d_backward",
    "_upsample_nearest_exact1d_backward.grad_input", "reflection_pad1d", "reflection_pad1d.out",
    "reflection_pad1d_backward", "reflection_pad1d_backward.grad_input", "replication_pad1d",
    "replication_pad1d.out", "replication_pad1d_backward", "replication_pad1d_backward.grad_input",
    "upsample_nearest2d", "upsample_nearest2d.out", "upsample_nearest2d_backward",
    "upsample_nearest2d_backward.grad_input", "_upsample_nearest_exact2d",
    "_upsample_nearest_exact2d.out", "_upsample_nearest_exact2d_backward",
    "_upsample_nearest_exact2d_backward.grad_input", "reflection_pad2d", "reflection_pad2d.out",
    "reflection_pad2d_backward", "reflection_pad2d_backward.grad_input", "replication_pad2d",
    "replication_pad2d.out", "replication_pad2d_backward", "replication_pad2d_backward.grad_input",
    "upsample_nearest3d", "upsample_nearest3d.out", "upsample_nearest3d_backward",
    "upsample_nearest3d_backward.grad_input", "_upsample_nearest_exact3d",
    "_upsample_nearest_exact3d.out", "_upsample_nearest_exact3d_backward",
    "_upsample_nearest_exact3d_backward.grad_input", "reflection_pad3d", "reflection_pad3d.out",
    "reflection_pad3d_backward", "reflection_pad3d_backward.grad_input", "replication_pad3d",
    "replication_pad3d.out", "replication_pad3d_backward", "replication_pad3d_backward.grad_input",
    "upsample_linear1d", "upsample_linear1d.out", "upsample_linear1d_backward",
    "upsample_linear1d_backward.grad_input", "upsample_bilinear2d", "upsample_bilinear2d.out",
    "upsample_bilinear2d_backward", "upsample_bilinear2d_backward.grad_input",
    "upsample_trilinear3d", "upsample_trilinear3d.out", "upsample_trilinear3d_backward",
    "upsample_trilinear3d_backward.grad_input", "upsample_bicubic2d", "upsample_bicubic2d.out",
    "upsample_bicubic2d_backward", "upsample_bicubic2d_backward.grad_input",
    # losses
    "nll_loss2d_forward", "nll_loss2d_forward.output", "nll_loss2d_backward", "nll_loss2d_backward.grad_input",
    # batch norm (native_batch_norm(_backward) has a vendor kernel on npu)
    "_native_batch_norm_legit", "_native_batch_norm_legit.no_stats", "_batch_norm_with_update",
    "_batch_norm_with_update_functional", "batch_norm_backward",
    # elementwise losses (one kernel) and glu, channel_shuffle, im2col/col2im
    "mse_loss", "mse_loss.out", "mse_loss_backward", "mse_loss_backward.grad_input", "huber_loss",
    "huber_loss.out", "huber_loss_backward.out", "smooth_l1_loss", "smooth_l1_loss.out",
    "smooth_l1_loss_backward.grad_input", "binary_cross_entropy", "binary_cross_entropy.out",
    "binary_cross_entropy_backward", "binary_cross_entropy_backward.grad_input", "glu", "glu.out",
    "glu_backward", "glu_backward.grad_input", "channel_shuffle", "channel_shuffle.out", "native_channel_shuffle",
    "im2col", "im2col.out", "col2im", "col2im.out",
    "native_group_norm", "native_group_norm_backward",
    "grid_sampler_2d", "grid_sampler_2d_backward", "_prelu_kernel", "_prelu_kernel_backward",
    "renorm.out",
)
