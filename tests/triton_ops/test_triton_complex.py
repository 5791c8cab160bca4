"""torch_fl.triton_ops complex adapters (_complex.py): complex ops from real ops on the parts.

The adapters run through `kernel_for` on CPU tensors (their real ops then run on the CPU:
this checks the formulas and the argument handling against aten's complex kernels), and
through the public API on `npu`, where every real op they use is the chip's and no call
may fall back to the CPU (`torch_fl.strict_fallback`).
"""
from triton_device import npu_available, on_device

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402
from torch_fl.triton_ops import Unsupported  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

C64, C128 = torch.complex64, torch.complex128
DTYPES = [C64, C128]
TOL = {C64: dict(rtol=1.3e-6, atol=1e-5), C128: dict(rtol=1e-7, atol=1e-7)}


def k(name):
    return on_device(tops.kernel_for(name))


def close(actual, expected):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, **TOL.get(expected.dtype, {}), equal_nan=True)


def rnd(*shape, dtype=C64, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, dtype=C128, generator=g) * scale).to(dtype)


def grid(dtype):
    """Random values plus the regions where the formulas branch: zero, the axes, |z| ~ 0.5
    (log1p), far from the imaginary axis (tanh), tiny and large magnitudes."""
    special = [0, 1, -1, 1j, -1j, 0.3 + 0.2j, -0.4 + 0.1j, 25 + 1j, -30 - 2j, 1e-4 + 1e-4j, 1e-3j,
               -2.5, 2.5, 0.5 + 0.5j, 4 - 7j, -6 + 0.5j]
    return torch.cat([torch.tensor(special, dtype=dtype), rnd(48, dtype=dtype)])


UNARY = ["exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
         "acos", "atan", "asinh", "acosh", "atanh", "sigmoid", "log1p", "expm1", "log2", "log10", "exp2",
         "sgn", "sinc"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_functional_inplace_out(name, dtype):
    x = grid(dtype)
    if name in ("log", "rsqrt", "reciprocal", "log2", "log10"):
        x = x[x != 0]  # aten's own results at 0 are inf/nan combinations of its platform's libm
    expected = getattr(torch, name)(x)
    close(k(name)(x), expected)
    y = x.clone()
    assert k(name + "_")(y) is y
    close(y, expected)
    out = torch.empty(3, dtype=dtype)
    assert k(name + ".out")(x, out=out) is out
    close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_real_valued_results(dtype):
    x = grid(dtype)
    x[3] = complex(math.nan, 1)
    part = torch.empty(0, dtype=x.real.dtype)
    close(k("abs.out")(x, out=part), x.abs())
    close(k("angle")(x), x.angle())
    assert torch.equal(k("isnan")(x), x.isnan())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,reference", [("mul.Tensor", torch.mul), ("div.Tensor", torch.div),
                                            ("logaddexp", torch.logaddexp), ("pow.Tensor_Tensor", torch.pow)])
def test_binary_with_broadcast_and_mixed_operands(name, reference, dtype):
    a, b = rnd(4, 5, dtype=dtype, seed=1), rnd(5, dtype=dtype, seed=2)
    close(k(name)(a, b), reference(a, b))
    real = rnd(4, 5, dtype=dtype, seed=3).real.contiguous()
    close(k(name)(a, real), reference(a, real))
    close(k(name)(real, b), reference(real, b))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 0, 1, 1.7, 2 - 1j])
def test_pow_scalar_exponents_follow_atens_special_cases(exponent):
    x = grid(C64)[1:]
    close(k("pow.Tensor_Scalar")(x, exponent), torch.pow(x, exponent))
    close(k("pow.Scalar")(1.5 + 0.5j, x), torch.pow(1.5 + 0.5j, x))


