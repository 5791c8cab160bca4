"""torch_fl.triton_ops `fft` family: the three ATen FFT primitives against ATen's pocketfft.

Kernels run under Triton's interpreter on CPU tensors, and on `npu` tensors when the
backend is installed.
"""
import os

DEVICE = os.environ.get("TORCH_FL_TRITON_TEST_DEVICE", "cpu")  # "cuda": compiled kernels on a GPU
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402


pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")
EXERCISED: set = set()
TOL = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7),
       torch.complex64: (1.3e-6, 1e-5), torch.complex128: (1e-7, 1e-7)}


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def check(name, *args, device=DEVICE):
    expected = _aten(name)(*args)
    moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    got = tops.kernel_for(name)(*moved)
    assert got.device.type == device and got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=TOL[expected.dtype][0], atol=TOL[expected.dtype][1])
    out = torch.empty(0, dtype=expected.dtype, device=device)
    assert tops.kernel_for(name + ".out")(*moved, out=out) is out
    torch.testing.assert_close(out.cpu(), expected, rtol=TOL[expected.dtype][0], atol=TOL[expected.dtype][1])
    EXERCISED.update({name, name + ".out"})


def rnd(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_r2c(dtype):
    x = rnd(4, 9, 6, dtype=dtype)
    for dims in ([2], [1], [0, 2], [0, 1, 2]):
        for norm in (0, 1, 2):
            for onesided in (True, False):
                check("_fft_r2c", x, dims, norm, onesided)
    check("_fft_r2c", x.transpose(0, 2), [0, 1], 2, True)  # strided input
    check("_fft_r2c", rnd(1, dtype=dtype), [0], 0, True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_c2c(dtype):
    x = rnd(3, 7, 5, dtype=dtype)
    for dims in ([2], [0], [1, 2], [0, 1, 2]):
        for norm in (0, 1, 2):
            for forward in (True, False):
                check("_fft_c2c", x, dims, norm, forward)
    check("_fft_c2c", x.conj(), [1], 0, True)  # a conjugate view: its bit is applied, not ignored
    check("_fft_c2c", x.transpose(0, 1), [0, 2], 1, False)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_c2r(dtype):
    real = {torch.complex64: torch.float32, torch.complex128: torch.float64}[dtype]
    for n in (8, 7, 1, 2):
        x = rnd(3, 5, n, dtype=real)
        half = torch.ops.aten._fft_r2c(x, [2], 0, True)
        for norm in (0, 1, 2):
            check("_fft_c2r", half, [2], norm, n)
        check("_fft_c2r", half.conj(), [2], 2, n)
        full2 = torch.ops.aten._fft_r2c(x, [1, 2], 0, True)
        check("_fft_c2r", full2, [1, 2], 2, n)


def test_conj_physical():
    for x in (rnd(3, 4, dtype=torch.complex64), rnd(4, 3, dtype=torch.complex128).t(), rnd(3, 4)):
        for src in ((x, x.conj()) if x.is_complex() else (x,)):
            out = torch.empty(0, dtype=x.dtype, device=DEVICE)
            assert tops.kernel_for("conj_physical.out")(src.to(DEVICE), out=out) is out
            torch.testing.assert_close(out.cpu(), torch.conj_physical(src), rtol=0, atol=0)
    y = rnd(3, 4, dtype=torch.complex64)
    expected = torch.conj_physical(y)
    y = y.to(DEVICE)
    assert tops.kernel_for("conj_physical_")(y) is y
    torch.testing.assert_close(y.cpu(), expected, rtol=0, atol=0)
    EXERCISED.update({"conj_physical.out", "conj_physical_"})


def test_complex_half_is_declined():
    with pytest.raises(tops.Unsupported):
        tops.kernel_for("_fft_r2c")(rnd(8).half().to(DEVICE), [0], 0, True)


def test_on_the_chip():
    pytest.importorskip("torch_fl_npu")
    x = rnd(4, 8)
    check("_fft_r2c", x, [1], 2, True, device="npu")
    check("_fft_c2c", rnd(4, 8, dtype=torch.complex64), [0, 1], 0, False, device="npu")
    check("_fft_c2r", torch.ops.aten._fft_r2c(x, [1], 0, True), [1], 2, 8, device="npu")


def test_zz_every_fft_op_exercised():
    missing = sorted(set(tops.family_ops("fft")) - EXERCISED)
    assert not missing, f"fft ops not exercised: {missing}"
