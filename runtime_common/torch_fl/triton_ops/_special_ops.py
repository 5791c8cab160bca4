"""Ops of the `special` family (Bessel, Airy, modified Bessel and orthogonal-polynomial
functions of torch.special); kernels in `_special.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ()