def test_python_numbers_promote_as_torch():
    x = rnd(6, dtype=C64)
    got = k("mul.Tensor")(x, torch.tensor(2 + 1j, dtype=C128))  # 0-dim: does not widen the result
    close(got, x * torch.tensor(2 + 1j, dtype=C128))
    f64 = rnd(6, dtype=C128).real.contiguous()
    close(k("mul.Tensor")(x, f64), x * f64)  # dimensioned float64: complex128
    close(k("add.Tensor")(x, 1 - 2j), x + (1 - 2j))
    close(k("add.Tensor")(x, x, alpha=3), torch.add(x, x, alpha=3))
    close(k("sub.Tensor")(x, f64, alpha=2), torch.sub(x, f64, alpha=2))
    close(k("rsub.Tensor")(x, 2.5j), torch.rsub(x, 2.5j))
    y = x.clone()  # in place, a float64 operand: computed as torch does, stored as complex64
    close(k("add_.Tensor")(y, f64), x.clone().add_(f64))
    real = x.real.contiguous()
    close(k("add.Tensor")(real, 2j), real + 2j)  # a real tensor made complex by a number


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_ops_run_per_part(dtype):
    x = rnd(4, 6, dtype=dtype)
    idx = torch.tensor([2, 0, 3])
    close(k("index_select")(x, 0, idx), x.index_select(0, idx))
    gidx = torch.tensor([[0, 1], [5, 4], [2, 2], [1, 0]])
    close(k("gather")(x, 1, gidx), x.gather(1, gidx))
    close(k("roll")(x, [1, -2], [0, 1]), x.roll([1, -2], [0, 1]))
    close(k("roll")(x, [3], []), x.roll(3))
    close(k("tril")(x, 1), x.tril(1))
    close(k("triu")(x.mT, -1), x.mT.triu(-1))
    cond = x.real > 0
    close(k("where.self")(cond, x, x.conj().resolve_conj()), torch.where(cond, x, x.conj()))
    close(k("where.self")(cond, x, x.real.contiguous()), torch.where(cond, x, x.real))
    close(k("sum.dim_IntList")(x, [1]), x.sum(1))
    close(k("cumsum")(x, 0), x.cumsum(0))
    close(k("mean.dim")(x, [0], True), x.mean(0, keepdim=True))
    close(k("trace")(x[:, :4]), x[:, :4].trace())
    close(k("index.Tensor")(x, [idx]), x[idx])
    close(k("masked_select")(x, cond), x.masked_select(cond))
    y = x.clone()
    k("masked_fill_.Scalar")(y, cond, 2 - 3j)
    close(y, x.masked_fill(cond, 2 - 3j))
    y = x.clone()
    k("_index_put_impl_")(y, [idx], torch.ones(6, dtype=dtype) * (1 + 1j), True)
    close(y, x.index_put([idx], torch.ones(6, dtype=dtype) * (1 + 1j), accumulate=True))
    src = rnd(3, 6, dtype=dtype, seed=5)
    close(k("index_add")(x, 0, idx, src, alpha=2), x.index_add(0, idx, src, alpha=2))
    out = torch.empty(0, dtype=dtype)
    assert k("index_add.out")(x, 0, idx, src, out=out) is out
    close(out, x.index_add(0, idx, src))
    close(k("scatter.value")(x, 1, gidx, 1j), x.scatter(1, gidx, 1j))
    close(k("scatter_add")(x, 1, gidx, src[:, :2].repeat(2, 1)), x.scatter_add(1, gidx, src[:, :2].repeat(2, 1)))
    close(k("reflection_pad1d")(x, [2, 1]), torch.nn.functional.pad(x, [2, 1], mode="reflect"))
    nc = x.mT  # a non-contiguous self
    close(k("index_select")(nc, 1, idx), nc.index_select(1, idx))
    for value in (2 - 3j, 1.5, torch.tensor(-1 + 4j, dtype=dtype), torch.tensor(0.25)):
        y = x.mT  # fill_ and zero_ write through a non-contiguous view
        name = "fill_.Tensor" if isinstance(value, torch.Tensor) else "fill_.Scalar"
        assert k(name)(y, value) is y
        close(x, torch.full_like(x, complex(value)))
    assert k("zero_")(x.mT) is not None
    close(x, torch.zeros_like(x))


