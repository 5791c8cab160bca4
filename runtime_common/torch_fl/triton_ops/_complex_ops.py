"""Ops of the `complex` family (ops whose result is complex by definition); kernels in
`_complex.py`, beside the adapters that let the other families' ops take complex tensors.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ("complex.out", "polar.out")
