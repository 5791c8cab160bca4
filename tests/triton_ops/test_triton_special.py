"""torch_fl.triton_ops `special` family: every kernel of the `special` family of `ops.yaml` against the CPU aten op.

Kernels run under Triton's interpreter on CPU tensors, or compiled on a GPU
(tests/triton_ops/triton_device.py). Each case runs the functional op and its out= overload (the out
tensor starts empty, so the resize path is taken too); the grids cover every branch of
ATen's implementations: tiny, moderate and large arguments of both signs, zero, the branch
points themselves, NaN and inf, and for the polynomials degrees from negative to past the
recurrence limits, broadcast against x.
"""
from triton_device import on_device

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402
from torch_fl.triton_ops import family_ops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
TOL = {F32: (1.3e-6, 1e-5), F64: (1e-7, 1e-7), F16: (1e-3, 1e-5), BF16: (1.6e-2, 1e-5)}
EXERCISED: set = set()

UNARY = [op for op in family_ops("special") if "." not in op and not op.endswith("_") and "polynomial" not in op]
POLYNOMIALS = [op for op in family_ops("special") if "." not in op and "polynomial" in op]
# ops whose CPU kernel has Half/BFloat16 versions (computing in float)
HALF_OPS = ["i0", "special_i0e", "special_i1", "special_i1e"]

_MAGNITUDES = [0.0, 1e-30, 1e-6, 1e-5, 1e-3, 0.3, 0.5, 1.0, 2.0, 2.09, 2.5, 4.9, 5.0, 5.1, 7.9, 8.0, 8.1,
               8.3203353, 9.5, 20.0, 50.0, 88.5, 89.0, 90.0, 100.0, 103.892, 104.0, 700.0, 720.0, 1e4, 1e10, 1e30]
_SPECIAL = [float("inf"), float("-inf"), float("nan"), -0.0]
# x of the polynomials: around and on +-1 and 0 (their branch points), outside [-1, 1], large
_POLY_X = [0.0, 1e-7, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.99999994, 1.0, 1.0000001, 1.5, 2.0, 3.0, 5.0, 10.0, 1e3]
# degrees: negative, the small closed forms, past the trigonometric thresholds (4, 6, 8), past
# Hermite's float limit (128), truncated, and NaN / inf / beyond int64 (read as negative)
_DEGREES = [-1.0, 0.0, 1.0, 2.0, 5.0, 7.0, 9.0, 30.0, 100.0, 129.0, 2.5, -0.5, float("nan"), float("inf"), 1e19]


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _close(got, expected, computed_in=None):
    """got == expected within the tolerance of the dtype the values were computed in."""
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    rtol, atol = TOL[computed_in or expected.dtype]
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def _uniform(n, lo, hi, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g, dtype=F64) * (hi - lo) + lo


def unary_grid(dtype):
    values = torch.tensor(_MAGNITUDES + [-v for v in _MAGNITUDES] + _SPECIAL, dtype=F64)
    # Half types: a multiple of 64 elements, all vectorized by ATen (its scalar tail computes
    # i0e in half arithmetic, a few ulps off its vectorized float path)
    grid = torch.cat([values, _uniform(128 - values.numel(), -15, 15)])
    return grid.to(dtype)


def polynomial_grid(x_dtype, n_dtype):
    x = torch.tensor(_POLY_X + [-v for v in _POLY_X] + _SPECIAL, dtype=F64)
    x = torch.cat([x, _uniform(12, -1.2, 1.2)]).to(x_dtype)[:, None]
    degrees = [d for d in _DEGREES if n_dtype.is_floating_point or abs(d) < 2 ** 63 and d == int(d)]
    return x, torch.tensor(degrees, dtype=F64).to(n_dtype)[None, :]


