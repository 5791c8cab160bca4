"""Ops of the `special` family (Bessel, Airy, modified Bessel and orthogonal-polynomial
functions of torch.special); kernels in `_special.py`.

The polynomials' `x_scalar` / `n_scalar` overloads are CompositeExplicitAutograd: they wrap
the scalar and call the Tensor-Tensor op listed here, so they are not listed themselves.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    "i0", "i0_", "i0.out", "special_i0e", "special_i0e.out", "special_i1", "special_i1.out",
    "special_i1e", "special_i1e.out",
    "special_bessel_j0", "special_bessel_j0.out", "special_bessel_j1", "special_bessel_j1.out",
    "special_bessel_y0", "special_bessel_y0.out", "special_bessel_y1", "special_bessel_y1.out",
    "special_modified_bessel_i0", "special_modified_bessel_i0.out",
    "special_modified_bessel_i1", "special_modified_bessel_i1.out",
    "special_modified_bessel_k0", "special_modified_bessel_k0.out",
    "special_modified_bessel_k1", "special_modified_bessel_k1.out",
    "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k0.out",
    "special_scaled_modified_bessel_k1", "special_scaled_modified_bessel_k1.out",
    "special_spherical_bessel_j0", "special_spherical_bessel_j0.out",
    "special_airy_ai", "special_airy_ai.out",
    "special_chebyshev_polynomial_t", "special_chebyshev_polynomial_t.out",
    "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_u.out",
    "special_chebyshev_polynomial_v", "special_chebyshev_polynomial_v.out",
    "special_chebyshev_polynomial_w", "special_chebyshev_polynomial_w.out",
    "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_t.out",
    "special_shifted_chebyshev_polynomial_u", "special_shifted_chebyshev_polynomial_u.out",
    "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_v.out",
    "special_shifted_chebyshev_polynomial_w", "special_shifted_chebyshev_polynomial_w.out",
    "special_hermite_polynomial_h", "special_hermite_polynomial_h.out",
    "special_hermite_polynomial_he", "special_hermite_polynomial_he.out",
    "special_laguerre_polynomial_l", "special_laguerre_polynomial_l.out",
    "special_legendre_polynomial_p", "special_legendre_polynomial_p.out",
)
