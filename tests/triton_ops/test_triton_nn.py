"""torch_fl.triton_ops, `nn` family: every kernel of the `nn` family of `ops.yaml` against the CPU aten op.

Kernels run under Triton's interpreter on CPU tensors, or compiled on a GPU
(tests/triton_ops/triton_device.py), and for a subset on `npu` tensors. Each case runs the
functional op and every out= overload of the family with the same base name (out
tensors start empty, so the resize path is taken too).
"""
from triton_device import DEVICE, on_device, same_layout

import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402
NN_OPS = tops.family_ops("nn")

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, I64 = torch.float32, torch.float64, torch.int64
TOL = {F32: (1.3e-6, 1e-5), F64: (1e-7, 1e-7), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
       torch.complex64: (1.3e-6, 1e-5)}
# sums over windows / batches are accumulated in a different order than aten's
SUM_TOL = {F32: (1e-5, 1e-5), F64: (1e-7, 1e-7)}
EXERCISED: set = set()


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _out_args(name):
    return [a.name for a in _aten(name)._schema.arguments if a.kwarg_only and a.alias_info is not None
            and a.alias_info.is_write]


def rnd(*shape, dtype=F32, lo=-2.0, hi=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == I64:
        return torch.randint(int(lo), int(hi) + 1, shape, generator=g)
    return (torch.rand(shape, generator=g, dtype=F64) * (hi - lo) + lo).to(dtype)


def _move(v, device):
    if isinstance(v, torch.Tensor):
        return same_layout(v, device)
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return type(v)(_move(x, device) for x in v)
    return v


def _close(got, ref, tol, device):
    if isinstance(ref, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(ref)
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
        rtol, atol = (tol or TOL).get(ref.dtype, TOL[ref.dtype])
        torch.testing.assert_close(g, ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(g, ref), (g, ref)


def _run(name, args, kwargs, device):
    EXERCISED.add(name)
    return tops.kernel_for(name)(*_move(args, device), **_move(kwargs, device))


def _run_inplace(name, *args):
    """kernel_for(name) on the given tensors themselves (ops that mutate some arguments)."""
    EXERCISED.add(name)
    return on_device(tops.kernel_for(name))(*args)


def check(base, args, kwargs=None, *, tol=None, device=DEVICE, also=(), ref=None):
    """kernel_for(base) (when the family has it) and each out= overload `base.*` (plus `also`)
    against aten's `base` (or the result `ref`) on CPU."""
    kwargs = kwargs or {}
    if ref is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = _aten(base)(*_move(args, "cpu"), **_move(kwargs, "cpu"))
    if base in NN_OPS:
        _close(_run(base, args, kwargs, device), ref, tol, device)
    for name in [n for n in NN_OPS if n.startswith(base + ".")] + list(also):
        outs = _out_args(name)
        refs = ref if isinstance(ref, tuple) else (ref,)
        ob = {o: torch.empty((0,), dtype=r.dtype, device=device) for o, r in zip(outs, refs)}
        got = tops.kernel_for(name)(*_move(args, device), **_move(kwargs, device), **ob)
        EXERCISED.add(name)
        if isinstance(got, tuple):
            assert all(g is ob[o] for g, o in zip(got, outs))
        else:
            assert got is ob[outs[0]]
        _close(got, ref, tol, device)
    return ref


def _channels_last(x):
    return x.contiguous(memory_format=torch.channels_last)


# ---------------------------------------------------------------- pooling ----
AVG2D_CASES = [  # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((2, 3), (1, 2), (0, 1), True, False, None),
    ((3, 2), (2, 1), (1, 0), True, True, 5),
    ((2,), (), 0, False, True, None),
]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("case", range(len(AVG2D_CASES)))
def test_avg_pool2d(dtype, case):
    args = AVG2D_CASES[case]
    for x in (rnd(2, 3, 7, 8, dtype=dtype), _channels_last(rnd(2, 3, 7, 8, dtype=dtype, seed=1)),
              rnd(3, 6, 5, dtype=dtype, seed=2)):
        out = check("avg_pool2d", (x, *args), tol=SUM_TOL)
        g = rnd(*out.shape, dtype=dtype, seed=3)
        check("avg_pool2d_backward", (g, x, *[a if a != () else args[0] for a in args]), tol=SUM_TOL)


def test_avg_pool_int64_truncates():
    x = rnd(1, 2, 5, 5, dtype=I64, lo=-9, hi=9)
    check("avg_pool2d", (x, (2, 2), (2, 2), (1, 1), True, False, None))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_avg_pool3d(dtype):
    x = rnd(2, 2, 5, 6, 7, dtype=dtype)
    for args in [((2, 3, 2), (1, 2, 2), (1, 1, 0), False, True, None), ((3, 2, 2), (2, 1, 2), (1, 0, 1), True, False, 3)]:
        out = check("avg_pool3d", (x, *args), tol=SUM_TOL)
        check("avg_pool3d_backward", (rnd(*out.shape, dtype=dtype, seed=1), x, *args), tol=SUM_TOL)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_max_pool3d_with_indices(dtype):
    x = rnd(2, 3, 5, 6, 7, dtype=dtype)
    x[0, 0, 1, 1, 1] = float("nan")  # NaN wins its windows, like aten
    x[1, 2, 2:4, 2:4, 2:4] = 0.5  # ties: first index
    for args in [((2, 3, 2), (1, 2, 2), (1, 1, 0), (1, 2, 1), True), ((3, 3, 3), (2, 2, 2), (1, 1, 1), 1, False)]:
        out, idx = check("max_pool3d_with_indices", (x, *args))
        g = rnd(*out.shape, dtype=dtype, seed=1)
        check("max_pool3d_with_indices_backward", (g, x, *args, idx), tol=SUM_TOL)
    xi = rnd(1, 2, 4, 4, 4, dtype=I64, lo=-5, hi=5)
    check("max_pool3d_with_indices", (xi, (2, 2, 2), (1, 1, 1), 0, 1, False))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("osz", [(3, 4), (5, 3), (7, 8), (1, 1)])
def test_adaptive_max_pool2d(dtype, osz):
    for x in (rnd(2, 3, 7, 8, dtype=dtype), rnd(3, 7, 8, dtype=dtype, seed=1).transpose(1, 2)):
        out, idx = check("adaptive_max_pool2d", (x, osz[::-1] if x.dim() == 3 else osz))
        check("adaptive_max_pool2d_backward", (rnd(*out.shape, dtype=dtype, seed=2), x, idx), tol=SUM_TOL)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_adaptive_pool3d(dtype):
    x = rnd(2, 3, 5, 6, 7, dtype=dtype)
    for osz in [(2, 3, 4), (5, 4, 3), (1, 1, 1)]:
        out, idx = check("adaptive_max_pool3d", (x, osz))
        check("adaptive_max_pool3d_backward", (rnd(*out.shape, dtype=dtype, seed=1), x, idx), tol=SUM_TOL)
        out = check("_adaptive_avg_pool3d", (x, osz), also=("adaptive_avg_pool3d.out",), tol=SUM_TOL)
        g = rnd(*out.shape, dtype=dtype, seed=2)
        check("_adaptive_avg_pool3d_backward", (g, x), also=("adaptive_avg_pool3d_backward.grad_input",),
              tol=SUM_TOL)


@pytest.mark.parametrize("nsp", [2, 3])
def test_max_unpool(nsp):
    x = rnd(2, 3, *([6] * nsp))
    pool = torch.nn.functional.max_pool2d if nsp == 2 else torch.nn.functional.max_pool3d
    # stride == kernel: unique indices; stride < kernel: repeated indices carry the same value
    for k, s in ((2, 2), (3, 1)):
        p, i = pool(x, k, s, return_indices=True)
        if nsp == 2:
            check("max_unpool2d", (p, i, [6, 6]))
        else:
            check("max_unpool3d", (p, i, [6, 6, 6], [s] * 3, [0] * 3))
    p, i = pool(x, 2, 2, return_indices=True)
    with pytest.raises(RuntimeError, match="shape of indices"):
        tops.kernel_for(f"max_unpool{nsp}d")(p, i[..., :1], [6] * nsp, [2] * nsp, [0] * nsp)


# -------------------------------------------------------- resampling, padding --
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("osz,align,scales", [((8, 11), False, (None, None)), ((3, 4), True, (None, None)),
                                              ((10, 14), False, (2.0, 2.0)), ((5, 7), False, (None, None)),
                                              ((9, 6), False, (1.7, 0.9)), ((1, 9), True, (None, None))])
def test_upsample_2d(dtype, osz, align, scales):
    x = rnd(2, 3, 5, 7, dtype=dtype)
    for name in ("upsample_bilinear2d", "upsample_bicubic2d"):
        out = check(name, (x, osz, align, *scales))
        g = rnd(*out.shape, dtype=dtype, seed=1)
        check(name + "_backward", (g, osz, list(x.shape), align, *scales), tol=SUM_TOL)
    for name in ("upsample_nearest2d", "_upsample_nearest_exact2d"):
        out = check(name, (_channels_last(x), osz, *scales))
        g = rnd(*out.shape, dtype=dtype, seed=1)
        check(name + "_backward", (g, osz, list(x.shape), *scales), tol=SUM_TOL)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_upsample_1d_3d(dtype):
    x1 = rnd(2, 3, 6, dtype=dtype)
    for osz, sc in (((13,), None), ((4,), 0.7)):
        for align in (False, True):
            out = check("upsample_linear1d", (x1, osz, align, sc))
            check("upsample_linear1d_backward", (rnd(*out.shape, dtype=dtype, seed=1), osz, list(x1.shape), align, sc),
                  tol=SUM_TOL)
        for name in ("upsample_nearest1d", "_upsample_nearest_exact1d"):
            out = check(name, (x1, osz, sc))
            check(name + "_backward", (rnd(*out.shape, dtype=dtype, seed=1), osz, list(x1.shape), sc), tol=SUM_TOL)
    x3 = rnd(2, 2, 3, 4, 5, dtype=dtype)
    osz = (5, 3, 7)
    for align in (False, True):
        out = check("upsample_trilinear3d", (x3, osz, align, None, None, None))
        check("upsample_trilinear3d_backward", (rnd(*out.shape, dtype=dtype, seed=1), osz, list(x3.shape), align,
                                                None, None, None), tol=SUM_TOL)
    for name in ("upsample_nearest3d", "_upsample_nearest_exact3d"):
        out = check(name, (x3, osz, None, None, None))
        check(name + "_backward", (rnd(*out.shape, dtype=dtype, seed=1), osz, list(x3.shape), None, None, None),
              tol=SUM_TOL)


def test_upsample_nearest_int64_exact():
    x = rnd(1, 2, 3, 4, dtype=I64, lo=-(2 ** 40), hi=2 ** 40)
    ref = x.repeat_interleave(2, 2).repeat_interleave(3, 3)  # aten's CPU nearest lacks int64
    got = _run("upsample_nearest2d", (x, (6, 12)), {}, DEVICE)
    assert torch.equal(got.cpu(), ref)


PADS = {1: [(3, 2), (0, 4), (2, 0)], 2: [(1, 2, 2, 0), (0, 3, 1, 1)], 3: [(1, 2, 0, 2, 2, 1)]}


@pytest.mark.parametrize("dtype", [F32, F64, I64])
@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_reflection_replication_pad(dtype, nsp):
    shape = {1: (2, 3, 6), 2: (2, 3, 5, 7), 3: (2, 2, 3, 4, 5)}[nsp]
    x = rnd(*shape, dtype=dtype)
    for pad in PADS[nsp]:
        for name in (f"reflection_pad{nsp}d", f"replication_pad{nsp}d"):
            for xx in (x, x[0]):  # batched and unbatched
                out = check(name, (xx, pad))
                if dtype != I64:
                    check(name + "_backward", (rnd(*out.shape, dtype=dtype, seed=1), xx, pad), tol=SUM_TOL)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        tops.kernel_for(f"reflection_pad{nsp}d")(x, [shape[-1]] * (2 * nsp))


def test_replication_pad_negative():
    x = rnd(2, 3, 5, 7)
    out = check("replication_pad2d", (x, (-1, 2, 0, -2)))
    check("replication_pad2d_backward", (rnd(*out.shape, seed=1), x, (-1, 2, 0, -2)))


# ------------------------------------------------------------------ losses ----
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss2d(dtype, reduction):
    x = rnd(2, 4, 3, 5, dtype=dtype)
    t = rnd(2, 3, 5, dtype=I64, lo=0, hi=3)
    t[0, 0, 0] = -100
    t[1, 2, 1] = 2
    for w in (None, rnd(4, dtype=dtype, lo=0.1, hi=1.0, seed=1)):
        check("nll_loss2d_forward", (_channels_last(x), t, w, reduction, -100), tol=SUM_TOL)
        out, tw = check("nll_loss2d_forward", (x, t, w, reduction, -100), tol=SUM_TOL)
        g = rnd(*out.shape, dtype=dtype, seed=2)
        check("nll_loss2d_backward", (g, x, t, w, reduction, -100, tw))
    # ignore_index that is a class index
    check("nll_loss2d_forward", (x, t.clamp(min=0), None, reduction, 1), tol=SUM_TOL)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_elementwise_losses(dtype, reduction):
    x, y = rnd(3, 5, dtype=dtype), rnd(3, 5, dtype=dtype, seed=1)
    y[0, 0] = x[0, 0]  # the kinks of huber / smooth_l1 at |x - y| == 0
    y[1, 1] = x[1, 1] + 0.5
    g = rnd(3, 5, dtype=dtype, seed=2) if reduction == 0 else rnd(dtype=dtype, seed=2)
    check("mse_loss", (x, y, reduction), tol=SUM_TOL)
    check("mse_loss_backward", (g, x, y, reduction))
    check("mse_loss", (x, y[:1], reduction), tol=SUM_TOL)  # broadcast target
    for delta in (0.5, 1.0):
        check("huber_loss", (x, y, reduction, delta), tol=SUM_TOL)
        check("huber_loss_backward", (g, x, y, reduction, delta), also=("huber_loss_backward.out",))
    for beta in (0.0, 0.5, 0.7):
        check("smooth_l1_loss", (x, y, reduction, beta), tol=SUM_TOL)
        check("smooth_l1_loss_backward", (g, x, y, reduction, beta), also=("smooth_l1_loss_backward.grad_input",))
    p, q = rnd(3, 5, dtype=dtype, lo=0, hi=1), rnd(3, 5, dtype=dtype, lo=0, hi=1, seed=1)
    p[0, 0], p[0, 1] = 0.0, 1.0  # log clamped at -100
    for w in (None, rnd(3, 5, dtype=dtype, lo=0, hi=1, seed=3)):
        check("binary_cross_entropy", (p, q, w, reduction), tol=SUM_TOL)
        check("binary_cross_entropy_backward", (g, p, q, w, reduction))


# ----------------------------------------------------------- normalisation ----
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_legit(dtype, training):
    for x in (rnd(2, 4, 3, 5, dtype=dtype), _channels_last(rnd(2, 4, 3, 5, dtype=dtype, seed=1)),
              rnd(6, 4, dtype=dtype, seed=2)):
        for affine in (True, False):
            w = rnd(4, dtype=dtype, seed=3) if affine else None
            b = rnd(4, dtype=dtype, seed=4) if affine else None
            rm, rv = rnd(4, dtype=dtype, seed=5), rnd(4, dtype=dtype, lo=0.5, hi=1.5, seed=6)
            rm_ref, rv_ref = rm.clone(), rv.clone()
            ref = _aten("_native_batch_norm_legit")(x, w, b, rm_ref, rv_ref, training, 0.1, 1e-5)
            if not training:  # saved as on devices (torch's decomposition): the running mean, 1/std
                ref = (ref[0], rm_ref.clone(), torch.rsqrt(rv_ref + 1e-5))
            got = _run_inplace("_native_batch_norm_legit", x, w, b, rm, rv, training, 0.1, 1e-5)
            _close(got, ref, SUM_TOL, "cpu")
            _close((rm, rv), (rm_ref, rv_ref), SUM_TOL, "cpu")  # running stats updated in place
            g = rnd(*x.shape, dtype=dtype, seed=7)
            mask = [True, affine, affine]
            ref_b = torch.ops.aten.native_batch_norm_backward(g, x, w, rm, rv, ref[1], ref[2], training, 1e-5, mask)
            got_b = _run("batch_norm_backward", (g, x, w, rm, rv, ref[1], ref[2], training, 1e-5, mask,
                                                 torch.empty(0, dtype=torch.uint8)), {}, DEVICE)
            _close(got_b, ref_b, SUM_TOL, DEVICE)
    if training:
        x = rnd(2, 4, 3, dtype=dtype)
        check("_native_batch_norm_legit.no_stats", (x, None, None, True, 0.1, 1e-5), tol=SUM_TOL)
        rm, rv = rnd(4, dtype=dtype, seed=5), rnd(4, dtype=dtype, lo=0.5, hi=1.5, seed=6)
        check("_batch_norm_with_update_functional", (x, None, None, rm, rv, 0.1, 1e-5), tol=SUM_TOL)
        rm2, rv2 = rm.clone(), rv.clone()
        ref = _aten("_batch_norm_with_update")(x, None, None, rm, rv, 0.1, 1e-5)
        got = _run_inplace("_batch_norm_with_update", x, None, None, rm2, rv2, 0.1, 1e-5)
        _close(got, ref, SUM_TOL, "cpu")
        _close((rm2, rv2), (rm, rv), SUM_TOL, "cpu")


@pytest.mark.parametrize("dtype", [F32, F64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,groups", [((3, 6, 4, 5), 3), ((2, 6, 7), 6), ((2, 4, 1), 1), ((2, 6, 0), 3),
                                          ((0, 6, 5), 2)])
def test_native_group_norm(dtype, shape, groups):
    # One rounding at the end: a float16 result as accurate as the CPU's against float64.
    x = (rnd(*shape, dtype=F32) * 3 + 1).to(dtype)
    n, c, hw = shape[0], shape[1], x[0, 0].numel() if x.numel() else shape[2]
    for w, b in ((None, None), (rnd(c, seed=1).to(dtype), rnd(c, seed=2).to(dtype))):
        got = _run("native_group_norm", (x, w, b, n, c, hw, groups, 1e-5), {}, DEVICE)
        ref = torch.ops.aten.native_group_norm(x, w, b, n, c, hw, groups, 1e-5)
        wide = torch.ops.aten.native_group_norm(x.double(), None if w is None else w.double(),
                                                None if b is None else b.double(), n, c, hw, groups, 1e-5)
        for g, r, exact in zip(got, ref, wide):
            g = g.cpu()
            assert (g.dtype, g.shape) == (r.dtype, r.shape)
            assert torch.equal(g.isnan(), r.isnan())
            chip_error = (g.double() - exact).abs().nan_to_num().max() if g.numel() else 0
            cpu_error = (r.double() - exact).abs().nan_to_num().max() if r.numel() else 0
            assert chip_error <= 2 * cpu_error + 1e-6, (chip_error, cpu_error)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_native_group_norm_backward(dtype, groups):
    x = rnd(3, 6, 4, 5, dtype=dtype)
    for w in (None, rnd(6, dtype=dtype, seed=1)):
        _, mean, rstd = torch.ops.aten.native_group_norm(x, w, None, 3, 6, 20, groups, 1e-5)
        g = rnd(*x.shape, dtype=dtype, seed=2)
        mask = [True, w is not None, w is not None]
        check("native_group_norm_backward", (g, x, mean, rstd, w, 3, 6, 20, groups, mask), tol=SUM_TOL)


# ------------------------------------------------------ glu, shuffle, im2col ----
@pytest.mark.parametrize("dtype", [F32, F64])
def test_glu(dtype):
    z = rnd(4, 6, 3, dtype=dtype)
    for dim in (1, 0, -2):
        out = check("glu", (z, dim))
        check("glu_backward", (rnd(*out.shape, dtype=dtype, seed=1), z, dim))
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        tops.kernel_for("glu")(z, 2)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_prelu(dtype):
    x = rnd(2, 3, 4, dtype=dtype)
    x[0, 0, 0] = 0.0  # x > 0 is strict
    for w in (rnd(1, 3, 1, dtype=dtype, seed=1), rnd(1, dtype=dtype, seed=1)):
        out = check("_prelu_kernel", (x, w))
        check("_prelu_kernel_backward", (rnd(*out.shape, dtype=dtype, seed=2), x, w))


@pytest.mark.parametrize("dtype", [F32, I64])
def test_channel_shuffle(dtype):
    x = rnd(2, 6, 2, 3, dtype=dtype)
    for g in (1, 2, 3, 6):
        check("channel_shuffle", (x, g))
        check("native_channel_shuffle", (x, g), ref=_aten("channel_shuffle")(x, g))
    check("channel_shuffle", (_channels_last(x), 3))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_im2col_col2im(dtype):
    im = rnd(2, 3, 6, 7, dtype=dtype)
    for args in [((2, 3), (1, 1), (0, 1), (1, 2)), ((3, 2), (2, 1), (1, 1), (2, 1)), ((1, 1), (1, 1), (0, 0), (1, 1))]:
        cols = check("im2col", (im, *args))
        check("im2col", (im[0].transpose(1, 2), *args))  # unbatched, non-contiguous
        check("col2im", (cols, (6, 7), *args), tol=SUM_TOL)
        check("col2im", (cols[1], (6, 7), *args), tol=SUM_TOL)


# ------------------------------------------------------------ grid_sampler ----
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("mode", [0, 1, 2])  # bilinear, nearest, bicubic
@pytest.mark.parametrize("padding", [0, 1, 2])  # zeros, border, reflection
def test_grid_sampler_2d(dtype, mode, padding):
    x = rnd(2, 3, 5, 6, dtype=dtype)
    grid = rnd(2, 4, 7, 2, dtype=dtype, lo=-1.2, hi=1.2, seed=1)  # some points outside [-1, 1]
    for align in (False, True):
        out = check("grid_sampler_2d", (x, grid, mode, padding, align))
        g = rnd(*out.shape, dtype=dtype, seed=2)
        for mask in ([True, True], [False, True]):
            check("grid_sampler_2d_backward", (g, x, grid, mode, padding, align, mask), tol=SUM_TOL)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_grid_sampler_3d_kernel(dtype):
    """Not routed (see _nn.GRID_SAMPLER_3D) but kept correct: called directly."""
    from torch_fl.triton_ops import _nn
    fwd, bwd = _nn.GRID_SAMPLER_3D
    x = rnd(2, 2, 4, 5, 3, dtype=dtype)
    grid = rnd(2, 3, 4, 2, 3, dtype=dtype, lo=-1.2, hi=1.2, seed=1)
    for mode in (0, 1):
        for padding in (0, 1, 2):
            for align in (False, True):
                ref = torch.ops.aten.grid_sampler_3d(x, grid, mode, padding, align)
                _close(on_device(fwd)(x, grid, mode, padding, align), ref, None, "cpu")
                g = rnd(*ref.shape, dtype=dtype, seed=2)
                ref_b = torch.ops.aten.grid_sampler_3d_backward(g, x, grid, mode, padding, align, [True, True])
                _close(on_device(bwd)(g, x, grid, mode, padding, align, [True, True]), ref_b, SUM_TOL, "cpu")
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D"):
        fwd(x, grid, 2, 0, False)


# ---------------------------------------------------------------- npu tensors
def _npu_ok():
    try:
        return torch.zeros(1).to("npu").device.type == "npu"
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not _npu_ok(), reason="npu backend not available")
def test_npu_tensors():
    dev = "npu"
    x = rnd(2, 3, 7, 8)
    out = check("avg_pool2d", (x, (3, 3), (2, 2), (1, 1), False, True, None), device=dev)
    check("avg_pool2d_backward", (rnd(*out.shape, seed=1), x, (3, 3), (2, 2), (1, 1), False, True, None),
          device=dev, tol=SUM_TOL)
    out, idx = check("adaptive_max_pool2d", (x, (3, 4)), device=dev)
    check("adaptive_max_pool2d_backward", (rnd(*out.shape, seed=1), x, idx), device=dev)
    check("upsample_bilinear2d", (x, (9, 5), False, None, None), device=dev)
    check("reflection_pad2d", (x, (2, 1, 0, 3)), device=dev)
    t = rnd(2, 7, 8, dtype=I64, lo=0, hi=2)
    check("nll_loss2d_forward", (x, t, None, 1, -100), device=dev, tol=SUM_TOL)
    check("_native_batch_norm_legit.no_stats", (x, None, None, True, 0.1, 1e-5), device=dev, tol=SUM_TOL)
    check("im2col", (x, (2, 2), (1, 1), (0, 0), (1, 1)), device=dev)
    check("mse_loss", (x, rnd(2, 3, 7, 8, seed=2), 1), device=dev, tol=SUM_TOL)


# ------------------------------------------------------------------- coverage
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.complex64])
def test_renorm(dtype):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 3, 5, generator=g, dtype=torch.float64).to(dtype) * 2
    for p, dim, maxnorm in ((2, 0, 3.0), (1, 1, 4.0), (3.5, -1, 1.0), (2, 2, 100.0)):
        check("renorm", (x, p, dim, maxnorm))


def test_zz_every_nn_op_exercised():
    """Runs last (file order): every op of the family went through one of the tests above."""
    missing = sorted(set(NN_OPS) - EXERCISED)
    assert not missing, f"nn ops not exercised: {missing}"
