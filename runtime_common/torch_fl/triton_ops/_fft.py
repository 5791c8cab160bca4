"""Triton kernels of the `fft` family: ATen's three FFT primitives as direct DFTs.

`_fft_r2c`, `_fft_c2c` and `_fft_c2r` (every `torch.fft` function and its backward
decomposes into these) are computed one transformed dim at a time as a dense DFT,
out[m, k] = sum_j x[m, j] * exp(sign * 2*pi*i * j*k / n), with the twiddle angle reduced
exactly in integers (j*k mod n) and everything accumulated in fp64. That is O(n^2) per
row instead of O(n log n): right for the short signals a fallback sees, and exact enough
to match pocketfft to the fp32 tolerance. Complex tensors are handled through their
`view_as_real` float view (real/imag interleaved), so no complex arithmetic reaches Triton.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _kernels as K
from . import _launch
from ._common import (cdiv, compute_code, copy_into, dtype_code, launch_pointwise, next_power_of_2, resize_out,
                      scalar_bits)

_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}
_REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}


@triton.jit(do_not_specialize=['NSIG', 'scale_bits'])
def dft_kernel(x, out, M, NSUM, NOUT, NSIG, sxm, sxj, sxc, som, sok, soc, scale_bits,
               SIGN: tl.constexpr, X_COMPLEX: tl.constexpr, CONJ_IN: tl.constexpr,
               HERMITIAN: tl.constexpr, REAL_OUT: tl.constexpr, ODT: tl.constexpr,
               BM: tl.constexpr, BK: tl.constexpr, BJ: tl.constexpr):
    """One 1-d DFT over rows of x (M rows). x/out are float views: element (m, j) at
    m*sxm + j*sxj, its imaginary part sxc further (complex data only).
    HERMITIAN (c2r): x holds n//2+1 bins; bin j > n//2 is conj(x[n - j])."""
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rk = tl.program_id(1).to(tl.int64) * BK + tl.arange(0, BK)
    mm = rm < M
    acc_r = tl.zeros([BM, BK], dtype=tl.float64)
    acc_i = tl.zeros([BM, BK], dtype=tl.float64)
    two_pi_over_n = 6.283185307179586 / NSIG.to(tl.float64)
    for j0 in range(0, NSUM, BJ):
        rj = j0 + tl.arange(0, BJ)
        jm = rj < NSUM
        src = rj
        mirrored = rj < 0  # all false
        if HERMITIAN:
            mirrored = rj > NSIG // 2
            src = tl.where(mirrored, NSIG - rj, rj)
        ld = mm[:, None] & jm[None, :]
        xr = tl.load(x + rm[:, None] * sxm + src[None, :] * sxj, mask=ld, other=0).to(tl.float64)
        if X_COMPLEX:
            xi = tl.load(x + rm[:, None] * sxm + src[None, :] * sxj + sxc, mask=ld, other=0).to(tl.float64)
            if CONJ_IN:
                xi = -xi
            xi = tl.where(mirrored[None, :], -xi, xi)
        else:
            xi = xr * 0.0
        # twiddles for this (j, k) tile; j*k reduced mod n in integers keeps the angle exact
        ph = (rj[:, None] * rk[None, :]) % NSIG
        ang = ph.to(tl.float64) * two_pi_over_n
        wr = tl.cos(ang)
        wi = tl.sin(ang) * SIGN
        wr = tl.where(jm[:, None], wr, 0.0)
        wi = tl.where(jm[:, None], wi, 0.0)
        # (xr + i xi)(wr + i wi), summed over j
        acc_r += tl.sum(xr[:, :, None] * wr[None, :, :] - xi[:, :, None] * wi[None, :, :], axis=1)
        acc_i += tl.sum(xr[:, :, None] * wi[None, :, :] + xi[:, :, None] * wr[None, :, :], axis=1)
    scale = scale_bits.to(tl.int64).to(tl.float64, bitcast=True)
    st = mm[:, None] & (rk[None, :] < NOUT)
    tl.store(out + rm[:, None] * som + rk[None, :] * sok, K._to_odt(acc_r * scale, ODT), mask=st)
    if not REAL_OUT:
        tl.store(out + rm[:, None] * som + rk[None, :] * sok + soc, K._to_odt(acc_i * scale, ODT), mask=st)


def _scale(normalization: int, n: int) -> float:
    # ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n = the transformed signal size)
    if normalization == 0 or n == 0:
        return 1.0
    return 1.0 / math.sqrt(n) if normalization == 1 else 1.0 / n


def _as_rows(t: torch.Tensor, dim: int) -> tuple[torch.Tensor, list]:
    """t with `dim` moved last, as (rows, n) plus the moved shape (a view when possible)."""
    moved = t.movedim(dim, -1)
    shape = list(moved.shape)
    n = shape[-1] if shape else 1
    rows = moved.reshape(-1, n) if moved.numel() else moved.reshape(0, n)
    return rows, shape


def _float_view(t: torch.Tensor):
    """(float tensor, element strides (m, j), imag offset) for a (rows, n) real or complex tensor."""
    if t.is_complex():
        v = torch.view_as_real(t)
        return v, (v.stride(0), v.stride(1)), v.stride(2)
    return t, (t.stride(0), t.stride(1)), 0


