"""Ops of the `index` family (scans, sorting, advanced indexing, scatter, selection); kernels in `_index.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    "flip", "roll",
    "scatter.src", "scatter_.src", "scatter.src_out", "scatter.value", "scatter_.value", "scatter.value_out",
    "index_add", "index_add_", "index_add.out", "index_copy", "index_copy_", "index_copy.out",
    "index_fill_.int_Scalar", "index_fill_.int_Tensor",
    "cumsum", "cumsum_", "cumsum.out", "cumprod", "cumprod_", "cumprod.out",
    "sort.stable", "sort.values_stable",
    "nonzero", "nonzero.out", "nonzero_static", "masked_select", "masked_select.out", "masked_scatter_",
    "index.Tensor", "index.Tensor_out", "_index_put_impl_", "take", "take.out", "put_",
    "repeat_interleave.Tensor", "searchsorted.Tensor", "searchsorted.Tensor_out", "bucketize.Tensor",
    "bucketize.Tensor_out",
    "max.dim", "max.dim_max", "min.dim", "min.dim_min",
    "scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out",
    "scatter.reduce", "scatter_.reduce", "scatter.reduce_out",
    "scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out",
    "index_reduce", "index_reduce_", "index_reduce.out", "count_nonzero.dim_IntList",
    "_logcumsumexp", "_logcumsumexp.out", "_cummax_helper", "_cummin_helper",
    # compositions of the family's kernels
    "isin.Tensor_Tensor_out", "tril_indices", "triu_indices",
)
