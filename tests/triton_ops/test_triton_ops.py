"""torch_fl.triton_ops: every SUPPORTED_OPS kernel against the CPU aten op.

Kernels run under Triton's interpreter (TRITON_INTERPRET=1 must be set before
triton is imported), on CPU tensors and, for a subset, on `npu` tensors.
"""
import os

# TORCH_FL_TRITON_TEST_DEVICE=cuda runs every check on a GPU with the kernels compiled
# (no interpreter): `pytest --noconftest tests/triton_ops/test_triton_ops.py` on the device machine.
DEVICE = os.environ.get("TORCH_FL_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I32, I64, BOOL = torch.int32, torch.int64, torch.bool
TOL = {F32: (1.3e-6, 1e-5), F64: (1e-7, 1e-7), F16: (1e-3, 1e-3), BF16: (1.6e-2, 1e-2)}
EXERCISED: set = set()


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _out_arg(name):
    return [a.name for a in _aten(name)._schema.arguments if a.kwarg_only and a.alias_info is not None
            and a.alias_info.is_write]


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def rnd(*shape, dtype=F32, lo=-2.0, hi=2.0, seed=0):
    if dtype == BOOL:
        return torch.rand(shape, generator=_g(seed)) > 0.5
    if dtype in (I32, I64, torch.int8, torch.uint8, torch.int16):
        return torch.randint(int(lo), int(hi) + 1, shape, generator=_g(seed)).to(dtype)
    return (torch.rand(shape, generator=_g(seed), dtype=F64) * (hi - lo) + lo).to(dtype)


def layouts(dtype=F32, lo=-2.0, hi=2.0):
    """contiguous, transposed, expanded (stride 0), 0-dim."""
    return [rnd(3, 5, dtype=dtype, lo=lo, hi=hi), rnd(5, 3, dtype=dtype, lo=lo, hi=hi, seed=1).t(),
            rnd(1, 5, dtype=dtype, lo=lo, hi=hi, seed=2).expand(3, 5), rnd(dtype=dtype, lo=lo, hi=hi, seed=3)]


def _move_args(args, device):
    """Tensors to `device`; a 0-dim tensor after the first argument stays on the CPU (the
    dispatcher's wrapped numbers), while a 0-dim first argument is a real device tensor."""
    if not args:
        return args
    first = args[0]
    if isinstance(first, torch.Tensor) and first.dim() == 0 and device != "cpu":
        first = first.to(device)
    else:
        first = _move(first, device)
    return type(args)((first, *_move(tuple(args[1:]), device)))


def _move(v, device):
    if isinstance(v, torch.Tensor):
        if device == "cpu" or v.dim() == 0:
            return v.clone()
        if 0 in v.stride() and v.numel() > 1:
            return v.contiguous().to(device)
        # keep the layout: allocate the same strides on the device
        d = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=device)
        d.copy_(v)
        return d
    if isinstance(v, (list, tuple)):
        return type(v)(_move(x, device) for x in v)
    if isinstance(v, dict):  # keyword arguments: out= tensors, weights
        return {k: _move(x, device) for k, x in v.items()}
    return v


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_clone(x) for x in v)
    return v


def _close(got, ref, tol=None, device=DEVICE):
    if isinstance(ref, (tuple, list)):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            if r is None:
                assert g is None
            else:
                _close(g, r, tol, device)
        return
    assert isinstance(got, torch.Tensor)
    assert got.device.type == device, (got.device, device)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert tuple(got.shape) == tuple(ref.shape), (got.shape, ref.shape)
    g = got.cpu()
    if ref.dtype in TOL:
        rtol, atol = TOL[ref.dtype]
        if tol:
            rtol, atol = max(rtol, tol[0]), max(atol, tol[1])
        torch.testing.assert_close(g, ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(g, ref), (g, ref)


def check(name, args, kwargs=None, *, ref_name=None, tol=None, device=DEVICE, variants=True):
    """Compare kernel_for(name) with aten (ref_name or name); for a functional name also
    run its in-place (if the result keeps self's dtype/shape) and out= variants."""
    kwargs = kwargs or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = _aten(ref_name or name)(*_clone(args), **_clone(kwargs))
        except RuntimeError:
            # aten rejects a Python scalar for this Tensor argument (the dispatcher never
            # passes one there either)
            if any(isinstance(a, (int, float)) for a in args[1:]):
                return
            raise
    if name in tops.SUPPORTED_OPS:
        got = tops.kernel_for(name)(*_move_args(args, device), **_move(kwargs, device))
        _close(got, ref, tol, device)
        EXERCISED.add(name)
    if not variants:
        return
    base, _, ov = (ref_name or name).partition(".")
    for vname in VARIANTS.get(ref_name or name, ()):
        if vname.split(".")[0].endswith("_"):
            s = args[0]
            if not (isinstance(ref, torch.Tensor) and ref.dtype == s.dtype and ref.shape == s.shape):
                continue
            if 0 in s.stride() and s.numel() > 1:
                continue
            a = _move_args(args, device)
            got = tops.kernel_for(vname)(*a, **_move(kwargs, device))
            assert got is a[0]
            _close(got, ref, tol, device)
        else:
            outs = _out_arg(vname)
            refs = ref if isinstance(ref, tuple) else (ref,)
            ob = {o: torch.empty(r.shape if i else (0,), dtype=r.dtype, device=device)
                  for i, (o, r) in enumerate(zip(outs, refs))}
            got = tops.kernel_for(vname)(*_move_args(args, device), **_move(kwargs, device), **ob)
            if isinstance(got, tuple):  # multi-output out= ops return their out tensors
                assert all(g is ob[o] for g, o in zip(got, outs))
                _close(got, refs, tol, device)
            else:
                assert got is ob[outs[0]]
                _close(got, refs[0], tol, device)
        EXERCISED.add(vname)


def _variants():
    """functional aten name -> its in-place / out variants in SUPPORTED_OPS."""
    out = {}
    sig = {}
    for n in tops.SUPPORTED_OPS:
        s = _aten(n)._schema
        key_args = tuple((a.name, str(a.type)) for a in s.arguments
                         if not (a.kwarg_only and a.alias_info is not None))
        sig[n] = (n.split(".")[0].rstrip("_"), key_args)
    funcs = {}
    for base in {b for b, _ in sig.values()}:
        pk = getattr(torch.ops.aten, base)
        for ov in pk.overloads():
            s = getattr(pk, ov)._schema
            if any(a.alias_info is not None and a.alias_info.is_write for a in s.arguments):
                continue
            if s.name.endswith("_"):
                continue
            funcs[(base, tuple((a.name, str(a.type)) for a in s.arguments))] = base + ("" if ov == "default" else "." + ov)
    for n, k in sig.items():
        f = funcs.get(k)
        if f and f != n:
            out.setdefault(f, []).append(n)
    return out


VARIANTS = _variants()

# ------------------------------------------------------------------ pointwise
FLOAT_UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
               "tanh", "sigmoid", "erf", "reciprocal"]
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "log1p"}
SAME_UNARY = ["floor", "ceil", "round", "trunc", "neg", "sign", "relu", "abs", "gelu", "silu"]


@pytest.mark.parametrize("op", FLOAT_UNARY + SAME_UNARY)
def test_unary(op):
    lo, hi = (0.05, 3.0) if op in POSITIVE else (-1.4, 1.4) if op == "tan" else (-3.0, 3.0)
    for dt in (F32, F64, F16, BF16):
        for x in layouts(dt, lo, hi) if dt == F32 else layouts(dt, lo, hi)[:2]:
            check(op, (x,))
    if op in ("round", "floor", "ceil", "trunc"):
        check(op, (torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.49, 2.51, 1e8 + 1]),))
    if op not in ("gelu", "silu"):
        for dt in (I32, I64):
            if op in POSITIVE:
                check(op, (rnd(3, 4, dtype=dt, lo=1, hi=9),))
            else:
                check(op, (rnd(3, 4, dtype=dt, lo=-5, hi=5),))
    if op == "gelu":
        for x in layouts():
            check(op, (x,), {"approximate": "tanh"})
    if op in ("exp", "sigmoid", "tanh", "expm1", "log1p"):
        check(op, (torch.tensor([1e-7, -1e-7, 50.0, -50.0, 100.0, -100.0, 0.0]),))


def test_logical_bitwise_not():
    for x in layouts(BOOL) + [rnd(3, 4, dtype=F32), rnd(3, 4, dtype=I64, lo=-3, hi=3)]:
        check("logical_not", (x,))
    for x in layouts(BOOL) + [rnd(3, 4, dtype=I32, lo=-9, hi=9), rnd(3, 4, dtype=I64, lo=-9, hi=9)]:
        check("bitwise_not", (x,))


