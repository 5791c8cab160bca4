"""Ops of the `select` family (order statistics: topk, kthvalue, median, nanmedian, mode);
kernels in `_select.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = ()