def test_per_part_declines_what_is_not_linear():
    x = rnd(3, 4)
    with pytest.raises(Unsupported):
        tops.kernel_for("scatter.reduce")(x, 0, torch.zeros(1, 4, dtype=torch.long), x[:1], reduce="multiply")
    with pytest.raises(Unsupported):
        tops.kernel_for("add.Tensor")(x, x, alpha=1j)  # a complex coefficient
    with pytest.raises(Unsupported):
        tops.kernel_for("exp")(torch.zeros(3, dtype=torch.complex32))
    with pytest.raises(Unsupported):  # complex data into a real self: the CPU raises torch's error
        tops.kernel_for("masked_fill_.Scalar")(torch.zeros(3), torch.ones(3, dtype=torch.bool), 1j)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions(dtype):
    x = rnd(3, 5, dtype=dtype, seed=7)
    x[0, 1] = 0
    close(k("var.correction")(x, [1], correction=1), x.var(1))
    close(k("std.correction")(x, None, correction=0), x.std(correction=0))
    v, m = k("var_mean.correction")(x, [0], correction=1, keepdim=True)
    ev, em = torch.var_mean(x, 0, keepdim=True)
    close(v, ev)
    close(m, em)
    close(k("linalg_vector_norm")(x, 3, [1]), torch.linalg.vector_norm(x, 3, 1))
    close(k("norm.ScalarOpt_dim")(x, 1, [0]), torch.norm(x, 1, 0))
    close(k("prod.dim_int")(x, 1), x.prod(1))
    close(k("prod")(x[1:]), x[1:].prod())
    close(k("cumprod")(x, 1), x.cumprod(1))
    assert torch.equal(k("nonzero")(x), x.nonzero())
    assert torch.equal(k("count_nonzero.dim_IntList")(x, [1]), x.count_nonzero(1))
    assert torch.equal(k("all.dim")(x, 1, False), x.all(1))
    assert k("equal")(x, x.clone()) and not k("equal")(x, x * 2)
    assert torch.equal(k("eq.Tensor")(x, x * (x.real > 0)), x == x * (x.real > 0))
    assert torch.equal(k("ne.Scalar")(x, 0), x != 0)
    mask = torch.empty(0, dtype=torch.bool)
    assert torch.equal(k("logical_and.out")(x, x.real > 0, out=mask), torch.logical_and(x, x.real > 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_products(dtype):
    a, b = rnd(3, 4, dtype=dtype, seed=1), rnd(4, 2, dtype=dtype, seed=2)
    close(k("mm")(a, b), a @ b)
    close(k("bmm")(a[None].expand(2, 3, 4), b[None].expand(2, 4, 2)), torch.bmm(a.expand(2, 3, 4), b.expand(2, 4, 2)))
    bias = rnd(3, 2, dtype=dtype, seed=3)
    close(k("addmm")(bias, a, b, beta=0.5 - 1j, alpha=2j), torch.addmm(bias, a, b, beta=0.5 - 1j, alpha=2j))
    nan_bias = torch.full((3, 2), complex(math.nan, 0), dtype=dtype)
    close(k("addmm")(nan_bias, a, b, beta=0), a @ b)  # beta 0 ignores self, NaN included
    v = rnd(4, dtype=dtype, seed=4)
    close(k("addmv")(bias[:, 0], a, v, alpha=1 + 1j), torch.addmv(bias[:, 0], a, v, alpha=1 + 1j))
    close(k("dot")(v, v.flip(0)), torch.dot(v, v.flip(0)))
    close(k("vdot")(v, v.flip(0)), torch.vdot(v, v.flip(0)))
    b1, b2 = rnd(2, 3, 4, dtype=dtype, seed=5), rnd(2, 4, 2, dtype=dtype, seed=6)
    close(k("baddbmm")(bias, b1, b2, beta=2), torch.baddbmm(bias, b1, b2, beta=2))
    close(k("addbmm")(bias, b1, b2, alpha=-1j), torch.addbmm(bias, b1, b2, alpha=-1j))
    c, d = rnd(5, 3, dtype=dtype, seed=8), rnd(5, 3, dtype=dtype, seed=9)
    close(k("linalg_cross")(c, d), torch.linalg.cross(c, d))


def test_complex_only_ops_and_creation():
    re, im = torch.randn(4), torch.randn(4)
    out = torch.empty(0, dtype=C64)
    close(k("complex.out")(re, im, out=out), torch.complex(re, im))
    out = torch.empty(0, dtype=C64)
    close(k("polar.out")(re.abs(), im, out=out), torch.polar(re.abs(), im))
    out = torch.empty(0, dtype=C128)
    close(k("linspace.out")(1 - 1j, 3 + 2j, 7, out=out), torch.linspace(1 - 1j, 3 + 2j, 7, dtype=C128))
    out = torch.empty(0, dtype=C64)
    close(k("logspace.out")(0.5j, 1 + 1j, 5, 2.0, out=out), torch.logspace(0.5j, 1 + 1j, 5, 2.0, dtype=C64))
    out = torch.empty(0, dtype=C64)
    close(k("eye.m_out")(3, 4, out=out), torch.eye(3, 4, dtype=C64))


# ------------------------------------------------------------------ npu ----
@pytest.mark.skipif(not npu_available(), reason="npu backend not installed")
def test_complex_work_stays_on_the_npu():
    """A complex workload through the public API: on the chip, no CPU fallback, same answers."""
    import torch_fl

    x, w = rnd(8, 8, seed=11), rnd(8, 8, seed=12)
    cond = x.real > 0

    def work(x, w, cond):
        y = torch.exp(x) * torch.sqrt(w) / (x + 2j)
        y = torch.where(cond, y, torch.tanh(x)) @ w.mT
        z = torch.log1p(y.abs().to(x.dtype)) + torch.roll(x, 2, 0).masked_fill(~cond, 1 - 1j)
        filled = torch.empty_like(z).fill_(torch.tensor(2 - 1j)).add_(z)  # fill_.Tensor: Triton on npu
        return z.cumsum(1), z.var(0), torch.linalg.vector_norm(z, dim=1), torch.angle(z), z.prod(0), filled

    expected = work(x, w, cond)
    with torch_fl.strict_fallback():
        got = work(x.to("npu"), w.to("npu"), cond.to("npu"))
    for g, e in zip(got, expected):
        assert g.device.type == "npu"
        close(g.cpu(), e)