def _pairs(dt=F32, lo=-3.0, hi=3.0):
    a, at, ae, a0 = layouts(dt, lo, hi)
    b = rnd(3, 5, dtype=dt, lo=lo, hi=hi, seed=7)
    return [(a, b), (at, b), (a, ae), (a, rnd(5, dtype=dt, lo=lo, hi=hi, seed=8)), (a, a0), (a0, a)]


BINARY = ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum", "fmod.Tensor",
          "remainder.Tensor", "atan2", "pow.Tensor_Tensor"]


@pytest.mark.parametrize("op", BINARY)
def test_binary(op):
    lo, hi = (0.2, 2.0) if op == "pow.Tensor_Tensor" else (-3.0, 3.0)
    for a, b in _pairs(F32, lo, hi):
        if op in ("fmod.Tensor", "remainder.Tensor", "div.Tensor"):
            b = torch.where(b.abs() < 0.1, torch.full_like(b, 0.5), b)
        check(op, (a, b))
    for dt in (F64, F16, BF16):
        a, b = rnd(3, 5, dtype=dt, lo=lo, hi=hi), rnd(3, 5, dtype=dt, lo=0.5, hi=hi, seed=1)
        check(op, (a, b))
    if op != "atan2":
        for dt in (I32, I64):
            a = rnd(3, 5, dtype=dt, lo=-9 if op != "pow.Tensor_Tensor" else 0, hi=9)
            b = rnd(3, 5, dtype=dt, lo=1, hi=4, seed=1)
            check(op, (a, b))
            check(op, (a, -b if op != "pow.Tensor_Tensor" else b))
    # promotion with wrapped Python scalars and mixed dtypes
    x = rnd(3, 5, lo=lo, hi=hi)
    check(op, (x, 2.5 if op != "pow.Tensor_Tensor" else 1.5), ref_name=None, variants=False)
    check(op, (rnd(3, 5, dtype=I64, lo=1, hi=5), 2.5), variants=False)
    check(op, (rnd(3, 5, dtype=I32, lo=1, hi=5), rnd(3, 5, dtype=F16, lo=1, hi=2)), variants=False)
    check(op, (x, torch.tensor(1.5, dtype=F64)), variants=False)
    if op in ("add.Tensor", "sub.Tensor"):
        check(op, (x, rnd(3, 5, seed=3)), {"alpha": 0.3})
        check(op, (rnd(3, 5, dtype=I64, lo=-5, hi=5), rnd(3, 5, dtype=I64, seed=3, lo=-5, hi=5)), {"alpha": 3})
        check(op, (rnd(3, 5, dtype=BF16), rnd(3, 5, dtype=BF16, seed=3)), {"alpha": 2})
    if op == "add.Tensor":
        check(op, (rnd(3, 5, dtype=BOOL), rnd(3, 5, dtype=BOOL, seed=4)))
    if op in ("maximum", "minimum"):
        check(op, (torch.tensor([1.0, math.nan, 2.0]), torch.tensor([math.nan, 1.0, 3.0])))


def test_div_modes():
    a, b = rnd(3, 5, lo=-5, hi=5), rnd(3, 5, lo=0.3, hi=2, seed=1)
    for mode in ("trunc", "floor", None):
        for x, y in ((a, b), (a.t().contiguous().t(), -b), (a, b[0])):
            check("div.Tensor_mode", (x, y), {"rounding_mode": mode})
        ia, ib = rnd(3, 5, dtype=I64, lo=-9, hi=9), rnd(3, 5, dtype=I64, lo=1, hi=4, seed=1)
        check("div.Tensor_mode", (ia, ib), {"rounding_mode": mode})
        check("div.Tensor_mode", (ia, -ib), {"rounding_mode": mode})
        check("div.Tensor_mode", (rnd(3, 5, dtype=F64, lo=-5, hi=5), b.double()), {"rounding_mode": mode})
    check("div.Tensor", (rnd(3, 5, dtype=I32, lo=-9, hi=9), rnd(3, 5, dtype=I32, lo=1, hi=4, seed=1)))


def test_pow_scalar_variants():
    x = rnd(3, 5, lo=0.2, hi=2.0)
    for e in (2, 3, 0.5, -0.5, -1, -2, 1, 0, 2.7, -1.3):
        check("pow.Tensor_Scalar", (x, e))
        check("pow.Tensor_Scalar", (x.t(), e))
    check("pow.Tensor_Scalar", (rnd(3, 5, lo=-2, hi=2), 3))
    check("pow.Tensor_Scalar", (rnd(3, 5, dtype=I64, lo=-3, hi=3), 3))
    check("pow.Tensor_Scalar", (rnd(3, 5, dtype=I64, lo=-3, hi=3), 2.5))
    check("pow.Tensor_Scalar", (rnd(3, 5, dtype=BF16, lo=0.2, hi=2), 2.5))
    check("pow.Tensor_Tensor", (rnd(3, 5, lo=-2, hi=2), torch.tensor([1.0, 2.0, 3.0, -1.0, 0.0])))
    check("pow.Scalar", (2.0, rnd(3, 5, lo=-2, hi=2)))
    check("pow.Scalar", (3, rnd(3, 5, dtype=I64, lo=0, hi=5)))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    for a, b in _pairs(F32, -2, 2) + [(rnd(3, 5, dtype=I64, lo=-2, hi=2), rnd(3, 5, dtype=I64, lo=-2, hi=2, seed=1))]:
        b = torch.where(torch.rand(b.shape, generator=_g(5)) > 0.5, a.expand(b.shape) if a.dim() else b, b) \
            if a.shape == b.shape else b
        check(op + ".Tensor", (a, b))
    for dt in (F16, BF16, F64, I32, BOOL):
        check(op + ".Tensor", (rnd(3, 5, dtype=dt, lo=-2, hi=2), rnd(3, 5, dtype=dt, lo=-2, hi=2, seed=1)))
    check(op + ".Tensor", (rnd(3, 5, dtype=I64, lo=-2, hi=2), rnd(3, 5, lo=-2, hi=2, seed=1)))
    for s in (0, 0.5, -1):
        check(op + ".Scalar", (rnd(3, 5, lo=-2, hi=2), s))
        check(op + ".Scalar", (rnd(3, 5, dtype=I64, lo=-2, hi=2), s))
    check(op + ".Scalar", (rnd(3, 5, lo=-2, hi=2).t(), 0.25))
    check(op + ".Tensor", (torch.tensor([math.nan, 1.0]), torch.tensor([math.nan, 1.0])))


def test_inplace_comparisons_keep_self_dtype():
    """eq_/lt_/... store the bool result in self's dtype."""
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        for ov, other in (("Tensor", rnd(5, seed=1)), ("Scalar", 0.25)):
            x = rnd(3, 5)
            ref = _aten(f"{op}.{ov}")(x, other).to(x.dtype)
            y = _move(x.t().contiguous().t(), DEVICE)
            got = tops.kernel_for(f"{op}_.{ov}")(y, _move(other, DEVICE))
            assert got is y and torch.equal(got.cpu(), ref)
            EXERCISED.add(f"{op}_.{ov}")


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor", "bitwise_and.Tensor",
                                "bitwise_or.Tensor", "bitwise_xor.Tensor"])
def test_logical_bitwise(op):
    dts = (BOOL, I32, I64) if op.startswith("bitwise") else (BOOL, F32, I64)
    for dt in dts:
        for a, b in _pairs(dt, -5, 5)[:5]:
            check(op, (a, b))
    if op.startswith("logical"):
        check(op, (rnd(3, 5, dtype=F32), rnd(3, 5, dtype=I32, lo=0, hi=1)))


def test_backward_pointwise():
    g = rnd(3, 5, seed=9)
    for x in layouts():
        check("threshold_backward", (g, x, 0.0))
        check("threshold_backward", (g, x, 0.5))
        y = torch.sigmoid(x)
        check("sigmoid_backward", (g, y))
        check("tanh_backward", (g, torch.tanh(x)))
        check("gelu_backward", (g, x))
        check("gelu_backward", (g, x), {"approximate": "tanh"})
        check("silu_backward", (g, x), variants=True)
    for dt in (BF16, F16, F64):
        g2, x2 = rnd(3, 5, dtype=dt, seed=9), rnd(3, 5, dtype=dt)
        check("threshold_backward", (g2, x2, 0.0))
        check("gelu_backward", (g2, x2))
        check("silu_backward", (g2, x2))
        check("sigmoid_backward", (g2, x2))
        check("tanh_backward", (g2, x2))