def _dft(x: torch.Tensor, dim: int, nout: int, nsig: int, sign: int, scale: float, *, hermitian=False,
         real_out=False) -> torch.Tensor:
    """One DFT step along `dim`; returns a new (contiguous-rows) tensor with dim back in place."""
    conj = x.is_complex() and x.is_conj()
    if conj:
        x = x._conj()  # the raw values: the kernel negates the imaginary part itself
    if x.is_complex() and x.is_neg():
        raise Unsupported("a negative-bit complex view")
    rows, shape = _as_rows(x, dim)
    m, nsum = rows.shape
    if hermitian:
        nsum = nsig  # the sum runs over the whole signal; the kernel mirrors the stored half
    real = rows.dtype if not rows.is_complex() else _REAL_OF[rows.dtype]
    odt = real if real_out else _COMPLEX_OF[real]
    out = torch.empty((m, nout), dtype=odt, device=x.device)
    if m and nout:
        xv, (sxm, sxj), sxc = _float_view(rows)
        ov, (som, sok), soc = _float_view(out)
        bm, bk, bj = 16, min(max(next_power_of_2(nout), 16), 32), 16
        grid = (cdiv(m, bm), cdiv(nout, bk))
        dft_kernel[grid](xv, ov, m, nsum, nout, max(nsig, 1), sxm, sxj, sxc, som, sok, soc,
                         scalar_bits(scale, torch.float64)[0], SIGN=sign, X_COMPLEX=rows.is_complex(),
                         CONJ_IN=conj, HERMITIAN=hermitian, REAL_OUT=real_out, ODT=dtype_code(real),
                         BM=bm, BK=bk, BJ=bj)
    shape[-1] = nout
    return out.view(shape).movedim(-1, dim)


def _check_dtype(t: torch.Tensor, complex_input: bool):
    ok = (_REAL_OF if complex_input else _COMPLEX_OF)
    if t.dtype not in ok:
        raise Unsupported(f"fft of {t.dtype} (the kernels take float32/float64 and complex64/complex128)")


def _norm_dims(dim, ndim):
    return [d % max(ndim, 1) for d in dim]


def _finish(result: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """A contiguous result (or the filled out= tensor)."""
    target = torch.empty(result.shape, dtype=result.dtype, device=result.device) if out is None \
        else resize_out(out, result.shape)
    if result.numel():
        if result.is_complex():
            copy_into(torch.view_as_real(target), torch.view_as_real(result))
        else:
            copy_into(target, result)
    return target


def fft_c2c(self, dim, normalization, forward, *, out=None):
    _check_dtype(self, True)
    dims = _norm_dims(dim, self.dim())
    sign = -1 if forward else 1
    n_total = 1
    for d in dims:
        n_total *= self.shape[d]
    x = self
    for i, d in enumerate(dims):
        last = i == len(dims) - 1
        n = x.shape[d]
        x = _dft(x, d, n, n, sign, _scale(normalization, n_total) if last else 1.0)
    if not dims:
        x = self
    return _finish(x, out)


def fft_r2c(self, dim, normalization, onesided, *, out=None):
    _check_dtype(self, False)
    dims = _norm_dims(dim, self.dim())
    n_total = 1
    for d in dims:
        n_total *= self.shape[d]
    last = dims[-1]
    n = self.shape[last]
    x = _dft(self, last, n // 2 + 1 if onesided else n, n, -1, _scale(normalization, n_total) if len(dims) == 1 else 1.0)
    for i, d in enumerate(dims[:-1]):
        final = i == len(dims) - 2
        x = _dft(x, d, x.shape[d], x.shape[d], -1, _scale(normalization, n_total) if final else 1.0)
    return _finish(x, out)


def fft_c2r(self, dim, normalization, last_dim_size, *, out=None):
    _check_dtype(self, True)
    dims = _norm_dims(dim, self.dim())
    n_total = last_dim_size
    for d in dims[:-1]:
        n_total *= self.shape[d]
    x = self
    for d in dims[:-1]:
        x = _dft(x, d, x.shape[d], x.shape[d], 1, 1.0)
    x = _dft(x, dims[-1], last_dim_size, last_dim_size, 1, _scale(normalization, n_total), hermitian=True,
             real_out=True)
    return _finish(x, out)


def conj_physical_out(self, *, out):
    resize_out(out, self.shape)
    if not self.is_complex():
        return copy_into(out, self)
    src = self._conj() if self.is_conj() else self  # the stored values; a conj bit cancels one negation
    if src.is_neg():
        raise Unsupported("a negative-bit complex view")
    if self.numel():
        sv, ov = torch.view_as_real(src), torch.view_as_real(out)
        copy_into(ov[..., 0], sv[..., 0])
        if self.is_conj():
            copy_into(ov[..., 1], sv[..., 1])
        else:
            launch_pointwise("neg", ov[..., 1], [sv[..., 1]], compute_code(sv.dtype))
    return out


def conj_physical_(self):
    if not self.is_complex():
        return self
    return conj_physical_out(self, out=self)


KERNELS: dict[str, Callable] = {
    "conj_physical.out": conj_physical_out,
    "conj_physical_": conj_physical_,
    "_fft_c2c": fft_c2c,
    "_fft_c2c.out": fft_c2c,
    "_fft_r2c": fft_r2c,
    "_fft_r2c.out": fft_r2c,
    "_fft_c2r": fft_c2r,
    "_fft_c2r.out": fft_c2r,
}


# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
