"""Ops of the `linalg` family (dense linear algebra on small matrices (one program per matrix)); kernels in `_linalg.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ()