def test_where_masked_fill():
    a, at, ae, a0 = layouts()
    c = rnd(3, 5, dtype=BOOL, seed=4)
    for x, y in ((a, at), (ae, a0), (a, 2.5), (rnd(3, 5, dtype=I64, lo=-5, hi=5), at)):
        check("where.self", (c, x, y))
    check("where.self", (c[0], a, at))
    check("where.self", (c, rnd(3, 5, dtype=BF16), rnd(3, 5, dtype=BF16, seed=1)))
    for x in (a, at, rnd(3, 5, dtype=I64, lo=-5, hi=5), rnd(3, 5, dtype=BF16)):
        for m in (c, c[0], rnd(dtype=BOOL)):
            check("masked_fill.Scalar", (x, m, -1.5 if x.is_floating_point() else 7))
            check("masked_fill.Tensor", (x, m, torch.tensor(3.0 if x.is_floating_point() else 3)))


def test_clamp_family():
    x, xt, xe, x0 = layouts(lo=-3, hi=3)
    for t in (x, xt, xe, x0):
        check("clamp", (t, -1.0, 1.5))
        check("clamp", (t, None, 0.5))
        check("clamp", (t, -0.5))
        check("clamp_min", (t, 0.2))
        check("clamp_max", (t, -0.2))
        lo, hi = rnd(3, 5, seed=5, lo=-2, hi=0), rnd(5, seed=6, lo=0, hi=2)
        check("clamp.Tensor", (t, lo, hi))
        check("clamp.Tensor", (t, lo))
        check("clamp.Tensor", (t, None, hi))
        check("clamp_min.Tensor", (t, lo))
        check("clamp_max.Tensor", (t, hi))
    i = rnd(3, 5, dtype=I64, lo=-9, hi=9)
    check("clamp", (i, -3, 4))
    check("clamp", (i, -2.5, 4.5))
    check("clamp_min", (i, 2))
    check("clamp", (torch.tensor([math.nan, 1.0, -5.0]), -1.0, 1.0))
    check("clamp", (rnd(3, 5, dtype=BF16), -0.5, 0.5))


def test_lerp_addcmul_addcdiv():
    a, at, ae, a0 = layouts()
    e = rnd(3, 5, seed=5)
    for s in (a, at, ae, a0):
        check("lerp.Scalar", (s, e, 0.3))
        check("lerp.Scalar", (s, e, 0.8))
        check("lerp.Tensor", (s, e, rnd(3, 5, seed=6, lo=0, hi=1)))
        check("addcmul", (s, e, at), {"value": 0.5})
        check("addcdiv", (s, e, at + 3.0), {"value": -2.0})
        check("addcmul", (s, e, ae))
    check("addcmul", (rnd(3, 5, dtype=I64, lo=-5, hi=5), rnd(3, 5, dtype=I64, lo=-5, hi=5), rnd(5, dtype=I64)),
          {"value": 3})
    for dt in (BF16, F16, F64):
        s, e2, w = rnd(3, 5, dtype=dt), rnd(3, 5, dtype=dt, seed=1), rnd(3, 5, dtype=dt, seed=2, lo=1, hi=2)
        check("lerp.Tensor", (s, e2, w - 1))
        check("addcmul", (s, e2, w), {"value": 0.5})
        check("addcdiv", (s, e2, w), {"value": 0.5})


# ----------------------------------------------------------------- reductions
RED_TOL = (1e-5, 1e-5)


def _red_inputs(dt=F32):
    return [rnd(3, 4, 5, dtype=dt), rnd(5, 4, 3, dtype=dt, seed=1).permute(2, 1, 0), rnd(4, dtype=dt, seed=2)
            .expand(3, 4), rnd(dtype=dt, seed=3)]


@pytest.mark.parametrize("op", ["sum.dim_IntList", "mean.dim", "amax", "amin", "var.correction", "std.correction",
                                "linalg_vector_norm", "prod.dim_int", "argmax", "argmin"])
def test_reductions(op):
    dims_list = [[1], [0, 2], [-1], None, []] if op not in ("prod.dim_int", "argmax", "argmin") else [0, 1, -1]
    for x in _red_inputs():
        for d in dims_list:
            if x.dim() == 0 and d not in (None, [], 0, -1, [-1]):
                continue
            if x.dim() == 2 and d in ([0, 2],):
                continue
            if op in ("amax", "amin") and d is None:
                d = []
            for keepdim in (False, True):
                if op in ("sum.dim_IntList", "mean.dim"):
                    check(op, (x, d, keepdim), tol=RED_TOL)
                elif op in ("var.correction", "std.correction"):
                    check(op, (x, d), {"keepdim": keepdim, "correction": 1 if keepdim else 0}, tol=RED_TOL)
                elif op == "linalg_vector_norm":
                    for o in ((2, 1, math.inf, -math.inf, 0, 3.0) if not keepdim else (2,)):
                        check(op, (x, o, d, keepdim), tol=RED_TOL, variants=o == 2)
                else:
                    check(op, (x, d, keepdim), tol=RED_TOL)
    for dt in (BF16, F16, F64):
        x = rnd(3, 6, dtype=dt)
        if op in ("sum.dim_IntList", "mean.dim"):
            check(op, (x, [1]), tol=RED_TOL)
            check(op, (x, [0]), {"dtype": F32}, tol=RED_TOL)
        elif op in ("prod.dim_int", "argmax", "argmin"):
            check(op, (x, 1), tol=(2e-2, 1e-2) if dt != F64 else RED_TOL)
        elif op in ("var.correction", "std.correction"):
            check(op, (x, [1]), tol=RED_TOL)
        elif op == "linalg_vector_norm":
            check(op, (x, 2, [1]), tol=RED_TOL)
            check(op, (x, 2, [1]), {"dtype": F64}, tol=RED_TOL)
        else:
            check(op, (x, [1]))
    if op in ("sum.dim_IntList", "prod.dim_int", "amax", "amin", "argmax", "argmin"):
        for dt in (I32, I64, BOOL):
            x = rnd(3, 6, dtype=dt, lo=-3, hi=3)
            check(op, (x, 1) if op in ("prod.dim_int", "argmax", "argmin") else (x, [1]))
    if op == "sum.dim_IntList":
        check(op, (rnd(3, 6, dtype=I32), [1]), {"dtype": F64})
        check(op, (torch.empty(0, 3), [0]))
        check(op, (rnd(40, 300), [1]), tol=RED_TOL)  # multi-block rows
    if op in ("argmax", "argmin", "amax", "amin"):
        x = torch.tensor([[1.0, 3.0, 3.0, math.nan, 0.0], [2.0, 2.0, -1.0, -1.0, 5.0]])
        check(op, (x, 1) if op.startswith("arg") else (x, [1]))
        check(op, (rnd(3, 4, dtype=I64, lo=0, hi=1),))
        check(op, (rnd(3, 4), None, True) if op.startswith("arg") else (rnd(3, 4), [], True))


@pytest.mark.parametrize("op", ["sum.dim_IntList", "mean.dim"])
def test_sum_and_mean_over_leading_dims_read_in_place(op):
    """Sums over the leading dims of a contiguous tensor (bias gradients: rows are tokens) read
    the tensor where it lies, their rows split over several programs and summed again when the
    columns are few: every split, a single row block, column counts under one block, dtypes
    widened in the kernel (bf16 in float32, int and bool in int64), keepdim, dtype=."""
    for shape, dims in (((1100, 20), [0]), ((300, 5, 7), [0, 1]), ((9, 3), [0]), ((600, 70), [0]),
                        ((2500, 2), [0]), ((64, 130), [0])):
        for dt in (F32, BF16, F64):
            for keepdim in (False, True):
                check(op, (rnd(*shape, dtype=dt), dims, keepdim), tol=RED_TOL if dt != BF16 else (2e-2, 2e-2))
    if op == "sum.dim_IntList":
        for dt in (I32, I64, BOOL):
            check(op, (rnd(700, 9, dtype=dt, lo=-3, hi=3), [0]))
        check(op, (rnd(700, 9, dtype=I32), [0]), {"dtype": F64})


def test_prod_full_all_any():
    for x in _red_inputs():
        check("prod", (x * 0.5 + 1.0,), tol=RED_TOL)
    check("prod", (rnd(3, 4, dtype=I32, lo=-2, hi=2),))
    check("prod", (rnd(3, 4, dtype=F16, lo=0.5, hi=1.5),), {"dtype": F32}, tol=RED_TOL)
    for op in ("all", "any"):
        for dt in (BOOL, F32, I64, torch.uint8):
            for x in [rnd(3, 4, dtype=dt, lo=0, hi=1), torch.ones(3, 4, dtype=dt), torch.zeros(3, 4, dtype=dt)]:
                check(op, (x,))
                check(op + ".dim", (x.t(), 0, True))
            check(op + ".dim", (rnd(3, 4, dtype=dt, lo=0, hi=1), 1))
        check(op, (torch.empty(0, dtype=BOOL),))


