"""Ops of the `select` family (order statistics: topk, kthvalue, median, nanmedian, mode);
kernels in `_select.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    "topk", "topk.values", "kthvalue", "kthvalue.values",
    "median", "median.dim", "median.dim_values",
    "nanmedian", "nanmedian.dim", "nanmedian.dim_values",
    "mode", "mode.values",
)
