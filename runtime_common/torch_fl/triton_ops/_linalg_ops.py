"""Ops of the `linalg` family (dense linear algebra on small matrices, one program per matrix);
kernels in `_linalg.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton.
Structured ops are listed by their `.out` overload: their functional forms reach it."""

OPS: tuple[str, ...] = (
    "linalg_lu_factor_ex.out", "lu_unpack.out", "linalg_lu.out", "linalg_lu_solve.out",
    "linalg_solve_triangular", "linalg_solve_triangular.out", "_linalg_solve_ex.result",
    "linalg_inv_ex.inverse", "_linalg_det.result", "_linalg_slogdet.sign", "linalg_cholesky_ex.L",
    "cholesky", "cholesky_inverse", "_cholesky_solve_helper", "linalg_qr.out", "geqrf",
    "_linalg_svd.U", "_linalg_eigh.eigenvalues", "linalg_householder_product",
    "linalg_householder_product.out", "ormqr", "ormqr.out", "linalg_cross", "linalg_cross.out",
    "linalg_lstsq.out", "linalg_ldl_factor_ex.out", "linalg_ldl_solve.out", "linalg_matrix_exp",
    "triangular_solve.X",
)