def test_norm_overloads():
    x = rnd(3, 4, 5)
    check("norm.ScalarOpt_dim", (x, 2, [1]), tol=RED_TOL)
    check("norm.ScalarOpt_dim", (x.permute(2, 0, 1), 1, [0, 2], True), tol=RED_TOL)
    check("norm.ScalarOpt_dim", (x, None, [2]), tol=RED_TOL)


# ------------------------------------------------------------------- softmax
@pytest.mark.parametrize("log", [False, True])
def test_softmax(log):
    name = "_log_softmax" if log else "_softmax"
    bname = name + "_backward_data"
    for x in _red_inputs():
        for d in ([0, 1, 2, -1] if x.dim() == 3 else [0, -1]):
            check(name, (x, d, False), tol=RED_TOL)
            y = _aten(name)(x, d, False)
            check(bname, (rnd(*x.shape, seed=4), y, d, F32), tol=RED_TOL)
    check(name, (rnd(4, 1500), 1, False), tol=RED_TOL)  # one pass: the row in registers
    x = rnd(2, 9000)  # rows longer than one pass holds (_ONE_PASS_MAX): three passes of chunks
    check(name, (x, 1, False), tol=RED_TOL)
    check(bname, (rnd(2, 9000, seed=4), _aten(name)(x, 1, False), 1, F32), tol=RED_TOL)
    for dt in (BF16, F16, F64):
        x = rnd(3, 7, dtype=dt)
        check(name, (x, 1, False))
        if dt != F64:
            check(name, (x, 1, True))
        y = _aten(name)(x, 1, False)
        check(bname, (rnd(3, 7, dtype=dt, seed=3), y, 1, dt))
    check(name, (torch.tensor([[0.0, -math.inf, 1.0]]), 1, False))
    # an out= tensor of the result's shape and layout is written by the kernel itself
    x = rnd(3, 40)
    out = torch.empty(3, 40, device=DEVICE)
    got = tops.kernel_for(name + ".out")(_move(x, DEVICE), 1, False, out=out)
    EXERCISED.add(name + ".out")
    assert got is out
    torch.testing.assert_close(out.cpu(), _aten(name)(x, 1, False), rtol=RED_TOL[0], atol=RED_TOL[1])


# ---------------------------------------------------------------- layer norm
def test_layer_norm():
    for x, shape in ((rnd(3, 4, 6), [6]), (rnd(6, 4, 3).permute(2, 1, 0), [4, 6]), (rnd(2, 8), [8])):
        k = 1
        for s in shape:
            k *= s
        w, b = rnd(*shape, seed=5), rnd(*shape, seed=6)
        for ww, bb in ((w, b), (None, None), (w, None)):
            check("native_layer_norm", (x, shape, ww, bb, 1e-5), tol=RED_TOL)
            _, mean, rstd = torch.native_layer_norm(x, shape, ww, bb, 1e-5)
            g = rnd(*x.shape, seed=7)
            mask = [True, ww is not None, bb is not None]
            check("native_layer_norm_backward", (g, x, shape, mean, rstd, ww, bb, mask), tol=(1e-5, 2e-5))
            check("native_layer_norm_backward", (g, x, shape, mean, rstd, ww, bb, [False, mask[1], False]),
                  tol=(1e-5, 2e-5))
    x, w, b = rnd(2, 9000), rnd(9000, seed=1), rnd(9000, seed=2)  # multi-pass rows
    check("native_layer_norm", (x, [9000], w, b, 1e-5), tol=RED_TOL)
    _, mean, rstd = torch.native_layer_norm(x, [9000], w, b, 1e-5)
    check("native_layer_norm_backward", (rnd(2, 9000, seed=3), x, [9000], mean, rstd, w, b, [True, True, True]),
          tol=(1e-5, 2e-5))
    # many rows: the weight and bias gradients summed in row parts, then over the parts
    x, w, b = rnd(300, 8), rnd(8, seed=1), rnd(8, seed=2)
    _, mean, rstd = torch.native_layer_norm(x, [8], w, b, 1e-5)
    for mask in ([True, True, True], [False, True, False], [False, False, True]):
        check("native_layer_norm_backward", (rnd(300, 8, seed=3), x, [8], mean, rstd, w, b, mask), tol=(1e-5, 2e-5))
    # rows of no elements: empty gradients (no kernel for the weight and bias)
    x, w, b = rnd(3, 0), rnd(0, seed=1), rnd(0, seed=2)
    _, mean, rstd = torch.native_layer_norm(x, [0], w, b, 1e-5)
    check("native_layer_norm_backward", (rnd(3, 0, seed=3), x, [0], mean, rstd, w, b, [True, True, True]))
    check("native_layer_norm", (rnd(3, 16, dtype=F64), [16], rnd(16, dtype=F64, seed=1), None, 1e-5))
    for dt in (BF16, F16):
        # The statistics in float32, as CUDA's kernel and torch's meta function for every device
        # but the CPU (whose kernel keeps the input's dtype) return them.
        x, w, b = rnd(3, 16, dtype=dt), rnd(16, dtype=dt, seed=1), rnd(16, dtype=dt, seed=2)
        got = tops.kernel_for("native_layer_norm")(*_move_args((x, [16], w, b, 1e-5), DEVICE))
        want = torch.native_layer_norm(x.float(), [16], w.float(), b.float(), 1e-5)
        meta = torch.native_layer_norm(x.to("meta"), [16], w.to("meta"), b.to("meta"), 1e-5)
        assert [t.dtype for t in got] == [t.dtype for t in meta] == [dt, torch.float32, torch.float32]
        torch.testing.assert_close(got[0].cpu(), want[0].to(dt), rtol=3e-2, atol=3e-2)
        for g, r in zip(got[1:], want[1:]):
            torch.testing.assert_close(g.cpu(), r, rtol=1e-5, atol=1e-5)
    for dt in (BF16, F16, F64):
        x, w, b = rnd(3, 16, dtype=dt), rnd(16, dtype=dt, seed=1), rnd(16, dtype=dt, seed=2)
        _, mean, rstd = torch.native_layer_norm(x, [16], w, b, 1e-5)
        check("native_layer_norm_backward", (rnd(3, 16, dtype=dt, seed=3), x, [16], mean, rstd, w, b,
                                             [True, True, True]), tol=(1e-5, 1e-5) if dt == F64 else (3e-2, 3e-2))