def check(name, *args):
    """The functional op and its .out (empty out: resized) against aten on the same arguments."""
    expected = _aten(name)(*args)
    _close(on_device(tops.kernel_for(name))(*args), expected)
    out = torch.empty(0, dtype=expected.dtype)
    assert on_device(tops.kernel_for(name + ".out"))(*args, out=out) is out
    _close(out, expected)
    EXERCISED.update({name, name + ".out"})


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    check(name, unary_grid(dtype))


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("name", HALF_OPS)
def test_unary_half(name, dtype):
    check(name, unary_grid(dtype))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_unary_integers_promote_to_float(dtype):
    x = torch.tensor([0, 1, 2, 3, 7, 9, 100], dtype=F64)
    if dtype != torch.uint8 and dtype != torch.bool:
        x = torch.cat([x, -x])
    for name in UNARY:
        check(name, x.to(dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial(name, dtype):
    check(name, *polynomial_grid(dtype, dtype))


@pytest.mark.parametrize("x_dtype, n_dtype", [(F32, torch.int64), (BF16, F32), (torch.int64, torch.int64),
                                              (F64, torch.int32), (torch.bool, torch.uint8)])
def test_polynomial_type_promotion(x_dtype, n_dtype):
    x, n = polynomial_grid(x_dtype, n_dtype)
    n = n[:, n[0] < 40]
    for name in ("special_chebyshev_polynomial_t", "special_laguerre_polynomial_l", "special_hermite_polynomial_h"):
        check(name, x, n)


def test_degree_converted_like_aten():
    # the degree reaches ATen's kernel in the common dtype, then truncated to int64: 2**24 + 1
    # becomes the even 2**24 in float (x values whose terms stay short: trigonometric, +-1, fast overflow)
    x = torch.tensor([[-0.9], [0.5], [1.0], [-1.0], [2.0], [-3.0], [float("nan")]])
    check("special_chebyshev_polynomial_t", x, torch.tensor([2 ** 24 + 1, -(2 ** 62), 7]))
    check("special_chebyshev_polynomial_u", x.double(), torch.tensor([2 ** 53 + 1, 2 ** 62]))


def test_hermite_double_limit():
    # degrees above 512 are NaN in double (128 in float, covered by the grids)
    x = torch.tensor([[-1.5], [0.3], [2.0]], dtype=F64)
    for name in ("special_hermite_polynomial_h", "special_hermite_polynomial_he"):
        check(name, x, torch.tensor([511.0, 512.0, 513.0], dtype=F64))


def test_layouts_and_shapes():
    x = _uniform(24, -3, 3).reshape(4, 6).to(F32)
    check("special_bessel_j0", x.t())  # strided input
    check("special_airy_ai", x[:, ::2])
    check("special_i1", torch.tensor(0.7))  # 0-dim
    check("special_modified_bessel_k1", torch.empty(0, 3))
    n = torch.tensor([[3.0], [40.0]])
    check("special_chebyshev_polynomial_u", x.t()[:2], n)  # broadcast the other way, strided x
    check("special_legendre_polynomial_p", x, torch.tensor(12))  # 0-dim degree
    check("special_hermite_polynomial_he", torch.tensor(1.5, dtype=F64), torch.arange(8))


def test_out_dtype_and_layout():
    x = unary_grid(F32)
    for name, dtype in (("special_i0e", F64), ("special_bessel_y1", F16), ("i0", BF16)):
        expected = torch.empty(0, dtype=dtype)
        _aten(name + ".out")(x, out=expected)  # computed in float, then cast
        out = torch.empty(0, dtype=dtype)
        _close(on_device(tops.kernel_for(name + ".out"))(x, out=out), expected, F32 if dtype == F64 else None)
    expected = torch.empty(0, dtype=F32)
    _aten("special_i1e.out")(x.half(), out=expected)  # rounded to half first
    out = torch.empty(0, dtype=F32)
    _close(on_device(tops.kernel_for("special_i1e.out"))(x.half(), out=out), expected)
    x2 = x.reshape(8, 16)
    out = torch.empty(16, 8).t()  # non-contiguous out
    assert on_device(tops.kernel_for("special_scaled_modified_bessel_k0.out"))(x2, out=out) is out
    _close(out, torch.special.scaled_modified_bessel_k0(x2))
    xs, ns = polynomial_grid(F32, F32)
    expected = torch.empty(0, dtype=F64)
    _aten("special_laguerre_polynomial_l.out")(xs, ns, out=expected)
    out = torch.empty(0, dtype=F64)
    _close(on_device(tops.kernel_for("special_laguerre_polynomial_l.out"))(xs, ns, out=out), expected, F32)


def test_out_of_an_integer_dtype_raises_like_aten():
    x = torch.arange(4)
    with pytest.raises(RuntimeError, match="can't be cast"):
        _aten("special_bessel_j1.out")(x, out=torch.empty(4, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        on_device(tops.kernel_for("special_bessel_j1.out"))(x, out=torch.empty(4, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        on_device(tops.kernel_for("i0_"))(torch.arange(4))


@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_i0_inplace(dtype):
    x = unary_grid(dtype)
    expected = torch.i0(x)
    got = x.clone()
    assert on_device(tops.kernel_for("i0_"))(got) is got
    _close(got, expected)
    base = x.reshape(8, 16).clone()
    view = base.t()  # non-contiguous self
    assert on_device(tops.kernel_for("i0_"))(view) is view
    _close(base, torch.i0(x.reshape(8, 16)))
    EXERCISED.add("i0_")


def test_half_types_without_an_aten_kernel_are_declined():
    # ATen's CPU kernels of these have no Half/BFloat16 version: the CPU step raises its own error
    x = unary_grid(F16)
    for name in ("special_bessel_j0", "special_airy_ai"):
        with pytest.raises(tops.Unsupported):
            tops.kernel_for(name)(x)
        with pytest.raises((RuntimeError, NotImplementedError)):
            _aten(name)(x)
    for dtype in (F16, BF16):
        xs, ns = polynomial_grid(dtype, dtype)
        with pytest.raises(tops.Unsupported):
            tops.kernel_for("special_chebyshev_polynomial_t")(xs, ns)
        with pytest.raises((RuntimeError, NotImplementedError)):
            _aten("special_chebyshev_polynomial_t")(xs, ns)


def test_complex_is_declined():
    with pytest.raises(tops.Unsupported):
        tops.kernel_for("special_i0e")(torch.ones(3, dtype=torch.complex64))


def test_zz_every_special_op_exercised():
    missing = sorted(set(family_ops("special")) - EXERCISED)
    assert not missing, f"special ops not exercised: {missing}"
