"""Ops of the `nn` family (neural-network ops: pooling, upsampling, losses, normalisation, sampling); kernels in `_nn.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ()