def test_rms_norm_path():
    """F.rms_norm decomposes (CompositeImplicit) into pow / mean / add / rsqrt / mul: all covered."""
    x, w = rnd(3, 8), rnd(8, seed=1)
    ref = torch.nn.functional.rms_norm(x, (8,), w, 1e-6)
    x, w = _move(x, DEVICE), _move(w, DEVICE)
    sq = tops.kernel_for("pow.Tensor_Scalar")(x, 2)
    ms = tops.kernel_for("mean.dim")(sq, [-1], True)
    r = tops.kernel_for("rsqrt")(tops.kernel_for("add.Tensor")(ms, 1e-6))
    y = tops.kernel_for("mul.Tensor")(tops.kernel_for("mul.Tensor")(x, r), w)
    torch.testing.assert_close(y.cpu(), ref, rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------- matmul
MM_TOL = (1e-5, 1e-5)


def test_mm_bmm_addmm():
    a, b = rnd(5, 7), rnd(7, 3, seed=1)
    for x, y in ((a, b), (a.t().contiguous().t(), b), (a, rnd(3, 7, seed=2).t()), (rnd(33, 40), rnd(40, 70, seed=1))):
        check("mm", (x, y), tol=MM_TOL)
        check("addmm", (rnd(x.shape[0], y.shape[1], seed=3), x, y), tol=MM_TOL)
        check("addmm", (rnd(y.shape[1], seed=4), x, y), {"beta": 0.5, "alpha": 2.0}, tol=MM_TOL)
        check("addmm", (torch.full((x.shape[0], y.shape[1]), math.nan), x, y), {"beta": 0}, tol=MM_TOL)
    for dt in (BF16, F16, F64):
        check("mm", (rnd(5, 7, dtype=dt), rnd(7, 3, dtype=dt, seed=1)), tol=(1e-2, 1e-2) if dt != F64 else None)
    ba, bb = rnd(2, 5, 7), rnd(2, 7, 3, seed=1)
    for x, y in ((ba, bb), (ba.transpose(1, 2).contiguous().transpose(1, 2), bb), (ba, rnd(7, 3).expand(2, 7, 3))):
        check("bmm", (x, y), tol=MM_TOL)
        check("baddbmm", (rnd(2, 5, 3, seed=3), x, y), {"beta": 0.5, "alpha": 1.5}, tol=MM_TOL)
        check("baddbmm", (rnd(5, 3, seed=3), x, y), tol=MM_TOL)
    check("bmm", (rnd(2, 4, 5, dtype=BF16), rnd(2, 5, 3, dtype=BF16)), tol=(1e-2, 1e-2))
    check("mm", (rnd(3, 0), rnd(0, 4)))


# --------------------------------------------------------------- index ops
def test_index_select_gather_scatter():
    x = rnd(4, 5, 3)
    idx = torch.tensor([3, 0, 0, 2])
    for d in (0, 1, 2, -1):
        i = idx.clamp(max=x.shape[d] - 1)
        check("index_select", (x, d, i))
        check("index_select", (x.permute(2, 0, 1), d, i.clamp(max=x.permute(2, 0, 1).shape[d] - 1)))
    check("index_select", (rnd(6, 3, dtype=BF16), 0, torch.tensor([5, 1])))
    check("index_select", (rnd(6, 3, dtype=I64), 0, torch.tensor([5, 1], dtype=I32)))
    check("index_select", (rnd(), 0, torch.tensor([0, 0])))
    check("index_select", (rnd(6, 3), 0, torch.tensor([2, 0, 1])[::2]))
    check("embedding", (rnd(10, 4), torch.tensor([[1, 2, 9], [0, 0, 3]])), variants=False,
          ref_name="embedding")  # CompositeExplicit: reaches index_select
    src = rnd(4, 5)
    gi = torch.randint(0, 5, (4, 3), generator=_g(1))
    check("gather", (src, 1, gi))
    check("gather", (src.t(), 0, torch.randint(0, 5, (2, 4), generator=_g(2))))
    check("gather", (rnd(3, 4, dtype=I64), 1, torch.tensor([[0], [3], [1]])))
    base = rnd(4, 5)
    si = torch.randint(0, 5, (4, 3), generator=_g(3))
    check("scatter_add", (base, 1, si, rnd(4, 3, seed=5)), tol=RED_TOL)
    check("scatter_add", (base.t(), 0, torch.randint(0, 5, (2, 4), generator=_g(4)), rnd(2, 4, seed=6)),
          tol=RED_TOL)
    check("scatter_add", (rnd(4, 5, dtype=BF16), 0, torch.randint(0, 4, (3, 5), generator=_g(4)),
                          rnd(3, 5, dtype=BF16, seed=6)))
    check("scatter_add", (rnd(4, 5, dtype=I64), 0, torch.randint(0, 4, (3, 5), generator=_g(4)),
                          rnd(3, 5, dtype=I64, seed=6)))


def test_embedding_dense_backward():
    idx = torch.tensor([[1, 2, 1], [0, 4, 1]])
    for dt in (F32, BF16, F64):
        g = rnd(2, 3, 4, dtype=dt)
        for pad in (-1, 1):
            for freq in (False, True):
                check("embedding_dense_backward", (g, idx, 6, pad, freq), tol=RED_TOL)
    check("embedding_dense_backward", (rnd(3, 2, 4).transpose(0, 1), idx.t().contiguous().t(), 5, -1, False),
          tol=RED_TOL)


def test_cat_fill_zero():
    a, b = rnd(2, 3), rnd(4, 3, seed=1).t().contiguous().t()
    check("cat", ([a, b], 0))
    check("cat", ([a.t(), b.t(), a.t()], 1))
    check("cat", ([a, rnd(1, 3, dtype=F64), rnd(2, 3, dtype=I64)], 0))
    check("cat", ([rnd(2, 3, dtype=BF16), torch.empty(0), rnd(1, 3, dtype=BF16)], -2))
    check("cat", ([rnd(3, 1).expand(3, 4), rnd(3, 2)], 1))
    # The batched launch (contiguous inputs of the output's dtype): a middle dim, an input of width
    # 0 between others, more inputs than one launch takes, one element per input, every dtype.
    check("cat", ([rnd(2, 3, 4), rnd(2, 0, 4), rnd(2, 1, 4, seed=2), rnd(2, 5, 4, seed=3)], 1))
    check("cat", ([rnd(3, k + 1, seed=k) for k in range(11)], -1))
    check("cat", ([rnd(1, seed=k) for k in range(9)], 0))
    check("cat", ([rnd(0, 3), rnd(0, 3)], 0))
    for dt in (F64, BF16, F16, I64, I32, BOOL):
        check("cat", ([rnd(2, 3, dtype=dt), rnd(2, 2, dtype=dt, seed=1)], 1))
    for dt in (F32, F64, BF16, F16, I64, I32, BOOL):
        for v in (0, 1, -2.5, 3, 1e30, True):
            if not dt.is_floating_point and isinstance(v, float):
                continue
            if dt == F16 and v == 1e30:
                continue
            check("fill_.Scalar", (torch.empty(3, 4, dtype=dt), v))
            check("fill_.Scalar", (torch.empty(4, 3, dtype=dt).t(), v))
        check("fill_.Tensor", (torch.empty(3, 4, dtype=dt), torch.tensor(1.0 if dt.is_floating_point else 5)))
        check("zero_", (rnd(3, 4, dtype=dt).t(),))
    check("fill_.Scalar", (torch.empty(2, dtype=F64), 0.1))
    check("fill_.Scalar", (torch.empty(2, dtype=I64), 2 ** 40 + 3))
    check("fill_.Scalar", (torch.empty(2, dtype=F32), math.nan))
    check("fill_.Scalar", (torch.empty(2, dtype=F32), -math.inf))


def test_copy_helper():
    src = rnd(4, 3, dtype=F64).t()
    for dt in (F32, BF16, F16, I64, BOOL):
        dst = torch.empty(4, 3, dtype=dt, device=DEVICE).t()
        tops.copy_into(dst, _move(src, DEVICE))
        assert torch.equal(dst.cpu(), src.to(dt))
    dst = torch.empty(3, 4, device=DEVICE)
    row = torch.tensor([1.0, 2.0, 3.0, 4.0])
    tops.copy_into(dst, row.to(DEVICE))
    assert torch.equal(dst.cpu(), row.expand(3, 4))


def test_pointwise_dense_fast_path(monkeypatch):
    """Contiguous operands, 0-dim tensors and Python scalars take the 12-argument dense
    kernel (scalars by value, no fill launch); strided or broadcast operands the general
    one. Both give aten's results (also checked by the tests above, through both paths)."""
    import torch_fl.triton_ops._common as common

    launches = []

    class Counted:
        def __init__(self, name, kernel):
            self.name, self.kernel = name, kernel

        def __getitem__(self, grid):
            launches.append(self.name)
            return self.kernel[grid]

    for name in ("pointwise_dense_kernel", "pointwise_kernel", "fill_kernel"):
        monkeypatch.setattr(common.K, name, Counted(name, getattr(common.K, name)))
    a, b = _move(rnd(4, 6), DEVICE), _move(rnd(4, 6, seed=1), DEVICE)
    cases = [
        ("add.Tensor", (a, b), {"alpha": -1e-3}, ["pointwise_dense_kernel"]),
        ("mul.Tensor", (a, 2.0), {}, ["pointwise_dense_kernel"]),
        ("add.Tensor", (a, 3), {}, ["pointwise_dense_kernel"]),
        ("mul.Tensor", (a, torch.tensor(1.5, dtype=F64)), {}, ["pointwise_dense_kernel"]),
        ("mul.Tensor", (a, _move(rnd(), DEVICE).to(DEVICE)), {}, ["pointwise_dense_kernel"]),
        ("add.Tensor", (a.t(), b.t()), {}, ["pointwise_kernel"]),  # a transposed output
        ("add.Tensor", (a, b[:1]), {}, ["pointwise_kernel"]),  # broadcast
    ]
    for op, args, kwargs, expected in cases:
        launches.clear()
        got = tops.kernel_for(op)(*args, **kwargs)
        ref_args = [x.cpu() if isinstance(x, torch.Tensor) else x for x in args]
        assert launches == expected, (op, launches)
        _close(got, _aten(op)(*ref_args, **kwargs))


# --------------------------------------------------------------- npu tensors
def _npu_ok():
    try:
        return torch.zeros(1).to("npu").device.type == "npu"
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not _npu_ok(), reason="npu backend not available")
def test_npu_tensors():
    dev = "npu"
    a, b = rnd(3, 5), rnd(3, 5, seed=1)
    check("add.Tensor", (a, b), {"alpha": 2}, device=dev)
    check("add.Tensor", (a.t().contiguous().t(), 2.5), device=dev)
    check("mul.Tensor", (a, torch.tensor(1.5)), device=dev, variants=False)  # 0-dim CPU operand
    check("exp", (a,), device=dev)
    check("div.Tensor_mode", (a, b + 3), {"rounding_mode": "floor"}, device=dev)
    check("lt.Scalar", (a, 0.1), device=dev)
    check("where.self", (a > 0, a, b), device=dev)
    check("masked_fill.Scalar", (a, a > 0, 0.0), device=dev)
    check("clamp", (rnd(3, 5, dtype=BF16), -0.5, 0.5), device=dev)
    check("sum.dim_IntList", (rnd(3, 4, 5), [0, 2]), tol=RED_TOL, device=dev)
    check("argmax", (rnd(4, 6), 1), device=dev)
    check("var.correction", (rnd(4, 6), [1]), tol=RED_TOL, device=dev)
    check("_softmax", (rnd(4, 6), 0, False), tol=RED_TOL, device=dev)
    check("_log_softmax_backward_data", (rnd(4, 6), torch.log_softmax(rnd(4, 6, seed=2), 1), 1, F32), tol=RED_TOL,
          device=dev)
    x, w, bb = rnd(3, 8), rnd(8, seed=1), rnd(8, seed=2)
    check("native_layer_norm", (x, [8], w, bb, 1e-5), tol=RED_TOL, device=dev)
    _, mean, rstd = torch.native_layer_norm(x, [8], w, bb, 1e-5)
    check("native_layer_norm_backward", (rnd(3, 8, seed=3), x, [8], mean, rstd, w, bb, [True, True, True]),
          tol=RED_TOL, device=dev)
    check("mm", (rnd(5, 7), rnd(7, 3, seed=1)), tol=MM_TOL, device=dev)
    check("addmm", (rnd(3), rnd(5, 7), rnd(7, 3, seed=1)), tol=MM_TOL, device=dev)
    check("bmm", (rnd(2, 5, 7), rnd(2, 7, 3, seed=1)), tol=MM_TOL, device=dev)
    check("index_select", (rnd(6, 3), 0, torch.tensor([5, 1, 1])), device=dev)
    check("gather", (rnd(4, 5), 1, torch.tensor([[0, 4], [1, 1], [2, 3], [4, 0]])), device=dev)
    check("embedding_dense_backward", (rnd(2, 3, 4), torch.tensor([[1, 2, 1], [0, 4, 1]]), 6, -1, True),
          tol=RED_TOL, device=dev)
    check("cat", ([a, b.t().contiguous().t()], 1), device=dev)
    check("fill_.Scalar", (torch.empty(3, 4), 0.25), device=dev)
    check("zero_", (rnd(3, 4),), device=dev)


