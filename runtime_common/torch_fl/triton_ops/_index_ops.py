"""Ops of the `index` family (scans, sorting, advanced indexing, scatter, selection); kernels in `_index.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ()