# ------------------------------------------- special functions, activations
SPECIAL_UNARY = {  # op -> (lo, hi) of the random inputs
    "acos": (-1.0, 1.0), "asin": (-1.0, 1.0), "atan": (-4.0, 4.0), "asinh": (-5.0, 5.0), "acosh": (1.0, 6.0),
    "atanh": (-0.99, 0.99), "sinh": (-6.0, 6.0), "cosh": (-6.0, 6.0), "erfc": (-4.0, 6.0),
    "erfinv": (-0.999, 0.999), "lgamma": (-4.5, 8.0), "digamma": (-4.5, 8.0), "sinc": (-4.0, 4.0),
    "frac": (-5.0, 5.0), "sgn": (-3.0, 3.0), "angle": (-3.0, 3.0), "special_erfcx": (-3.0, 8.0),
    "special_log_ndtr": (-12.0, 5.0), "special_ndtri": (0.001, 0.999), "special_entr": (-1.0, 3.0),
    "isnan": (-1.0, 1.0), "isposinf": (-1.0, 1.0), "isneginf": (-1.0, 1.0), "signbit": (-1.0, 1.0),
    "mish": (-6.0, 6.0), "hardsigmoid": (-5.0, 5.0), "hardswish": (-5.0, 5.0),
}
EDGES = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-8, -1e-8, 30.0, -30.0, 1e30, -1e30,
                      math.inf, -math.inf, math.nan], dtype=F64)


@pytest.mark.parametrize("op", sorted(SPECIAL_UNARY))
def test_special_unary(op):
    lo, hi = SPECIAL_UNARY[op]
    for dt in (F32, F64):
        for x in layouts(dt, lo, hi):
            check(op, (x,))
        check(op, (rnd(64, dtype=dt, lo=lo, hi=hi, seed=11),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(op, (EDGES.float(),), variants=False)
        check(op, (EDGES,), variants=False)
    if not op.startswith("special_"):  # aten has no fp16 CPU kernels for these
        check(op, (rnd(3, 4, dtype=F16, lo=lo, hi=hi),), variants=False)
    if op not in ("erfinv", "special_ndtri", "frac", "mish", "hardsigmoid", "hardswish"):
        check(op, (rnd(3, 4, dtype=I64, lo=max(lo, -4), hi=min(hi, 4)),), variants=False)


def test_polygamma_and_zeta():
    for n in (0, 1, 2, 3, 4):
        for x in (rnd(4, 5, lo=0.1, hi=6.0), rnd(4, 5, dtype=F64, lo=-3.5, hi=6.0).t()):
            check("polygamma", (n, x))
    check("special_zeta", (rnd(4, 5, dtype=F64, lo=1.5, hi=6.0), rnd(4, 5, dtype=F64, lo=0.2, hi=5.0, seed=1)))
    check("special_zeta", (rnd(4, 5, lo=1.5, hi=6.0), rnd(5, lo=0.2, hi=5.0, seed=1)))
    check("special_zeta", (torch.tensor([1.0, 0.5, 3.0, 3.0]), torch.tensor([2.0, 2.0, -2.0, -1.5])))


def test_nan_to_num_and_round_decimals():
    x = torch.tensor([math.nan, math.inf, -math.inf, 1.5, -2.25])
    for args, kw in (((x,), {}), ((x, 0.5, 9.0, -9.0), {}), ((x.double(),), {"posinf": 1e300}),
                     ((x.half(),), {}), ((rnd(3, 4, dtype=I64, lo=-5, hi=5),), {})):
        out = torch.empty(0, dtype=args[0].dtype, device=DEVICE)
        assert tops.kernel_for("nan_to_num.out")(*_move(args, DEVICE), **kw, out=out) is out
        _close(out, torch.nan_to_num(*args, **kw))
    EXERCISED.add("nan_to_num.out")
    for d in (0, 1, 2, -1, -2):
        for x in (rnd(3, 5, lo=-500, hi=500), rnd(3, 5, dtype=F64, lo=-500, hi=500).t()):
            check("round.decimals", (x,), {"decimals": d})


ACTIVATIONS = {  # op -> list of extra positional args
    "elu": [(), (0.5, 2.0, 1.5)], "softplus": [(), (2.0, 3.0)], "threshold": [(0.5, -2.0)],
    "leaky_relu": [(), (0.2,)], "softshrink": [(), (1.0,)], "hardshrink": [(), (1.0,)],
    "hardtanh": [(), (-0.5, 1.5)], "logit": [(), (0.1,)],
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activations(op):
    lo, hi = (0.01, 0.99) if op == "logit" else (-4.0, 4.0)
    for extra in ACTIVATIONS[op]:
        for dt in (F32, F64, BF16):
            for x in layouts(dt, lo, hi)[:3]:
                check(op, (x, *extra))
    if op == "logit":
        check(op, (torch.tensor([0.0, 1.0, 0.05, -0.5, 1.5]), 0.1), variants=False)


def test_activation_backwards():
    x = rnd(4, 5, lo=-4, hi=4, seed=1)
    g = rnd(4, 5, seed=2)
    for args in ((1.0, 1.0, 1.0, False, x), (0.5, 2.0, 1.5, False, x), (0.5, 2.0, 1.5, True, x.clamp(min=-0.4))):
        check("elu_backward", (g, *args))
    check("hardtanh_backward", (g, x, -1.0, 1.0))
    check("softplus_backward", (g, x, 2.0, 3.0))
    check("leaky_relu_backward", (g, x, 0.2, False))
    check("hardsigmoid_backward", (g, x))
    check("hardswish_backward", (g, x))
    check("softshrink_backward", (g, x, 0.5))
    check("hardshrink_backward", (g, x, 0.5))
    check("log_sigmoid_backward", (g, x, torch.ops.aten.log_sigmoid_forward(x)[1]))  # CPU's buffer; ours ignores it
    p = rnd(4, 5, lo=0.01, hi=0.99, seed=3)
    check("logit_backward", (g, p))
    check("logit_backward", (g, p, 0.2))
    check("native_dropout_backward", (g, rnd(4, 5, dtype=BOOL), 2.0))
    got = tops.kernel_for("log_sigmoid_forward")(_move(x, DEVICE))
    _close(got[0], torch.nn.functional.logsigmoid(x))
    assert got[1].numel() == 0
    out, buf = torch.empty(0, device=DEVICE), torch.empty(3, device=DEVICE)
    assert tops.kernel_for("log_sigmoid_forward.output")(_move(x, DEVICE), output=out, buffer=buf)[0] is out
    _close(out, torch.nn.functional.logsigmoid(x))
    EXERCISED.update({"log_sigmoid_forward", "log_sigmoid_forward.output"})


NEW_BINARY = ["logaddexp", "logaddexp2", "hypot", "copysign.Tensor", "fmax", "fmin", "heaviside", "nextafter",
              "xlogy.Tensor", "special_xlog1py", "gcd", "lcm", "floor_divide", "bitwise_left_shift.Tensor",
              "bitwise_right_shift.Tensor", "rsub.Tensor"]
INT_ONLY = {"gcd", "lcm", "bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor"}


@pytest.mark.parametrize("op", NEW_BINARY)
def test_new_binary(op):
    if op not in INT_ONLY:
        for a, b in _pairs(F32, -3.0, 3.0):
            if op in ("xlogy.Tensor", "special_xlog1py"):
                b = b.abs() + 0.1
            if op == "floor_divide":
                b = torch.where(b.abs() < 0.1, torch.full_like(b, 0.5), b)
            check(op, (a, b))
        check(op, (torch.tensor([0.0, math.nan, 1.0, -0.0, math.inf, 2.0]),
                   torch.tensor([math.nan, 0.0, -0.0, 1.0, math.inf, 2.0])), variants=False)
        check(op, (rnd(3, 5, dtype=F64), rnd(3, 5, dtype=F64, lo=0.5, seed=1)))
    if op not in ("hypot", "nextafter", "logaddexp", "logaddexp2", "copysign.Tensor", "xlogy.Tensor",
                  "special_xlog1py"):
        lo = 0 if "shift" in op else -20
        a = rnd(3, 5, dtype=I64, lo=lo, hi=40)
        b = rnd(3, 5, dtype=I64, lo=1 if op == "floor_divide" else (-2 if "shift" in op else -12), hi=70 if "shift" in op else 12, seed=1)
        check(op, (a, b))
        check(op, (a.int(), b.int()))
    if op == "rsub.Tensor":
        check(op, (rnd(3, 5), rnd(3, 5, seed=1)), {"alpha": 2.5})


def test_reductions_and_matmul_extras():
    x = rnd(4, 6, lo=-3, hi=3)
    for t in (x, x.t(), rnd(2, 3, 4, dtype=I64, lo=-9, hi=9)):
        check("max", (t,), variants=False)
        check("min", (t,), variants=False)
        for op in ("max", "min"):
            out = torch.empty(0, dtype=t.dtype, device=DEVICE)
            assert tops.kernel_for(f"{op}.unary_out")(_move(t, DEVICE), out=out) is out
            _close(out, getattr(torch, op)(t))
            EXERCISED.add(f"{op}.unary_out")
        check("aminmax", (t,))
        check("aminmax", (t,), {"dim": 1, "keepdim": True})
        check("trace", (t if t.dim() == 2 else t[0],))
    for dims, kd in ((None, False), ([1], True), ([0, 1], False)):
        for corr in (0, 1):
            check("var_mean.correction", (x, dims), {"correction": corr, "keepdim": kd}, tol=(1e-5, 1e-5))
            check("std_mean.correction", (x, dims), {"correction": corr, "keepdim": kd}, tol=(1e-5, 1e-5))
    xn = x.clone()
    xn[0, 1] = math.nan
    check("nansum", (xn,), tol=(1e-5, 1e-5))
    check("nansum", (xn, [1], True), tol=(1e-5, 1e-5))
    check("nansum", (rnd(3, 4, dtype=I64, lo=-5, hi=5), [0]))
    for a, b in ((x, x.clone()), (x, x + 1), (x, x[:2]), (xn, xn.clone())):
        assert tops.kernel_for("equal")(_move(a, DEVICE), _move(b, DEVICE)) == torch.equal(a, b)
    EXERCISED.add("equal")
    v, w = rnd(7, seed=1), rnd(7, seed=2)
    check("dot", (v, w), tol=MM_TOL)
    check("vdot", (v, w), tol=MM_TOL)
    check("dot", (rnd(7, dtype=I64, lo=-9, hi=9), rnd(7, dtype=I64, lo=-9, hi=9, seed=1)))
    m = rnd(5, 7, seed=3)
    check("addmv", (rnd(5, seed=4), m, v), tol=MM_TOL)
    check("addmv", (rnd(1, seed=4), m.t().contiguous().t(), v), {"beta": 0.5, "alpha": 2}, tol=MM_TOL)
    check("addbmm", (rnd(5, 3, seed=5), rnd(4, 5, 6, seed=6), rnd(4, 6, 3, seed=7)), tol=MM_TOL)
    check("addbmm", (rnd(3, seed=5), rnd(4, 5, 6, seed=6), rnd(4, 6, 3, seed=7)), {"beta": 0, "alpha": 0.5},
          tol=MM_TOL)
    ia, ib = rnd(2, 5, 7, dtype=I64, lo=-9, hi=9), rnd(2, 7, 3, dtype=I64, lo=-9, hi=9, seed=1)
    check("bmm", (ia, ib))
    check("mm", (ia[0], ib[0]))
    check("baddbmm", (rnd(2, 5, 3, dtype=I64, lo=-9, hi=9), ia, ib), {"beta": 2, "alpha": 3})


def test_creation():
    for dt in (F32, F64, I64, I32):
        for args in ((0, 10, 1), (-3, 7, 2), (5, -4, -3), (0, 1, 0.1), (-1.5, 2.5, 0.75)):
            if not (dt in (I64, I32) and any(isinstance(a, float) for a in args)):
                check("arange.start_out", args, {"out": torch.empty(0, dtype=dt)}, variants=False)
        for steps in (0, 1, 2, 7, 50):
            check("linspace.out", (-2, 3.5, steps), {"out": torch.empty(0, dtype=dt)}, variants=False)
            check("logspace.out", (-2, 3, steps), {"out": torch.empty(0, dtype=dt)}, variants=False)
        check("logspace.out", (0.5, 2.5, 9, 2.0), {"out": torch.empty(0, dtype=dt)}, variants=False)
        check("eye.m_out", (3, 5), {"out": torch.empty(0, dtype=dt)}, variants=False)
        check("eye.out", (4,), {"out": torch.empty(2, 2, dtype=dt)}, variants=False)
    check("linspace.out", (10, -10, 7), {"out": torch.empty(0, dtype=I64)}, variants=False)
    x = rnd(2, 4, 5, lo=-3, hi=3)
    for d in (0, 1, -1, 3, -7):
        for t in (x, x.transpose(1, 2), rnd(4, 4, dtype=I64, lo=-9, hi=9)):
            check("tril", (t, d))
            check("triu", (t, d))


# ----------------------------------------------------------------- coverage
def test_static_table_matches_impl():
    from torch_fl.triton_ops import _registry

    assert sorted(op for kernels in _registry.all_kernels().values() for op in kernels) == sorted(tops.SUPPORTED_OPS)
    assert len(set(tops.SUPPORTED_OPS)) == len(tops.SUPPORTED_OPS)
    for op in tops.SUPPORTED_OPS:
        _aten(op)  # exists in this torch
        assert callable(tops.kernel_for(op))
    with pytest.raises(KeyError):
        tops.kernel_for("nonexistent.op")


# The families this file covers (the others have their own test files and coverage checks).
CORE_FAMILIES = ("pointwise", "reductions", "softmax_norm", "matmul", "gather", "creation")


def test_zz_every_core_op_exercised():
    missing = sorted({op for family in CORE_FAMILIES for op in tops.family_ops(family)} - EXERCISED)
    assert not missing, f"SUPPORTED_OPS entries not exercised: {missing}"


def test_complex_operands_without_an_adapter_decline_before_any_launch():
    # Triton has no complex types: an op without a complex adapter (_complex.py), and complex32
    # everywhere, declines (the op takes the next step of its chain) instead of failing inside
    # Triton with "KeyError: 'complex64'".
    z = torch.randn(8, dtype=torch.complex64).to(DEVICE)
    with pytest.raises(tops.Unsupported, match="complex64"):
        tops.kernel_for("erfinv")(z)
    with pytest.raises(tops.Unsupported, match="complex32"):
        tops.kernel_for("exp")(z.to(torch.complex32))
    with pytest.raises(tops.Unsupported, match="complex32"):
        tops.kernel_for("reciprocal")(z.to(torch.complex32))


def test_flip_moves_complex_elements_as_pairs():
    z = torch.randn(3, 4, dtype=torch.complex64)
    for dims in ([0], [1], [0, -1], []):
        got = tops.kernel_for("flip")(z.to(DEVICE), dims).cpu()
        assert torch.equal(got, torch.flip(z, dims)), dims
    scalar = z[1, 2].clone()
    assert torch.equal(tops.kernel_for("flip")(scalar.to(DEVICE), [0]).cpu(), scalar)


@pytest.mark.parametrize("name", ["sub.Tensor", "sub_.Tensor", "rsub.Tensor"])
def test_sub_refuses_bool_operands_with_torchs_words(name):
    """torch checks this in aten's shared meta function, which a chip's own kernel bypasses."""
    flags = torch.ones(3, dtype=torch.bool, device=DEVICE)
    kernel = tops.kernel_for(name)
    for operand, words in ((flags, "two bool tensors"), (True, "two bool tensors"), (1, "a bool tensor"),
                           (torch.tensor(1), "a bool tensor")):
        with pytest.raises(RuntimeError, match=f"Subtraction, the `-` operator, with {words}"):
            kernel(flags.clone(), operand)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        kernel(torch.ones(3, device=DEVICE), flags)
    EXERCISED.add(name)


# ------------------------------------------------------------ fused RNN cells --
def _lstm_reference(ig, hg, cx, bi, bh):
    """torch's CUDA formulas (RNN.cu) in float64 on the CPU: (hy, cy, workspace)."""
    gates = ig.double() + hg.double() + (bi.double() if bi is not None else 0) + (bh.double() if bh is not None else 0)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx.double() + i * g
    return o * cy.tanh(), cy, torch.cat((i, f, g, o), 1)


def _gru_reference(ig, hg, hx, bi, bh):
    ig = ig.double() + (bi.double() if bi is not None else 0)
    hg = hg.double() + (bh.double() if bh is not None else 0)
    (in_r, in_z, in_n), (hid_r, hid_z, hid_n) = ig.chunk(3, 1), hg.chunk(3, 1)
    r, z = (in_r + hid_r).sigmoid(), (in_z + hid_z).sigmoid()
    n = (in_n + r * hid_n).tanh()
    return n + z * (hx.double() - n), torch.cat((r, z, n, hx.double(), hid_n), 1)


def _close_to(got, want, dt):
    rtol, atol = {F32: (1e-5, 1e-5), F64: (1e-10, 1e-10), BF16: (2e-2, 2e-2), F16: (2e-3, 2e-3)}[dt]
    assert got.dtype == dt and got.device.type == DEVICE
    torch.testing.assert_close(got.cpu().double(), want.double(), rtol=rtol, atol=atol)


def test_fused_lstm_and_gru_cells():
    """_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward (torch has them for CUDA
    only) against CUDA's formulas in float64: with both biases, none, or one; each undefined
    output gradient; half types computed in float32 as CUDA does."""
    batch, hidden = 3, 37
    for dt in (F32, BF16, F16, F64):
        ig4, hg4 = rnd(batch, 4 * hidden, dtype=dt), rnd(batch, 4 * hidden, dtype=dt, seed=1)
        ig3, hg3 = rnd(batch, 3 * hidden, dtype=dt, seed=2), rnd(batch, 3 * hidden, dtype=dt, seed=3)
        state = rnd(batch, hidden, dtype=dt, seed=4)
        b4 = (rnd(4 * hidden, dtype=dt, seed=5), rnd(4 * hidden, dtype=dt, seed=6))
        b3 = (rnd(3 * hidden, dtype=dt, seed=7), rnd(3 * hidden, dtype=dt, seed=8))
        for use in ((True, True), (False, False), (True, False)):
            bi4, bh4 = (b if u else None for b, u in zip(b4, use))
            bi3, bh3 = (b if u else None for b, u in zip(b3, use))
            got = tops.kernel_for("_thnn_fused_lstm_cell")(*_move_args((ig4, hg4, state, bi4, bh4), DEVICE))
            for g, w in zip(got, _lstm_reference(ig4, hg4, state, bi4, bh4)):
                _close_to(g, w, dt)
            got = tops.kernel_for("_thnn_fused_gru_cell")(*_move_args((ig3, hg3, state, bi3, bh3), DEVICE))
            for g, w in zip(got, _gru_reference(ig3, hg3, state, bi3, bh3)):
                _close_to(g, w, dt)
        # backward, from the workspaces the forward made
        hy, cy, ws = _lstm_reference(ig4, hg4, state, *b4)
        ghy, gcy = rnd(batch, hidden, dtype=dt, seed=9), rnd(batch, hidden, dtype=dt, seed=10)
        for given_hy, given_cy in ((True, True), (True, False), (False, True)):
            args = (ghy if given_hy else None, gcy if given_cy else None, state, cy.to(dt), ws.to(dt), True)
            got = tops.kernel_for("_thnn_fused_lstm_cell_backward_impl")(*_move_args(args, DEVICE))
            i, f, g, o = ws.chunk(4, 1)
            tanh_cy = cy.tanh()
            grad_c = gcy.double() if given_cy else torch.zeros_like(cy)
            grad_o = torch.zeros_like(o)
            if given_hy:
                grad_c = grad_c + ghy.double() * o * (1 - tanh_cy ** 2)
                grad_o = ghy.double() * tanh_cy * o * (1 - o)
            grad_gates = torch.cat((grad_c * g * i * (1 - i), grad_c * state.double() * f * (1 - f),
                                    grad_c * i * (1 - g * g), grad_o), 1)
            for gt, w in zip(got, (grad_gates, grad_c * f, grad_gates.sum(0))):
                _close_to(gt, w, dt)
        hy, ws = _gru_reference(ig3, hg3, state, *b3)
        for has_bias in (True, False):
            got = tops.kernel_for("_thnn_fused_gru_cell_backward")(*_move_args((ghy, ws.to(dt), has_bias), DEVICE))
            r, z, n, hx, hid_n = ws.chunk(5, 1)
            g = ghy.double()
            grad_z, grad_n = g * (hx - n) * z * (1 - z), g * (1 - z) * (1 - n * n)
            grad_r = grad_n * hid_n * r * (1 - r)
            grad_input, grad_hidden = torch.cat((grad_r, grad_z, grad_n), 1), torch.cat((grad_r, grad_z, grad_n * r), 1)
            want = (grad_input, grad_hidden, g * z) + ((grad_input.sum(0), grad_hidden.sum(0)) if has_bias else (None, None))
            for gt, w in zip(got, want):
                if w is None:
                    assert gt is None
                else:
                    _close_to(gt, w, dt)


def test_pointwise_results_are_laid_out_as_tensoriterator_lays_them_out():
    """`_common.result_strides` against the CPU's own results: every layout of two 4-d operands
    (a sample of pairs), alone, together, with a broadcast row, a broadcast leading operand and
    a scalar; and a Triton pointwise kernel's result on a transposed input."""
    import itertools

    from torch_fl.triton_ops._common import result_strides

    base = torch.randn(2, 3, 4, 5)
    perms = list(itertools.permutations(range(4)))

    def laid_out(order):
        return base.permute(order).contiguous().permute([order.index(i) for i in range(4)])

    for p1 in perms:
        for p2 in perms[::5]:
            a, b = laid_out(p1), laid_out(p2)
            for operands in ((a,), (a, b), (a, b[:, :1]), (a[:1], b), (a, b[0, 0, 0])):
                shape = torch.broadcast_shapes(*[o.shape for o in operands])
                want = (operands[0] + operands[1]).stride() if len(operands) > 1 else operands[0].neg().stride()
                got = result_strides(shape, operands)
                assert (tuple(got) if got is not None else torch.empty(shape).stride()) == want, (p1, p2)
    x = torch.randn(2, 5, 3, 4).transpose(1, 2)
    assert tops.kernel_for("neg")(x).stride() == x.neg().stride() == x.stride()
