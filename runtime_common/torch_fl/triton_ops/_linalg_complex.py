"""Complex kernels of the `linalg` family (complex64 / complex128 matrices).

`COMPLEX_KERNELS` maps op names of the `linalg` family of `ops.yaml` to functions with the aten schema's
signature, like `_linalg.KERNELS`; they are called when a tensor argument is complex and
decline (`Unsupported`, before writing anything) complex32, a mix of dtypes, conjugate or
negative-bit outputs, and everything the real kernels decline (side > 64, > 4 batch dims).

Design: the real family's (`_linalg.py`: one program per matrix held in registers, fp64
compute, batch decoding, its helpers imported, not copied). Triton has no complex type: a
matrix is two register blocks (real, imaginary) and the arithmetic is written out. Memory is
reached through `torch.view_as_real`: element strides doubled, the imaginary part at +1. An
input with the lazy conjugate bit is read through its stored values with a `CONJ_*` flag
(loads negate the imaginary part), which also gives the conjugate transposes the algorithms
need (A^H as `A.mT` read conjugated).

Conventions are LAPACK's complex ones:
- LU (zgetrf): pivot = first max of cabs1 = |re| + |im| (izamax), info = first zero pivot.
- Cholesky (zpotrf): A = L L^H, the diagonal's imaginary part ignored, L's diagonal real.
- QR (zgeqrf / zlarfg): H = I - tau v v^H, complex tau, beta = -sign(re alpha) ||(alpha, x)||,
  so R's diagonal is real (possibly negative); tau = 0 only when x = 0 and alpha is real.
  ormqr's `transpose` is the conjugate transpose.
- eigh (zheevd): the diagonal's imaginary part ignored, eigenvalues real, ascending.
- SVD: singular values real, descending.
Singular vectors and eigenvectors are unique up to a unit phase per column (per pair of
columns of U and rows of Vh): these kernels rotate each so that the entry of largest modulus
(the first such) of each eigenvector / each column of U is real and positive. torch's
OpInfos compare only phase-invariant quantities (|U|, |Vh|, U Vh, |V| of eigh), which
LAPACK's vectors and these share.

Kernels: `_cgetrf_kernel` (+ det / slogdet), `_csolve_kernel` (row swaps, lower / upper
substitution, conjugate flags: solve_triangular, lu_solve, solve, inv, cholesky_solve,
cholesky_inverse), `_clu_unpack_kernel`, `_ccholesky_kernel`, `_cqr_kernel`,
`_capply_q_kernel`, `_csvd_kernel` (one-sided Jacobi: each pair is first made real by a
phase, then rotated as in the real kernel), `_ceigh_kernel` (cyclic Jacobi, the same phase
step), `_clstsq_kernel`, `_cldl_kernel` / `_cldl_solve_kernel` (Bunch-Kaufman as zsytf2 /
zsytrs, or zhetf2 / zhetrs for hermitian=True), `_cmatrix_exp_kernel`.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _kernels as K
from . import _launch
from ._common import compute_code, copy_into, dtype_code, fill_into, launch_pointwise
from ._linalg import (_NB, _SWEEPS, _at, _bcast_batch, _block, _boff, _bsizes, _bvec, _check_errors, _col,
                      _margs, _nbatch, _out, _overlaps, _row, _scal_strides, _sign, _square, _vec_strides)

_REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}


# ------------------------------------------------------------------ helpers --
def _check_complex(name, *ts):
    """The one complex dtype of the tensors `ts` (complex64 / complex128), else Unsupported."""
    dt = None
    for t in ts:
        if t.dtype not in _REAL_OF:
            raise Unsupported(f"{name}: dtype {t.dtype} (the complex kernels take complex64/complex128 matrices)")
        if dt is not None and t.dtype != dt:
            raise Unsupported(f"{name}: mixed dtypes {dt} and {t.dtype}")
        if t.is_neg():
            raise Unsupported(f"{name}: a negative-bit complex view")
        dt = t.dtype
    return dt


def _fits(batch, *sides):
    """The block for `sides`, after checking the batch dims too (so a decline comes before any
    out= tensor is resized)."""
    _bsizes(batch)
    return _block(*sides)


def _check_outs(name, *outs):
    """out= tensors must be plain (no lazy conjugate / negative bit): checked before any resize."""
    for t in outs:
        if t is not None and (t.is_conj() or t.is_neg()):
            raise Unsupported(f"{name}: an out= tensor with a conjugate or negative bit")


def _fv(t):
    """(float view of t's stored values, whether they hold conj(t)) for a complex tensor t."""
    if t.is_conj():
        return torch.view_as_real(t._conj()), True
    return torch.view_as_real(t), False


def _cm(t, batch):
    """`_margs` of a complex operand in float elements of its `view_as_real` (strides doubled)."""
    return [2 * s for s in _margs(t, batch)]


def _cvec(t, batch):
    st, last = _vec_strides(t, batch)
    return [2 * s for s in st], 2 * last


def _cscal(t, batch):
    return [2 * s for s in _scal_strides(t, batch)]


def _eye_into(t):
    """t (*, r, c), complex and plain, := the identity."""
    if t.numel() == 0:
        return
    v = torch.view_as_real(t)
    fill_into(v, 0.0)
    fill_into(v.diagonal(0, -3, -2)[..., 0, :], 1.0)


def _copy_of(t):
    """A plain copy of complex t (a conjugate bit resolved)."""
    c = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    if t.numel():
        src, conj = _fv(t)
        dst = torch.view_as_real(c)
        copy_into(dst[..., 0], src[..., 0])
        if conj:
            launch_pointwise("neg", dst[..., 1], [src[..., 1]], compute_code(src.dtype))
        else:
            copy_into(dst[..., 1], src[..., 1])
    return c


# --------------------------------------------------------- device helpers --
@triton.jit
def _cload(ptr, off, mask, CONJ: tl.constexpr):
    re = tl.load(ptr + off, mask=mask, other=0.0).to(tl.float64)
    im = tl.load(ptr + off + 1, mask=mask, other=0.0).to(tl.float64)
    if CONJ:
        im = -im
    return re, im


@triton.jit
def _cstore(ptr, off, re, im, mask, CONJ: tl.constexpr, ODT: tl.constexpr):
    if CONJ:
        im = -im
    tl.store(ptr + off, K._to_odt(re, ODT), mask=mask)
    tl.store(ptr + off + 1, K._to_odt(im, ODT), mask=mask)


@triton.jit
def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


@triton.jit
def _cdiv(ar, ai, br, bi):
    """(ar + i ai) / (br + i bi), Smith's algorithm (no overflow of |b|^2); b must not be 0."""
    big = tl.abs(br) >= tl.abs(bi)
    p = tl.where(big, br, bi)
    q = tl.where(big, bi, br)
    r = q / p
    den = p + q * r
    re = tl.where(big, ar + ai * r, ar * r + ai) / den
    im = tl.where(big, ai - ar * r, ai * r - ar) / den
    return re, im


@triton.jit
def _cabs(re, im):
    # Scaled as hypot: the squares of parts near 1e-160 underflow, and a Jacobi phase
    # conj(a)/|a| computed from such a |a| is no longer of modulus 1 (it then scales a row and
    # column of the matrix: the eigenvalues drifted once the off-diagonal became that small).
    m = tl.maximum(tl.abs(re), tl.abs(im))
    safe = tl.where(m > 0, m, 1.0)
    x = re / safe
    y = im / safe
    return m * tl.sqrt(x * x + y * y)


@triton.jit
def _cswap_rows(Ar, Ai, rows, i, p):
    ri = _row(Ar, rows, i)
    rp = _row(Ar, rows, p)
    Ar = tl.where(rows == i, rp[None, :], tl.where(rows == p, ri[None, :], Ar))
    ri = _row(Ai, rows, i)
    rp = _row(Ai, rows, p)
    Ai = tl.where(rows == i, rp[None, :], tl.where(rows == p, ri[None, :], Ai))
    return Ar, Ai


@triton.jit
def _cswap_cols(Ar, Ai, cols, i, p):
    ci = _col(Ar, cols, i)
    cp = _col(Ar, cols, p)
    Ar = tl.where(cols == i, cp[:, None], tl.where(cols == p, ci[:, None], Ar))
    ci = _col(Ai, cols, i)
    cp = _col(Ai, cols, p)
    Ai = tl.where(cols == i, cp[:, None], tl.where(cols == p, ci[:, None], Ai))
    return Ar, Ai


@triton.jit
def _rot_cols(Xr, Xi, cols, p, q, c, s):
    """Columns p, q of X <- c x_p - s x_q, s x_p + c x_q (c, s real)."""
    pr = _col(Xr, cols, p)
    pi = _col(Xi, cols, p)
    qr = _col(Xr, cols, q)
    qi = _col(Xi, cols, q)
    Xr = tl.where(cols == p, (c * pr - s * qr)[:, None], tl.where(cols == q, (s * pr + c * qr)[:, None], Xr))
    Xi = tl.where(cols == p, (c * pi - s * qi)[:, None], tl.where(cols == q, (s * pi + c * qi)[:, None], Xi))
    return Xr, Xi


@triton.jit
def _rot_rows(Xr, Xi, rows, p, q, c, s):
    """Rows p, q of X <- c x_p - s x_q, s x_p + c x_q (c, s real)."""
    pr = _row(Xr, rows, p)
    pi = _row(Xi, rows, p)
    qr = _row(Xr, rows, q)
    qi = _row(Xi, rows, q)
    Xr = tl.where(rows == p, (c * pr - s * qr)[None, :], tl.where(rows == q, (s * pr + c * qr)[None, :], Xr))
    Xi = tl.where(rows == p, (c * pi - s * qi)[None, :], tl.where(rows == q, (s * pi + c * qi)[None, :], Xi))
    return Xr, Xi


@triton.jit
def _phase_normalise(Pr, Pi, Qr, Qi, rows, BLK: tl.constexpr):
    """Multiply each column of P, and the same column of Q, by the unit phase that makes
    P's entry of largest modulus in that column (the first such) real and positive."""
    mag = Pr * Pr + Pi * Pi
    mx = tl.max(mag, axis=0)
    idx = tl.min(tl.where(mag == mx[None, :], rows, BLK), axis=0)
    er = tl.sum(tl.where(rows == idx[None, :], Pr, 0.0), axis=0)
    ei = tl.sum(tl.where(rows == idx[None, :], Pi, 0.0), axis=0)
    amp = _cabs(er, ei)
    ok = amp > 0.0
    fr = tl.where(ok, er / tl.where(ok, amp, 1.0), 1.0)
    fi = tl.where(ok, -ei / tl.where(ok, amp, 1.0), 0.0)
    Pr, Pi = _cmul(Pr, Pi, fr[None, :], fi[None, :])
    Qr, Qi = _cmul(Qr, Qi, fr[None, :], fi[None, :])
    return Pr, Pi, Qr, Qi


# ------------------------------------------------------------------ LU -----
@triton.jit
def _cgetrf_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, det_ptr, logabs_ptr, m, n,
                   s0, s1, s2, s3,
                   a0, a1, a2, a3, a_r, a_c,
                   l0, l1, l2, l3, l_r, l_c,
                   p0, p1, p2, p3, p_s,
                   i0, i1, i2, i3,
                   d0, d1, d2, d3,
                   e0, e1, e2, e3,
                   CONJ_A: tl.constexpr, DET: tl.constexpr, SLOGDET: tl.constexpr, ODT: tl.constexpr,
                   BLK: tl.constexpr):
    """LU with partial pivoting as zgetrf: pivot = first max of |re| + |im| (izamax)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    mask = (rows < m) & (cols < n)
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c, mask, CONJ_A)
    kk = tl.minimum(m, n)
    info = tl.zeros((), tl.int32)
    neg = tl.zeros((), tl.int32)
    poff = _boff(pid, s0, s1, s2, s3, p0, p1, p2, p3)
    for j in range(0, kk):
        cr = _col(Ar, cols, j)
        ci = _col(Ai, cols, j)
        cand = tl.where((r1 >= j) & (r1 < m), tl.abs(cr) + tl.abs(ci), -1.0)
        mx = tl.max(cand, axis=0)
        p = tl.min(tl.where(cand == mx, r1, BLK), axis=0)
        Ar, Ai = _cswap_rows(Ar, Ai, rows, j, p)
        neg += (p != j).to(tl.int32)
        tl.store(piv_ptr + poff + j * p_s, (p + 1).to(tl.int32))
        cr = _col(Ar, cols, j)
        ci = _col(Ai, cols, j)
        rr = _row(Ar, rows, j)
        ri = _row(Ai, rows, j)
        pr = _at(rr, r1, j)
        pi = _at(ri, r1, j)
        zero = (pr == 0.0) & (pi == 0.0)
        info = tl.where((info == 0) & zero, j + 1, info)
        lr, li = _cdiv(cr, ci, tl.where(zero, 1.0, pr), tl.where(zero, 0.0, pi))
        below = (r1 > j) & (r1 < m)
        lr = tl.where(below, lr, 0.0)
        li = tl.where(below, li, 0.0)
        Ar = tl.where((cols == j) & (rows > j), lr[:, None], Ar)
        Ai = tl.where((cols == j) & (rows > j), li[:, None], Ai)
        ur, ui = _cmul(lr[:, None], li[:, None], rr[None, :], ri[None, :])
        upd = (rows > j) & (cols > j)
        Ar = tl.where(upd, Ar - ur, Ar)
        Ai = tl.where(upd, Ai - ui, Ai)
    tl.store(info_ptr + _boff(pid, s0, s1, s2, s3, i0, i1, i2, i3), info)
    _cstore(lu_ptr, _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c, Ar, Ai, mask,
            False, ODT)
    if DET or SLOGDET:
        dr = tl.sum(tl.where(rows == cols, Ar, 0.0), axis=1)
        di = tl.sum(tl.where(rows == cols, Ai, 0.0), axis=1)
        flip = tl.where(neg % 2 == 1, -1.0, 1.0).to(tl.float64)
        doff = _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3)
        xr = flip
        xi = flip * 0.0
        if DET:
            for j in range(0, n):
                xr, xi = _cmul(xr, xi, _at(dr, r1, j), _at(di, r1, j))
            _cstore(det_ptr, doff, xr, xi, None, False, ODT)
        else:
            valid = r1 < n
            mag = _cabs(dr, di)
            anyzero = tl.sum((valid & (mag == 0.0)).to(tl.int32), axis=0) > 0
            ur = tl.where(mag > 0.0, dr / tl.where(mag > 0.0, mag, 1.0), 0.0)
            ui = tl.where(mag > 0.0, di / tl.where(mag > 0.0, mag, 1.0), 0.0)
            for j in range(0, n):
                xr, xi = _cmul(xr, xi, _at(ur, r1, j), _at(ui, r1, j))
            xr = tl.where(anyzero, 0.0, xr)
            xi = tl.where(anyzero, 0.0, xi)
            la = tl.sum(tl.where(valid, tl.log(mag), 0.0), axis=0)
            _cstore(det_ptr, doff, xr, xi, None, False, ODT)
            tl.store(logabs_ptr + _boff(pid, s0, s1, s2, s3, e0, e1, e2, e3), K._to_odt(la, ODT))


def _getrf(A, LU, pivots, info, det=None, logabs=None):
    """Factor complex A (*, m, n) into LU/pivots/info (already shaped); det / sign+logabs when given."""
    batch = tuple(A.shape[:-2])
    m, n = A.shape[-2], A.shape[-1]
    nb = _nbatch(batch)
    if nb == 0:
        return
    if m == 0 or n == 0:
        fill_into(info, 0)
        if det is not None:
            dv = torch.view_as_real(det)
            fill_into(dv[..., 0], 1.0)
            fill_into(dv[..., 1], 0.0)
        if logabs is not None:
            fill_into(logabs, 0.0)
        return
    blk = _block(m, n)
    av, ca = _fv(A)
    dd = det if det is not None else LU
    la = logabs if logabs is not None else info
    ps, pl = _vec_strides(pivots, batch)
    _cgetrf_kernel[(nb,)](av, torch.view_as_real(LU), pivots, info, torch.view_as_real(dd), la, m, n,
                          *_bsizes(batch), *_cm(A, batch), *_cm(LU, batch), *ps, pl,
                          *_scal_strides(info, batch),
                          *(_cscal(det, batch) if det is not None else [0] * _NB),
                          *(_scal_strides(logabs, batch) if logabs is not None else [0] * _NB),
                          CONJ_A=ca, DET=det is not None and logabs is None, SLOGDET=logabs is not None,
                          ODT=dtype_code(_REAL_OF[A.dtype]), BLK=blk)


def _lu_tmp(A):
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    LU = torch.empty(A.shape, dtype=A.dtype, device=A.device)
    piv = torch.empty(batch + (min(m, n),), dtype=torch.int32, device=A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    return LU, piv, info


def linalg_lu_factor_ex_out(A, *, pivot=True, check_errors=False, LU, pivots, info):
    if A.dim() < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{tuple(A.shape)} instead")
    _check_complex("linalg_lu_factor_ex", A)
    _check_outs("linalg_lu_factor_ex", LU)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    _fits(batch, m, n)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (min(m, n),), torch.int32, A.device)
    info = _out(info, batch, torch.int32, A.device)
    src = _copy_of(A) if _overlaps(LU, A) else A
    _getrf(src, LU, pivots, info)
    if check_errors:
        _check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return LU, pivots, info


def _linalg_det_result(A, *, result, LU, pivots):
    # aten factors A itself for complex A (its A^T shortcut is for real matrices only)
    _square("linalg.det", A)
    _check_complex("linalg.det", A)
    _check_outs("linalg.det", result, LU)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _fits(batch, n)
    result = _out(result, batch, A.dtype, A.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (n,), torch.int32, A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    _getrf(A, LU, pivots, info, det=result)
    return result, LU, pivots


def _linalg_slogdet_sign(A, *, sign, logabsdet, LU, pivots):
    _square("linalg.slogdet", A)
    _check_complex("linalg.slogdet", A)
    _check_outs("linalg.slogdet", sign, LU)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _fits(batch, n)
    sign = _out(sign, batch, A.dtype, A.device)
    logabsdet = _out(logabsdet, batch, _REAL_OF[A.dtype], A.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (n,), torch.int32, A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    _getrf(A, LU, pivots, info, det=sign, logabs=logabsdet)
    return sign, logabsdet, LU, pivots


# ------------------------------------------------------------ lu_unpack ----
@triton.jit
def _clu_unpack_kernel(lu_ptr, piv_ptr, p_ptr, l_ptr, u_ptr, m, n, kk,
                       s0, s1, s2, s3,
                       a0, a1, a2, a3, a_r, a_c,
                       v0, v1, v2, v3, v_s,
                       q0, q1, q2, q3, q_r, q_c,
                       l0, l1, l2, l3, l_r, l_c,
                       u0, u1, u2, u3, u_r, u_c,
                       CONJ_A: tl.constexpr, DATA: tl.constexpr, PIVOTS: tl.constexpr, ODT: tl.constexpr,
                       BLK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    if DATA:
        Ar, Ai = _cload(lu_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                        (rows < m) & (cols < n), CONJ_A)
        loff = _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c
        _cstore(l_ptr, loff, tl.where(rows > cols, Ar, tl.where(rows == cols, 1.0, 0.0)),
                tl.where(rows > cols, Ai, 0.0), (rows < m) & (cols < kk), False, ODT)
        uoff = _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c
        _cstore(u_ptr, uoff, tl.where(rows <= cols, Ar, 0.0), tl.where(rows <= cols, Ai, 0.0),
                (rows < kk) & (cols < n), False, ODT)
    if PIVOTS:
        perm = r1
        voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
        for i in range(0, kk):
            p = tl.load(piv_ptr + voff + i * v_s).to(tl.int32) - 1
            vi = tl.sum(tl.where(r1 == i, perm, 0), axis=0)
            vp = tl.sum(tl.where(r1 == p, perm, 0), axis=0)
            perm = tl.where(r1 == i, vp, tl.where(r1 == p, vi, perm))
        P = tl.where(rows == perm[None, :], 1.0, 0.0)
        _cstore(p_ptr, _boff(pid, s0, s1, s2, s3, q0, q1, q2, q3) + rows * q_r + cols * q_c, P, P * 0.0,
                (rows < m) & (cols < m), False, ODT)


def _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U):
    batch, m, n = tuple(LU_data.shape[:-2]), LU_data.shape[-2], LU_data.shape[-1]
    kk = min(m, n)
    nb = _nbatch(batch)
    if nb == 0 or m == 0:
        return
    blk = _block(m, n)
    ps, pl = _vec_strides(LU_pivots, batch)
    av, ca = _fv(LU_data)
    _clu_unpack_kernel[(nb,)](av, LU_pivots, torch.view_as_real(P), torch.view_as_real(L),
                              torch.view_as_real(U), m, n, kk, *_bsizes(batch),
                              *_cm(LU_data, batch), *ps, pl,
                              *_cm(P if unpack_pivots else None, batch),
                              *_cm(L if unpack_data else None, batch),
                              *_cm(U if unpack_data else None, batch),
                              CONJ_A=ca, DATA=bool(unpack_data), PIVOTS=bool(unpack_pivots),
                              ODT=dtype_code(_REAL_OF[P.dtype]), BLK=blk)


def lu_unpack_out(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, P, L, U):
    _check_complex("lu_unpack", LU_data)
    _check_outs("lu_unpack", P, L, U)
    if LU_pivots.dtype != torch.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                           f"dtype. Note: this function is intended to be used with the output produced by "
                           f"torch.linalg.lu_factor, but got {LU_pivots.dtype}")
    batch, m, n = tuple(LU_data.shape[:-2]), LU_data.shape[-2], LU_data.shape[-1]
    kk = min(m, n)
    dt, dev = LU_data.dtype, LU_data.device
    _fits(batch, m, n)
    P = _out(P, batch + (m, m) if unpack_pivots else (0,), dt, dev)
    L = _out(L, batch + (m, kk) if unpack_data else (0,), dt, dev)
    U = _out(U, batch + (kk, n) if unpack_data else (0,), dt, dev)
    if _overlaps(L, LU_data) or _overlaps(U, LU_data):
        LU_data = _copy_of(LU_data)
    _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U)
    return P, L, U


def linalg_lu_out(A, *, pivot=True, P, L, U):
    if A.dim() < 2:
        raise RuntimeError("linalg.lu: Expected tensor with 2 or more dimensions. Got size: "
                           f"{tuple(A.shape)} instead")
    _check_complex("linalg.lu", A)
    _check_outs("linalg.lu", P, L, U)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    _fits(batch, m, n)
    P = _out(P, batch + (m, m), A.dtype, A.device)
    L = _out(L, batch + (m, kk), A.dtype, A.device)
    U = _out(U, batch + (kk, n), A.dtype, A.device)
    LU, piv, info = _lu_tmp(A)
    _getrf(A, LU, piv, info)
    _lu_unpack(LU, piv, True, True, P, L, U)
    return P, L, U


# ---------------------------------------------------------------- solves ---
@triton.jit
def _ctrsv(Mr, Mi, Xr, Xi, rows, r1, n, UPPER: tl.constexpr, UNIT: tl.constexpr):
    """Substitution with the lower (or upper) triangle of M: rows of X are solved in order."""
    for ii in range(0, n):
        if UPPER:
            i = n - 1 - ii
        else:
            i = ii
        mr = _row(Mr, rows, i)
        mi = _row(Mi, rows, i)
        if UPPER:
            off = r1 > i
        else:
            off = r1 < i
        orr = tl.where(off, mr, 0.0)[:, None]
        oi = tl.where(off, mi, 0.0)[:, None]
        dr = tl.sum(orr * Xr - oi * Xi, axis=0)
        di = tl.sum(orr * Xi + oi * Xr, axis=0)
        xr = _row(Xr, rows, i) - dr
        xi = _row(Xi, rows, i) - di
        if not UNIT:
            xr, xi = _cdiv(xr, xi, _at(mr, r1, i), _at(mi, r1, i))
        Xr = tl.where(rows == i, xr[None, :], Xr)
        Xi = tl.where(rows == i, xi[None, :], Xi)
    return Xr, Xi


@triton.jit
def _csolve_kernel(m_ptr, piv_ptr, b_ptr, x_ptr, n, k,
                   s0, s1, s2, s3,
                   a0, a1, a2, a3, a_r, a_c,
                   v0, v1, v2, v3, v_s,
                   b0, b1, b2, b3, b_r, b_c,
                   x0, x1, x2, x3, x_r, x_c,
                   SYM: tl.constexpr, EYE: tl.constexpr, PIV_FWD: tl.constexpr, PIV_BWD: tl.constexpr,
                   LOWER: tl.constexpr, UNIT_L: tl.constexpr, UPPER: tl.constexpr, UNIT_U: tl.constexpr,
                   CONJ_M: tl.constexpr, CONJ_B: tl.constexpr, CONJ_X: tl.constexpr,
                   ODT: tl.constexpr, BLK: tl.constexpr, BK: tl.constexpr):
    """X = op(M)^-1 B (stored conjugated with CONJ_X): swaps, lower and/or upper substitution."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    Mr, Mi = _cload(m_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < n) & (cols < n), CONJ_M)
    if SYM:  # M's lower triangle L given: the upper one is L^H (cholesky solves)
        Mr = tl.where(rows >= cols, Mr, tl.trans(Mr))
        Mi = tl.where(rows >= cols, Mi, -tl.trans(Mi))
    if EYE:
        Xr = tl.where((rows == kc) & (rows < n), 1.0, 0.0).to(tl.float64)
        Xi = Xr * 0.0
    else:
        Xr, Xi = _cload(b_ptr, _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                        (rows < n) & (kc < k), CONJ_B)
    voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
    if PIV_FWD:
        for i in range(0, n):
            p = tl.load(piv_ptr + voff + i * v_s) - 1
            Xr, Xi = _cswap_rows(Xr, Xi, rows, i, p)
    if LOWER:
        Xr, Xi = _ctrsv(Mr, Mi, Xr, Xi, rows, r1, n, False, UNIT_L)
    if UPPER:
        Xr, Xi = _ctrsv(Mr, Mi, Xr, Xi, rows, r1, n, True, UNIT_U)
    if PIV_BWD:
        for ii in range(0, n):
            i = n - 1 - ii
            p = tl.load(piv_ptr + voff + i * v_s) - 1
            Xr, Xi = _cswap_rows(Xr, Xi, rows, i, p)
    _cstore(x_ptr, _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c, Xr, Xi,
            (rows < n) & (kc < k), CONJ_X, ODT)


def _solve(M, B, X, piv=None, *, conj_m=False, conj_b=False, conj_x=False, sym=False, eye=False,
           piv_fwd=False, piv_bwd=False, lower=False, unit_l=False, upper=False, unit_u=False):
    """X (*, n, k) = op(M)^-1 B with batch dims broadcast; M read conjugated when conj_m, B when
    conj_b, X written conjugated when conj_x (each on top of a tensor's own conjugate bit)."""
    batch = tuple(X.shape[:-2])
    n, k = X.shape[-2], X.shape[-1]
    nb = _nbatch(batch)
    if nb == 0 or n == 0 or k == 0:
        return X
    blk = _block(n)
    bk = _block(k)
    mv, cm = _fv(M)
    xv, cx = _fv(X)
    B = X if eye else B
    bv, cb = _fv(B)
    pv = piv if piv is not None else xv
    ps, pl = _vec_strides(piv, batch) if piv is not None else ([0] * _NB, 0)
    _csolve_kernel[(nb,)](mv, pv, bv, xv, n, k, *_bsizes(batch), *_cm(M, batch), *ps, pl,
                          *_cm(B, batch), *_cm(X, batch),
                          SYM=sym, EYE=eye, PIV_FWD=piv_fwd, PIV_BWD=piv_bwd, LOWER=lower, UNIT_L=unit_l,
                          UPPER=upper, UNIT_U=unit_u, CONJ_M=cm != conj_m, CONJ_B=cb != conj_b,
                          CONJ_X=cx != conj_x, ODT=dtype_code(_REAL_OF[X.dtype]), BLK=blk, BK=bk)
    return X


def _solve_triangular(A, B, upper, left, unitriangular, out):
    _check_complex("linalg.solve_triangular", A, B)
    _check_outs("linalg.solve_triangular", out)
    if A.dim() < 2 or B.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor A must have at least 2 dimensions.")
    _square("linalg.solve_triangular", A)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    batch = _bcast_batch(A, B)
    shape = batch + tuple(B.shape[-2:])
    _fits(batch, n, B.shape[-1] if left else B.shape[-2])
    out = _out(out, shape, B.dtype, B.device)
    if left:
        M, Bv, Xv, up = A, B, out, upper
    else:  # X A = B  <=>  A^T X^T = B^T
        M, Bv, Xv, up = A.mT, B.mT, out.mT, not upper
    if _overlaps(Xv, Bv) or _overlaps(Xv, M):
        tmp = torch.empty(Xv.shape, dtype=Xv.dtype, device=Xv.device)
        _solve(M, Bv, tmp, lower=not up, unit_l=unitriangular, upper=up, unit_u=unitriangular)
        copy_into(torch.view_as_real(Xv), torch.view_as_real(tmp))
    else:
        _solve(M, Bv, Xv, lower=not up, unit_l=unitriangular, upper=up, unit_u=unitriangular)
    return out


def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    return _solve_triangular(self, B, upper, left, unitriangular, None)


def linalg_solve_triangular_out(self, B, *, upper, left=True, unitriangular=False, out):
    return _solve_triangular(self, B, upper, left, unitriangular, out)


def _lu_solve_into(LU, pivots, B, X, op, conj_bx=False):
    """X = op(A)^-1 B for A = P L U given by LU/pivots, op "N" (A), "T" (A^T) or "C" (A^H);
    conj_bx: B read and X written conjugated. X/B (*, n, k) views."""
    if op == "N":
        _solve(LU, B, X, pivots, conj_b=conj_bx, conj_x=conj_bx, piv_fwd=True, lower=True, unit_l=True,
               upper=True, unit_u=False)
    else:  # A^T = U^T L^T P^T (A^H: the same conjugated): lower with U^T, unit upper with L^T, swaps reversed
        _solve(LU.mT, B, X, pivots, conj_m=op == "C", conj_b=conj_bx, conj_x=conj_bx, piv_bwd=True, lower=True,
               unit_l=False, upper=True, unit_u=True)


def linalg_lu_solve_out(LU, pivots, B, *, left=True, adjoint=False, out):
    _check_complex("linalg.lu_solve", LU, B)
    _check_outs("linalg.lu_solve", out)
    if LU.dim() < 2 or B.dim() < 2:
        raise RuntimeError("linalg.lu_solve: Expected LU and B to have at least 2 dimensions")
    _square("linalg.lu_solve", LU)
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({LU.shape[-2]}x{LU.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    if pivots.dtype != torch.int32:
        raise RuntimeError(f"linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32, "
                           f"got {pivots.dtype}")
    batch = _bcast_batch(LU, B)
    _fits(batch, n, B.shape[-1] if left else B.shape[-2])
    out = _out(out, batch + tuple(B.shape[-2:]), B.dtype, B.device)
    piv = pivots.expand(batch + (n,))
    if left:
        Bv, Xv, op, cbx = B, out, "C" if adjoint else "N", False
    elif not adjoint:  # X A = B  <=>  A^T X^T = B^T
        Bv, Xv, op, cbx = B.mT, out.mT, "T", False
    else:  # X A^H = B  <=>  A X^H = B^H
        Bv, Xv, op, cbx = B.mT, out.mT, "N", True
    tmp = torch.empty(Xv.shape, dtype=Xv.dtype, device=Xv.device) if _overlaps(Xv, Bv) or _overlaps(Xv, LU) \
        else Xv
    _lu_solve_into(LU, piv, Bv, tmp, op, cbx)
    if tmp is not Xv:
        copy_into(torch.view_as_real(Xv), torch.view_as_real(tmp))
    return out


def _linalg_solve_ex_result(A, B, *, left=True, check_errors=False, result, LU, pivots, info):
    _check_complex("linalg.solve", A, B)
    _check_outs("linalg.solve", result, LU)
    _square("linalg.solve", A)
    n = A.shape[-1]
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    B2 = B.unsqueeze(-1) if vector else B
    if B2.dim() < 2 or (B2.shape[-2] if left else B2.shape[-1]) != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B2.shape[-2]}x{B2.shape[-1]})")
    batch = _bcast_batch(A, B2)
    abatch = tuple(A.shape[:-2])
    _fits(batch, n, B2.shape[-1] if left else B2.shape[-2])
    rshape = batch + tuple(B2.shape[-2:])
    for o in (LU, result):
        if o is not None and (_overlaps(o, A) or _overlaps(o, B)):
            raise Unsupported("linalg.solve: an out= tensor sharing storage with an input")
    result = _out(result, rshape[:-1] if vector else rshape, B.dtype, B.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, abatch + (n,), torch.int32, A.device)
    info = _out(info, abatch, torch.int32, A.device)
    _getrf(A, LU, pivots, info)  # LU of A itself, as the backward expects
    if check_errors:
        _check_errors(info, "torch.linalg.solve_ex", A.dim() == 2)
    X = result.unsqueeze(-1) if vector else result
    piv = pivots.expand(batch + (n,))
    if left:
        _lu_solve_into(LU, piv, B2, X, "N")
    else:
        _lu_solve_into(LU, piv, B2.mT, X.mT, "T")
    return result, LU, pivots, info


def linalg_inv_ex_inverse(A, *, check_errors=False, inverse, info):
    _check_complex("linalg.inv", A)
    _check_outs("linalg.inv", inverse)
    _square("linalg.inv", A)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _fits(batch, n)
    inverse = _out(inverse, A.shape, A.dtype, A.device)
    info = _out(info, batch, torch.int32, A.device)
    LU, piv, _ = _lu_tmp(A)
    _getrf(A, LU, piv, info)
    if check_errors:
        _check_errors(info, "torch.linalg.inv_ex", A.dim() == 2)
    _solve(LU, None, inverse, piv, eye=True, piv_fwd=True, lower=True, unit_l=True, upper=True)
    return inverse, info


# -------------------------------------------------------------- cholesky ---
@triton.jit
def _ccholesky_kernel(a_ptr, l_ptr, info_ptr, n,
                      s0, s1, s2, s3,
                      a0, a1, a2, a3, a_r, a_c,
                      l0, l1, l2, l3, l_r, l_c,
                      i0, i1, i2, i3,
                      CONJ_A: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """A = L L^H from A's lower triangle as zpotrf: the pivot is the real part of the updated
    diagonal, info = the first one not positive (every update stops there)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    mask = (rows < n) & (cols < n)
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    mask & (rows >= cols), CONJ_A)
    info = tl.zeros((), tl.int32)
    for j in range(0, n):
        cr = _col(Ar, cols, j)
        ci = _col(Ai, cols, j)
        d = _at(cr, r1, j)
        ok = (d > 0.0) & (info == 0)
        info = tl.where((info == 0) & ~(d > 0.0), j + 1, info)
        lim = tl.where(ok, BLK, -1)
        s = tl.sqrt(tl.where(ok, d, 1.0))
        live = (r1 >= j) & (r1 < n)
        lr = tl.where(live, cr / s, 0.0)
        li = tl.where(live & (r1 > j), ci / s, 0.0)
        Ar = tl.where((cols == j) & (rows >= j) & (cols < lim), lr[:, None], Ar)
        Ai = tl.where((cols == j) & (rows >= j) & (cols < lim), li[:, None], Ai)
        # A[r, c] -= l_r conj(l_c)
        ur, ui = _cmul(lr[:, None], li[:, None], lr[None, :], -li[None, :])
        upd = (rows > j) & (cols > j) & (rows >= cols) & (cols < lim)
        Ar = tl.where(upd, Ar - ur, Ar)
        Ai = tl.where(upd, Ai - ui, Ai)
    low = rows >= cols
    _cstore(l_ptr, _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
            tl.where(low, Ar, 0.0), tl.where(low, Ai, 0.0), mask, False, ODT)
    tl.store(info_ptr + _boff(pid, s0, s1, s2, s3, i0, i1, i2, i3), info)


def _cholesky(A, upper, L, info):
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    nb = _nbatch(batch)
    if nb == 0:
        return
    if n == 0:
        fill_into(info, 0)
        return
    blk = _block(n)
    # upper: A = U^H U from the upper triangle; the lower triangle of A^T is that of conj(A) = L L^H,
    # so A = conj(L) L^T and U = L^T: the lower Cholesky of A^T, stored transposed
    Av, Lv = (A.mT, L.mT) if upper else (A, L)
    av, ca = _fv(Av)
    _ccholesky_kernel[(nb,)](av, torch.view_as_real(Lv), info, n, *_bsizes(batch), *_cm(Av, batch),
                             *_cm(Lv, batch), *_scal_strides(info, batch), CONJ_A=ca,
                             ODT=dtype_code(_REAL_OF[A.dtype]), BLK=blk)


def linalg_cholesky_ex_L(self, *, upper=False, check_errors=False, L, info):
    _check_complex("linalg.cholesky", self)
    _check_outs("linalg.cholesky", L)
    _square("linalg.cholesky", self)
    batch = tuple(self.shape[:-2])
    _fits(batch, self.shape[-1])
    L = _out(L, self.shape, self.dtype, self.device)
    info = _out(info, batch, torch.int32, self.device)
    src = _copy_of(self) if _overlaps(L, self) else self
    _cholesky(src, upper, L, info)
    if check_errors:
        _check_errors(info, "torch.linalg.cholesky_ex", self.dim() == 2)
    return L, info


def cholesky(self, upper=False):
    _check_complex("cholesky", self)
    _square("cholesky", self)
    batch = tuple(self.shape[:-2])
    _fits(batch, self.shape[-1])
    L = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    info = torch.empty(batch, dtype=torch.int32, device=self.device)
    _cholesky(self, upper, L, info)
    _check_errors(info, "cholesky", self.dim() == 2)
    return L


def cholesky_inverse(self, upper=False):
    _check_complex("cholesky_inverse", self)
    _square("cholesky_inverse", self)
    _fits(tuple(self.shape[:-2]), self.shape[-1])
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    # (L L^H)^-1: forward with L, back with L^H, on the identity; upper: L = U^H
    if upper:
        _solve(self.mT, None, out, conj_m=True, sym=True, eye=True, lower=True, upper=True)
    else:
        _solve(self, None, out, sym=True, eye=True, lower=True, upper=True)
    return out


def _cholesky_solve_helper(self, A, upper):
    _check_complex("cholesky_solve", self, A)
    batch = _bcast_batch(self, A)
    n = A.shape[-1]
    _fits(batch, n, self.shape[-1])
    out = torch.empty(batch + tuple(self.shape[-2:]), dtype=self.dtype, device=self.device)
    if upper:
        _solve(A.mT, self, out, conj_m=True, sym=True, lower=True, upper=True)
    else:
        _solve(A, self, out, sym=True, lower=True, upper=True)
    return out


# -------------------------------------------------------------- SVD / eigh --
@triton.jit
def _ccomplete_basis(Ur, Ui, rows, cols, r1, start, m):
    """Fill columns start..m-1 of U (its first `start` columns orthonormal, the rest zero) with
    orthonormal vectors: the unit vector e_i least covered so far, orthogonalised twice."""
    for j in range(start, m):
        cover = tl.sum(Ur * Ur + Ui * Ui, axis=1)
        cand = tl.where(r1 < m, 1.0 - cover, -1.0)
        best = tl.max(cand, axis=0)
        i = tl.min(tl.where(cand == best, r1, m), axis=0)
        vr = tl.where(r1 == i, 1.0, 0.0).to(tl.float64)
        vi = vr * 0.0
        for _ in tl.static_range(2):
            # proj = U^H v, v -= U proj
            pr = tl.sum(Ur * vr[:, None] + Ui * vi[:, None], axis=0)
            pi = tl.sum(Ur * vi[:, None] - Ui * vr[:, None], axis=0)
            vr = vr - tl.sum(Ur * pr[None, :] - Ui * pi[None, :], axis=1)
            vi = vi - tl.sum(Ur * pi[None, :] + Ui * pr[None, :], axis=1)
        nrm = tl.sqrt(tl.sum(vr * vr + vi * vi, axis=0))
        Ur = tl.where(cols == j, (vr / nrm)[:, None], Ur)
        Ui = tl.where(cols == j, (vi / nrm)[:, None], Ui)
    return Ur, Ui


@triton.jit
def _csvd_kernel(a_ptr, u_ptr, s_ptr, v_ptr, m, n, ucols,
                 s0, s1, s2, s3,
                 a0, a1, a2, a3, a_r, a_c,
                 u0, u1, u2, u3, u_r, u_c,
                 d0, d1, d2, d3, d_s,
                 v0, v1, v2, v3, v_r, v_c,
                 SWEEPS: tl.constexpr, WANT_UV: tl.constexpr, CONJ_A: tl.constexpr, CONJ_U: tl.constexpr,
                 CONJ_V: tl.constexpr, NORM_V: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """One-sided Jacobi on W = A (m x n, m >= n). For a column pair with g = w_p^H w_q, w_q (and
    v_q) is first multiplied by conj(g)/|g|, which makes g real; then the real rotation.
    S = column norms, U = W / S, V = accumulated transformations. The phase of each pair is
    then fixed: the largest entry of each column of U (NORM_V: of V) real and positive."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    Wr, Wi = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < m) & (cols < n), CONJ_A)
    Vr = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    Vi = Vr * 0.0
    for _ in range(0, SWEEPS):
        for p in range(0, n - 1):
            for q in range(p + 1, n):
                wpr = _col(Wr, cols, p)
                wpi = _col(Wi, cols, p)
                wqr = _col(Wr, cols, q)
                wqi = _col(Wi, cols, q)
                alpha = tl.sum(wpr * wpr + wpi * wpi, axis=0)
                beta = tl.sum(wqr * wqr + wqi * wqi, axis=0)
                gr = tl.sum(wpr * wqr + wpi * wqi, axis=0)
                gi = tl.sum(wpr * wqi - wpi * wqr, axis=0)
                g = _cabs(gr, gi)
                rot = g > 1e-300
                gs = tl.where(rot, g, 1.0)
                er = tl.where(rot, gr / gs, 1.0)
                ei = tl.where(rot, -gi / gs, 0.0)
                wqr, wqi = _cmul(wqr, wqi, er, ei)
                zeta = (beta - alpha) / (2.0 * gs)
                zc = tl.minimum(tl.abs(zeta), 1e150)
                t = _sign(zeta) / (tl.abs(zeta) + tl.sqrt(1.0 + zc * zc))
                c = tl.where(rot, 1.0 / tl.sqrt(1.0 + t * t), 1.0)
                s = tl.where(rot, c * t, 0.0)
                Wr = tl.where(cols == p, (c * wpr - s * wqr)[:, None],
                              tl.where(cols == q, (s * wpr + c * wqr)[:, None], Wr))
                Wi = tl.where(cols == p, (c * wpi - s * wqi)[:, None],
                              tl.where(cols == q, (s * wpi + c * wqi)[:, None], Wi))
                vpr = _col(Vr, cols, p)
                vpi = _col(Vi, cols, p)
                vqr, vqi = _cmul(_col(Vr, cols, q), _col(Vi, cols, q), er, ei)
                Vr = tl.where(cols == p, (c * vpr - s * vqr)[:, None],
                              tl.where(cols == q, (s * vpr + c * vqr)[:, None], Vr))
                Vi = tl.where(cols == p, (c * vpi - s * vqi)[:, None],
                              tl.where(cols == q, (s * vpi + c * vqi)[:, None], Vi))
    sv = tl.where(r1 < n, tl.sqrt(tl.sum(Wr * Wr + Wi * Wi, axis=0)), -1.0)
    for i in range(0, n):  # selection sort, descending (first max)
        cand = tl.where(r1 >= i, sv, -2.0)
        mx = tl.max(cand, axis=0)
        p = tl.min(tl.where(cand == mx, r1, BLK), axis=0)
        si = _at(sv, r1, i)
        sv = tl.where(r1 == i, mx, tl.where(r1 == p, si, sv))
        Wr, Wi = _cswap_cols(Wr, Wi, cols, i, p)
        Vr, Vi = _cswap_cols(Vr, Vi, cols, i, p)
    tl.store(s_ptr + _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3) + r1 * d_s, K._to_odt(sv, ODT), mask=r1 < n)
    if WANT_UV:
        if NORM_V:
            Vr, Vi, Wr, Wi = _phase_normalise(Vr, Vi, Wr, Wi, rows, BLK)
        else:
            Wr, Wi, Vr, Vi = _phase_normalise(Wr, Wi, Vr, Vi, rows, BLK)
        smax = _at(sv, r1, 0)
        good = (sv > smax * 1e-15 * n) & (sv > 0) & (r1 < n)
        ngood = tl.sum(good.to(tl.int32), axis=0)
        inv = tl.where(good, 1.0 / tl.where(good, sv, 1.0), 0.0)[None, :]
        Ur = tl.where(good[None, :], Wr * inv, 0.0)
        Ui = tl.where(good[None, :], Wi * inv, 0.0)
        Ur, Ui = _ccomplete_basis(Ur, Ui, rows, cols, r1, ngood, m)
        _cstore(u_ptr, _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c, Ur, Ui,
                (rows < m) & (cols < ucols), CONJ_U, ODT)
        _cstore(v_ptr, _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c, Vr, Vi,
                (rows < n) & (cols < n), CONJ_V, ODT)


def _linalg_svd_U(A, full_matrices=False, compute_uv=True, *, driver=None, U, S, Vh):
    if A.dim() < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _check_complex("linalg.svd", A)
    _check_outs("linalg.svd", U, Vh)
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    blk = _fits(batch, m, n)
    dt, dev = A.dtype, A.device
    if compute_uv:
        U = _out(U, batch + (m, m if full_matrices else kk), dt, dev)
        Vh = _out(Vh, batch + (n if full_matrices else kk, n), dt, dev)
    else:
        U, Vh = _out(U, (0,), dt, dev), _out(Vh, (0,), dt, dev)
    S = _out(S, batch + (kk,), _REAL_OF[dt], dev)
    nb = _nbatch(batch)
    if nb == 0:
        return U, S, Vh
    if kk == 0:
        if compute_uv and full_matrices:  # the identity of the nonzero side
            _eye_into(U)
            _eye_into(Vh)
        return U, S, Vh
    if compute_uv and any(_overlaps(o, A) for o in (U, S, Vh)):
        A = _copy_of(A)
    # Jacobi works on the tall side: for m < n, A^H = V S U^H (A^H read as A.mT conjugated)
    tall = m >= n
    W = A if tall else A.mT
    mm, nn = (m, n) if tall else (n, m)
    ucols = mm if full_matrices else nn
    wv, cw = _fv(W)
    if compute_uv:
        # tall: U = W-side, Vh^T = conj(V); wide: Vh^T = conj(W-side U'), U = V'
        Uk, Vk = (U, Vh.mT) if tall else (Vh.mT, U)
        cu, cv = (False, True) if tall else (True, False)
        uv, vv = torch.view_as_real(Uk), torch.view_as_real(Vk)
    else:
        Uk = Vk = None
        cu = cv = False
        uv = vv = S
    ss, sl = _vec_strides(S, batch)
    _csvd_kernel[(nb,)](wv, uv, S, vv, mm, nn, ucols, *_bsizes(batch),
                        *_cm(W, batch), *_cm(Uk, batch), *ss, sl, *_cm(Vk, batch),
                        SWEEPS=_SWEEPS, WANT_UV=bool(compute_uv), CONJ_A=cw != (not tall), CONJ_U=cu,
                        CONJ_V=cv, NORM_V=not tall, ODT=dtype_code(_REAL_OF[dt]), BLK=blk)
    return U, S, Vh


@triton.jit
def _ceigh_kernel(a_ptr, w_ptr, v_ptr, n,
                  s0, s1, s2, s3,
                  a0, a1, a2, a3, a_r, a_c,
                  w0, w1, w2, w3, w_s,
                  v0, v1, v2, v3, v_r, v_c,
                  SWEEPS: tl.constexpr, WANT_V: tl.constexpr, CONJ_A: tl.constexpr, ODT: tl.constexpr,
                  BLK: tl.constexpr):
    """Cyclic Jacobi on the Hermitian matrix given by A's lower triangle (the diagonal's
    imaginary part ignored). Per pair (p, q): column q times conj(a_pq)/|a_pq| and row q times
    its conjugate make a_pq real, then the real rotation."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < n) & (cols < n) & (rows >= cols), CONJ_A)
    Ar = tl.where(rows >= cols, Ar, tl.trans(Ar))
    Ai = tl.where(rows > cols, Ai, tl.where(rows == cols, 0.0, -tl.trans(Ai)))
    Vr = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    Vi = Vr * 0.0
    for _ in range(0, SWEEPS):
        for p in range(0, n - 1):
            for q in range(p + 1, n):
                cqr = _col(Ar, cols, q)
                cqi = _col(Ai, cols, q)
                apr = _at(cqr, r1, p)  # a_pq
                api = _at(cqi, r1, p)
                g = _cabs(apr, api)
                rot = g > 1e-300
                gs = tl.where(rot, g, 1.0)
                er = tl.where(rot, apr / gs, 1.0)
                ei = tl.where(rot, -api / gs, 0.0)
                # A <- P^H A P, P = diag(1, .., e at q, ..): column q times e, row q times conj(e)
                cqr, cqi = _cmul(cqr, cqi, er, ei)
                Ar = tl.where(cols == q, cqr[:, None], Ar)
                Ai = tl.where(cols == q, cqi[:, None], Ai)
                rqr, rqi = _cmul(_row(Ar, rows, q), _row(Ai, rows, q), er, -ei)
                Ar = tl.where(rows == q, rqr[None, :], Ar)
                Ai = tl.where(rows == q, rqi[None, :], Ai)
                vqr, vqi = _cmul(_col(Vr, cols, q), _col(Vi, cols, q), er, ei)
                Vr = tl.where(cols == q, vqr[:, None], Vr)
                Vi = tl.where(cols == q, vqi[:, None], Vi)
                app = _at(_col(Ar, cols, p), r1, p)
                aqq = _at(_col(Ar, cols, q), r1, q)
                theta = (aqq - app) / (2.0 * gs)
                tc = tl.minimum(tl.abs(theta), 1e150)
                t = _sign(theta) / (tl.abs(theta) + tl.sqrt(tc * tc + 1.0))
                c = tl.where(rot, 1.0 / tl.sqrt(t * t + 1.0), 1.0)
                s = tl.where(rot, t * c, 0.0)
                # A <- J^T A J with J the real (p, q) rotation [[c, s], [-s, c]]
                Ar, Ai = _rot_cols(Ar, Ai, cols, p, q, c, s)
                Ar, Ai = _rot_rows(Ar, Ai, rows, p, q, c, s)
                pq = ((rows == p) & (cols == q)) | ((rows == q) & (cols == p))
                Ar = tl.where(pq, 0.0, Ar)
                Ai = tl.where(pq | (rows == cols), 0.0, Ai)
                Vr, Vi = _rot_cols(Vr, Vi, cols, p, q, c, s)
    ev = tl.sum(tl.where(rows == cols, Ar, 0.0), axis=1)
    for i in range(0, n):  # ascending (selection sort; first of equal values)
        live = (r1 >= i) & (r1 < n)
        cand = tl.where(live, ev, 1.0e308)
        mn = tl.min(cand, axis=0)
        p = tl.min(tl.where((cand == mn) & live, r1, BLK), axis=0)
        ei = _at(ev, r1, i)
        ev = tl.where(r1 == i, mn, tl.where(r1 == p, ei, ev))
        Vr, Vi = _cswap_cols(Vr, Vi, cols, i, p)
    tl.store(w_ptr + _boff(pid, s0, s1, s2, s3, w0, w1, w2, w3) + r1 * w_s, K._to_odt(ev, ODT), mask=r1 < n)
    if WANT_V:
        Vr, Vi, Qr_, Qi_ = _phase_normalise(Vr, Vi, Vr, Vi, rows, BLK)
        _cstore(v_ptr, _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c, Vr, Vi,
                (rows < n) & (cols < n), False, ODT)


def _linalg_eigh_eigenvalues(A, UPLO="L", compute_v=True, *, eigenvalues, eigenvectors):
    _check_complex("linalg.eigh", A)
    _check_outs("linalg.eigh", eigenvectors)
    _square("linalg.eigh", A)
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    blk = _fits(batch, n)
    if compute_v and eigenvectors is not None and _overlaps(eigenvectors, A):
        A = _copy_of(A)
    eigenvalues = _out(eigenvalues, batch + (n,), _REAL_OF[A.dtype], A.device)
    eigenvectors = _out(eigenvectors, A.shape if compute_v else (0,), A.dtype, A.device)
    nb = _nbatch(batch)
    if nb == 0 or n == 0:
        return eigenvalues, eigenvectors
    # the upper triangle of a Hermitian A is the lower one of A^H (A.mT read conjugated)
    up = UPLO in ("U", "u")
    Av = A.mT if up else A
    av, ca = _fv(Av)
    V = eigenvectors if compute_v else None
    ws, wl = _vec_strides(eigenvalues, batch)
    _ceigh_kernel[(nb,)](av, eigenvalues, eigenvalues if V is None else torch.view_as_real(V), n,
                         *_bsizes(batch), *_cm(Av, batch), *ws, wl, *_cm(V, batch),
                         SWEEPS=_SWEEPS, WANT_V=bool(compute_v), CONJ_A=ca != up,
                         ODT=dtype_code(_REAL_OF[A.dtype]), BLK=blk)
    return eigenvalues, eigenvectors


# -------------------------------------------------------------------- QR ---
@triton.jit
def _cqr_kernel(a_ptr, q_ptr, r_ptr, tau_ptr, m, n, qcols,
                s0, s1, s2, s3,
                a0, a1, a2, a3, a_r, a_c,
                q0, q1, q2, q3, q_r, q_c,
                r0, r1_, r2, r3, r_r, r_c,
                t0, t1, t2, t3, t_s,
                CONJ_A: tl.constexpr, RMODE: tl.constexpr, WANT_Q: tl.constexpr, ODT: tl.constexpr,
                BLK: tl.constexpr):
    """Householder QR as zgeqrf (zlarfg: beta = -sign(re alpha) ||(alpha, x)||, tau = (beta - alpha)
    / beta, v = x / (alpha - beta); H = I - tau v v^H, H^H applied to the trailing columns).
    RMODE 0: R = triu rows < qcols (linalg_qr); 1: geqrf's packed a and tau."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < m) & (cols < n), CONJ_A)
    kk = tl.minimum(m, n)
    Vr = tl.zeros((BLK, BLK), tl.float64)
    Vi = tl.zeros((BLK, BLK), tl.float64)
    tr_ = tl.zeros((BLK,), tl.float64)
    ti_ = tl.zeros((BLK,), tl.float64)
    for j in range(0, kk):
        cr = _col(Ar, cols, j)
        ci = _col(Ai, cols, j)
        ar = _at(cr, r1, j)
        ai = _at(ci, r1, j)
        below = (r1 > j) & (r1 < m)
        xr = tl.where(below, cr, 0.0)
        xi = tl.where(below, ci, 0.0)
        xn2 = tl.sum(xr * xr + xi * xi, axis=0)
        nz = (xn2 > 0.0) | (ai != 0.0)
        beta = -_sign(ar) * tl.sqrt(ar * ar + ai * ai + xn2)
        bs = tl.where(nz, beta, 1.0)
        taur = tl.where(nz, (beta - ar) / bs, 0.0)
        taui = tl.where(nz, -ai / bs, 0.0)
        dr = tl.where(nz, ar - beta, 1.0)
        di = tl.where(nz, ai, 0.0)
        vr, vi = _cdiv(xr, xi, dr, di)
        vr = tl.where(r1 == j, 1.0, tl.where(nz, vr, 0.0))
        vi = tl.where(r1 == j, 0.0, tl.where(nz, vi, 0.0))
        # A <- H^H A on the columns right of j: A -= conj(tau) v (v^H A)
        wr = tl.sum(vr[:, None] * Ar + vi[:, None] * Ai, axis=0)
        wi = tl.sum(vr[:, None] * Ai - vi[:, None] * Ar, axis=0)
        wr, wi = _cmul(wr, wi, taur, -taui)
        ur, ui = _cmul(vr[:, None], vi[:, None], wr[None, :], wi[None, :])
        Ar = tl.where(cols > j, Ar - ur, Ar)
        Ai = tl.where(cols > j, Ai - ui, Ai)
        Ar = tl.where((cols == j) & (rows == j), tl.where(nz, beta, ar), Ar)
        Ai = tl.where((cols == j) & (rows == j), tl.where(nz, 0.0, ai), Ai)
        Ar = tl.where((cols == j) & (rows > j), vr[:, None], Ar)
        Ai = tl.where((cols == j) & (rows > j), vi[:, None], Ai)
        Vr = tl.where(cols == j, vr[:, None], Vr)
        Vi = tl.where(cols == j, vi[:, None], Vi)
        tr_ = tl.where(r1 == j, taur, tr_)
        ti_ = tl.where(r1 == j, taui, ti_)
    roff = _boff(pid, s0, s1, s2, s3, r0, r1_, r2, r3)
    if RMODE == 0:
        up = rows <= cols
        _cstore(r_ptr, roff + rows * r_r + cols * r_c, tl.where(up, Ar, 0.0), tl.where(up, Ai, 0.0),
                (rows < qcols) & (cols < n), False, ODT)
    else:
        _cstore(r_ptr, roff + rows * r_r + cols * r_c, Ar, Ai, (rows < m) & (cols < n), False, ODT)
        _cstore(tau_ptr, _boff(pid, s0, s1, s2, s3, t0, t1, t2, t3) + r1 * t_s, tr_, ti_, r1 < kk, False, ODT)
    if WANT_Q:
        # Q = H_0 ... H_{k-1} on the first qcols columns of I (zungqr: backward accumulation)
        Qr = tl.where((rows == cols) & (rows < m), 1.0, 0.0).to(tl.float64)
        Qi = Qr * 0.0
        for jj in range(0, kk):
            j = kk - 1 - jj
            vr = _col(Vr, cols, j)
            vi = _col(Vi, cols, j)
            wr = tl.sum(vr[:, None] * Qr + vi[:, None] * Qi, axis=0)
            wi = tl.sum(vr[:, None] * Qi - vi[:, None] * Qr, axis=0)
            wr, wi = _cmul(wr, wi, _at(tr_, r1, j), _at(ti_, r1, j))
            ur, ui = _cmul(vr[:, None], vi[:, None], wr[None, :], wi[None, :])
            Qr = Qr - ur
            Qi = Qi - ui
        _cstore(q_ptr, _boff(pid, s0, s1, s2, s3, q0, q1, q2, q3) + rows * q_r + cols * q_c, Qr, Qi,
                (rows < m) & (cols < qcols), False, ODT)


def linalg_qr_out(A, mode="reduced", *, Q, R):
    if A.dim() < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           f"(default), 'r', or 'complete'")
    _check_complex("linalg.qr", A)
    _check_outs("linalg.qr", Q, R)
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    qc = m if mode == "complete" else kk
    blk = _fits(batch, m, n)
    if (Q is not None and _overlaps(Q, A)) or (R is not None and _overlaps(R, A)):
        A = _copy_of(A)
    Q = _out(Q, batch + (m, qc) if mode != "r" else (0,), A.dtype, A.device)
    R = _out(R, batch + (qc, n), A.dtype, A.device)
    nb = _nbatch(batch)
    if nb == 0 or (m == 0 and n == 0):
        return Q, R
    want_q = mode != "r"
    av, ca = _fv(A)
    rv = torch.view_as_real(R)
    _cqr_kernel[(nb,)](av, torch.view_as_real(Q) if want_q else rv, rv, rv, m, n, qc, *_bsizes(batch),
                       *_cm(A, batch), *_cm(Q if want_q else None, batch), *_cm(R, batch),
                       0, 0, 0, 0, 0, CONJ_A=ca, RMODE=0, WANT_Q=want_q, ODT=dtype_code(_REAL_OF[A.dtype]),
                       BLK=blk)
    return Q, R


def geqrf(self):
    if self.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _check_complex("geqrf", self)
    batch, m, n = tuple(self.shape[:-2]), self.shape[-2], self.shape[-1]
    kk = min(m, n)
    blk = _fits(batch, m, n)
    a = torch.empty(batch + (n, m), dtype=self.dtype, device=self.device).mT  # batched column-major, as aten
    tau = torch.empty(batch + (kk,), dtype=self.dtype, device=self.device)
    nb = _nbatch(batch)
    if nb == 0 or m == 0 or n == 0:
        return a, tau
    ts, tl_ = _cvec(tau, batch)
    sv, cs = _fv(self)
    av = torch.view_as_real(a)
    _cqr_kernel[(nb,)](sv, av, av, torch.view_as_real(tau), m, n, kk, *_bsizes(batch),
                       *_cm(self, batch), *([0] * _NB), 0, 0, *_cm(a, batch), *ts, tl_,
                       CONJ_A=cs, RMODE=1, WANT_Q=False, ODT=dtype_code(_REAL_OF[self.dtype]), BLK=blk)
    return a, tau


# ------------------------------------------------- Householder products ---
@triton.jit
def _capply_q_kernel(v_ptr, tau_ptr, c_ptr, x_ptr, m, ncols, kk, nv,
                     s0, s1, s2, s3,
                     a0, a1, a2, a3, a_r, a_c,
                     t0, t1, t2, t3, t_s,
                     c0, c1, c2, c3, c_r, c_c,
                     x0, x1, x2, x3, x_r, x_c,
                     CONJ_V: tl.constexpr, CONJ_T: tl.constexpr, CONJ_C: tl.constexpr, CONJ_X: tl.constexpr,
                     TRANS: tl.constexpr, EYE: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr,
                     BK: tl.constexpr):
    """X = Q C (or Q^H C) for Q = H_0 ... H_{k-1}, H_j = I - tau_j v_j v_j^H (geqrf's layout);
    EYE: C = the first `ncols` columns of the m x m identity (zungqr)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    Vr, Vi = _cload(v_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < m) & (cols < nv) & (rows > cols), CONJ_V)
    Vr = tl.where((rows == cols) & (rows < m), 1.0, Vr)
    tr_, ti_ = _cload(tau_ptr, _boff(pid, s0, s1, s2, s3, t0, t1, t2, t3) + r1 * t_s, r1 < kk, CONJ_T)
    if EYE:
        Xr = tl.where((rows == kc) & (rows < m), 1.0, 0.0).to(tl.float64)
        Xi = Xr * 0.0
    else:
        Xr, Xi = _cload(c_ptr, _boff(pid, s0, s1, s2, s3, c0, c1, c2, c3) + rows * c_r + kc * c_c,
                        (rows < m) & (kc < ncols), CONJ_C)
    for jj in range(0, kk):
        if TRANS:
            j = jj  # Q^H C = H_{k-1}^H ... H_0^H C: H_0^H (tau conjugated) first
        else:
            j = kk - 1 - jj
        vr = tl.where(r1 >= j, _col(Vr, cols, j), 0.0)
        vi = tl.where(r1 >= j, _col(Vi, cols, j), 0.0)
        tr = _at(tr_, r1, j)
        ti = _at(ti_, r1, j)
        if TRANS:
            ti = -ti
        wr = tl.sum(vr[:, None] * Xr + vi[:, None] * Xi, axis=0)
        wi = tl.sum(vr[:, None] * Xi - vi[:, None] * Xr, axis=0)
        wr, wi = _cmul(wr, wi, tr, ti)
        ur, ui = _cmul(vr[:, None], vi[:, None], wr[None, :], wi[None, :])
        Xr = Xr - ur
        Xi = Xi - ui
    _cstore(x_ptr, _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c, Xr, Xi,
            (rows < m) & (kc < ncols), CONJ_X, ODT)


def _apply_q(V, tau, C, X, trans, eye, conj_cx=False):
    """X (*, m, c) = Q C / Q^H C (C the identity when eye; conj_cx: C read and X written
    conjugated); V (*, m, nv), tau (*, k)."""
    batch = tuple(X.shape[:-2])
    m, ncols = X.shape[-2], X.shape[-1]
    nb = _nbatch(batch)
    if nb == 0 or m == 0 or ncols == 0:
        return X
    kk = tau.shape[-1]
    blk = _block(m, V.shape[-1])
    bk = _block(ncols)
    ts, tl_ = _cvec(tau, batch)
    C = X if eye else C
    vv, cv = _fv(V)
    tv, ct = _fv(tau)
    cc_, ccf = _fv(C)
    xv, cx = _fv(X)
    _capply_q_kernel[(nb,)](vv, tv, cc_, xv, m, ncols, kk, V.shape[-1], *_bsizes(batch), *_cm(V, batch),
                            *ts, tl_, *_cm(C, batch), *_cm(X, batch), CONJ_V=cv, CONJ_T=ct,
                            CONJ_C=ccf != conj_cx, CONJ_X=cx != conj_cx, TRANS=trans, EYE=eye,
                            ODT=dtype_code(_REAL_OF[X.dtype]), BLK=blk, BK=bk)
    return X


def _householder_product(input, tau, out):
    _check_complex("linalg.householder_product", input, tau)
    _check_outs("linalg.householder_product", out)
    if input.dim() < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    m, n = input.shape[-2], input.shape[-1]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal "
                           "to input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal "
                           "to tau.shape[-1]")
    _fits(tuple(input.shape[:-2]), m, n)
    if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise Unsupported("linalg.householder_product: batch dims of input and tau differ")
    out = _out(out, input.shape, input.dtype, input.device)
    clash = _overlaps(out, input) or _overlaps(out, tau)
    tmp = torch.empty(input.shape, dtype=input.dtype, device=input.device) if clash else out
    _apply_q(input, tau, None, tmp, False, True)
    if tmp is not out:
        copy_into(torch.view_as_real(out), torch.view_as_real(tmp))
    return out


def linalg_householder_product(input, tau):
    return _householder_product(input, tau, None)


def linalg_householder_product_out(input, tau, *, out):
    return _householder_product(input, tau, out)


def _ormqr(self, input2, input3, left, transpose, out):
    _check_complex("ormqr", self, input2, input3)
    _check_outs("ormqr", out)
    if self.dim() < 2 or input3.dim() < 2:
        raise RuntimeError("torch.ormqr: input must have at least 2 dimensions.")
    nq = input3.shape[-2] if left else input3.shape[-1]
    if self.shape[-2] != nq:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    if input2.shape[-1] > self.shape[-1]:
        raise RuntimeError("torch.ormqr: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if not (tuple(self.shape[:-2]) == tuple(input2.shape[:-1]) == tuple(input3.shape[:-2])):
        raise Unsupported("ormqr: batch dims of input, tau and other differ")
    _fits(tuple(self.shape[:-2]), nq, self.shape[-1], input3.shape[-1] if left else input3.shape[-2])
    out = _out(out, input3.shape, input3.dtype, input3.device)
    # C Q = (Q^H C^H)^H and C Q^H = (Q C^H)^H: the right product is a left one on the adjoints
    C, X, trans, cj = (input3, out, transpose, False) if left else (input3.mT, out.mT, not transpose, True)
    clash = _overlaps(out, input3) or _overlaps(out, self) or _overlaps(out, input2)
    tmp = torch.empty(X.shape, dtype=X.dtype, device=X.device) if clash else X
    _apply_q(self, input2, C, tmp, trans, False, cj)
    if tmp is not X:
        copy_into(torch.view_as_real(X), torch.view_as_real(tmp))
    return out


def ormqr(self, input2, input3, left=True, transpose=False):
    return _ormqr(self, input2, input3, left, transpose, None)


def ormqr_out(self, input2, input3, left=True, transpose=False, *, out):
    return _ormqr(self, input2, input3, left, transpose, out)


# ----------------------------------------------------------------- lstsq ---
@triton.jit
def _clstsq_kernel(u_ptr, s_ptr, v_ptr, b_ptr, x_ptr, res_ptr, rank_ptr, m, n, kk, nrhs, rcond,
                   s0, s1, s2, s3,
                   u0, u1, u2, u3, u_r, u_c,
                   d0, d1, d2, d3, d_s,
                   v0, v1, v2, v3, v_r, v_c,
                   b0, b1, b2, b3, b_r, b_c,
                   x0, x1, x2, x3, x_r, x_c,
                   e0, e1, e2, e3, e_s,
                   k0, k1, k2, k3,
                   CONJ_B: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr, BK: tl.constexpr):
    """Minimum-norm least squares from A = U S V^H: X = sum_{s_j > rcond s_0} v_j (u_j^H B) / s_j;
    residuals = ||B - U_r U_r^H B||^2 per column (real)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    Ur, Ui = _cload(u_ptr, _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c,
                    (rows < m) & (cols < kk), False)
    Hr, Hi = _cload(v_ptr, _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c,
                    (rows < kk) & (cols < n), False)
    sv = tl.load(s_ptr + _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3) + r1 * d_s, mask=r1 < kk,
                 other=0.0).to(tl.float64)
    Br, Bi = _cload(b_ptr, _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                    (rows < m) & (kc < nrhs), CONJ_B)
    tol = rcond * _at(sv, r1, 0)
    Xr = tl.zeros((BLK, BK), tl.float64)
    Xi = tl.zeros((BLK, BK), tl.float64)
    Rr = Br
    Ri = Bi
    rank = tl.zeros((), tl.int64)
    for j in range(0, kk):
        s = _at(sv, r1, j)
        keep = s > tol
        rank += keep.to(tl.int64)
        ur = _col(Ur, cols, j)[:, None]
        ui = _col(Ui, cols, j)[:, None]
        yr = tl.sum(ur * Br + ui * Bi, axis=0)  # u^H B
        yi = tl.sum(ur * Bi - ui * Br, axis=0)
        yr = tl.where(keep, yr, 0.0)
        yi = tl.where(keep, yi, 0.0)
        inv = tl.where(keep, 1.0 / tl.where(keep, s, 1.0), 0.0)
        vr = _row(Hr, rows, j)[:, None]  # column j of V = conj(row j of Vh)
        vi = -_row(Hi, rows, j)[:, None]
        pr, pi = _cmul(vr, vi, (yr * inv)[None, :], (yi * inv)[None, :])
        Xr += pr
        Xi += pi
        qr, qi = _cmul(ur, ui, yr[None, :], yi[None, :])
        Rr -= qr
        Ri -= qi
    _cstore(x_ptr, _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c, Xr, Xi,
            (rows < n) & (kc < nrhs), False, ODT)
    kr = tl.arange(0, BK)
    res = tl.sum(tl.where(rows < m, Rr * Rr + Ri * Ri, 0.0), axis=0)
    tl.store(res_ptr + _boff(pid, s0, s1, s2, s3, e0, e1, e2, e3) + kr * e_s, K._to_odt(res, ODT), mask=kr < nrhs)
    tl.store(rank_ptr + _boff(pid, s0, s1, s2, s3, k0, k1, k2, k3), rank)


def linalg_lstsq_out(self, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    if self.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    _check_complex("torch.linalg.lstsq", self, b)
    _check_outs("torch.linalg.lstsq", solution)
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    m, n = self.shape[-2], self.shape[-1]
    vector = b.dim() == self.dim() - 1
    B = b.unsqueeze(-1) if vector else b
    if B.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    nrhs = B.shape[-1]
    batch = _bcast_batch(self, B)
    kk = min(m, n)
    _fits(batch, m, n, nrhs)
    nb = _nbatch(batch)
    if nb and (kk == 0 or nrhs == 0):
        raise Unsupported("torch.linalg.lstsq of an empty matrix or right-hand side")
    dt, dev = self.dtype, self.device
    rdt = _REAL_OF[dt]
    if solution is not None and (_overlaps(solution, self) or _overlaps(solution, b)):
        raise Unsupported("torch.linalg.lstsq: an out= tensor sharing storage with an input")
    rc = float(rcond) if rcond is not None and rcond >= 0 else torch.finfo(rdt).eps * max(m, n)
    solution = _out(solution, batch + ((n,) if vector else (n, nrhs)), dt, dev)
    want_rank = driver != "gels"
    want_sv = driver in ("gelsd", "gelss")
    rank = _out(rank, batch if want_rank else (0,), torch.int64, dev)
    singular_values = _out(singular_values, batch + (kk,) if want_sv else (0,), rdt, dev)
    res_all = torch.empty(batch + (nrhs,), dtype=rdt, device=dev)
    rk = rank if want_rank else torch.empty(batch, dtype=torch.int64, device=dev)
    if nb:
        U = torch.empty(batch + (m, kk), dtype=dt, device=dev)
        S = singular_values if want_sv else torch.empty(batch + (kk,), dtype=rdt, device=dev)
        Vh = torch.empty(batch + (kk, n), dtype=dt, device=dev)
        _linalg_svd_U(self.expand(batch + (m, n)), False, True, U=U, S=S, Vh=Vh)
        X = solution.unsqueeze(-1) if vector else solution
        Bx = B.expand(batch + (m, nrhs))
        bv, cb = _fv(Bx)
        ss, sl = _vec_strides(S, batch)
        es, el = _vec_strides(res_all, batch)
        _clstsq_kernel[(nb,)](torch.view_as_real(U), S, torch.view_as_real(Vh), bv, torch.view_as_real(X),
                              res_all, rk, m, n, kk, nrhs, rc, *_bsizes(batch),
                              *_cm(U, batch), *ss, sl, *_cm(Vh, batch), *_cm(Bx, batch), *_cm(X, batch),
                              *es, el, *_scal_strides(rk, batch), CONJ_B=cb, ODT=dtype_code(rdt),
                              BLK=_block(m, n), BK=_block(nrhs))
    # residuals as aten: only for m > n, not for gelsy, and (gelss/gelsd) when every A has full rank
    has_res = m > n and driver != "gelsy" and (driver == "gels" or nb == 0 or bool((rk == n).all()))
    if has_res:
        residuals = _out(residuals, res_all.shape, rdt, dev)
        copy_into(residuals, res_all)
    else:
        residuals = _out(residuals, (0,), rdt, dev)
    return solution, residuals, rank, singular_values


# ------------------------------------------------------------------- LDL ---
@triton.jit
def _cldl_kernel(a_ptr, ld_ptr, piv_ptr, info_ptr, n,
                 s0, s1, s2, s3,
                 a0, a1, a2, a3, a_r, a_c,
                 l0, l1, l2, l3, l_r, l_c,
                 p0, p1, p2, p3, p_s,
                 i0, i1, i2, i3,
                 CONJ_A: tl.constexpr, HERM: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """Bunch-Kaufman of the lower triangle step for step as LAPACK zsytf2 (A = L D L^T, complex
    symmetric) or zhetf2 (HERM: A = L D L^H, the diagonal real): pivot sizes chosen with
    cabs1 = |re| + |im| (|re| for a Hermitian diagonal), interchanges inside the trailing
    matrix, kept whole (symmetric / Hermitian) in registers, pivots as the real kernel's."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < n) & (cols < n) & (rows >= cols), CONJ_A)
    Ar = tl.where(rows >= cols, Ar, tl.trans(Ar))
    if HERM:
        Ai = tl.where(rows > cols, Ai, tl.where(rows == cols, 0.0, -tl.trans(Ai)))
        hs = -1.0  # the upper triangle holds conjugates
    else:
        Ai = tl.where(rows >= cols, Ai, tl.trans(Ai))
        hs = 1.0
    alpha = (1.0 + tl.sqrt(17.0)) / 8.0
    info = tl.zeros((), tl.int32)
    pv = tl.zeros((BLK,), tl.int32)
    k = tl.zeros((), tl.int32)
    for _ in range(0, n):
        act = k < n
        ckr = _col(Ar, cols, k)
        cki = _col(Ai, cols, k)
        if HERM:
            absakk = tl.abs(_at(ckr, r1, k))
        else:
            absakk = tl.abs(_at(ckr, r1, k)) + tl.abs(_at(cki, r1, k))
        below = tl.where((r1 > k) & (r1 < n), tl.abs(ckr) + tl.abs(cki), -1.0)
        colmax = tl.maximum(tl.max(below, axis=0), 0.0)
        imax = tl.min(tl.where(below == tl.max(below, axis=0), r1, BLK), axis=0)
        zero = (tl.maximum(absakk, colmax) == 0.0) | (absakk != absakk)
        info = tl.where(act & zero & (info == 0), k + 1, info)
        cimr = _col(Ar, cols, imax)
        cimi = _col(Ai, cols, imax)
        rowmax = tl.max(tl.where((r1 >= k) & (r1 < n) & (r1 != imax), tl.abs(cimr) + tl.abs(cimi), 0.0), axis=0)
        if HERM:
            absimax = tl.abs(_at(cimr, r1, imax))
        else:
            absimax = tl.abs(_at(cimr, r1, imax)) + tl.abs(_at(cimi, r1, imax))
        one_k = zero | (absakk >= alpha * colmax) | (absakk * rowmax >= alpha * colmax * colmax)
        one_imax = (~one_k) & (absimax >= alpha * rowmax)
        step2 = (~one_k) & (~one_imax)
        kp = tl.where(one_k, k, imax)
        kk = tl.where(step2, k + 1, k)
        # symmetric interchange of kk and kp inside the trailing matrix (rows/cols >= k): P A P^T
        lo = tl.where(act, k, BLK)
        rsel = (cols >= lo) & ((rows == kk) | (rows == kp))
        Br, Bi = _cswap_rows(Ar, Ai, rows, kk, kp)
        Ar = tl.where(rsel, Br, Ar)
        Ai = tl.where(rsel, Bi, Ai)
        csel = (rows >= lo) & ((cols == kk) | (cols == kp))
        Br, Bi = _cswap_cols(Ar, Ai, cols, kk, kp)
        Ar = tl.where(csel, Br, Ar)
        Ai = tl.where(csel, Bi, Ai)
        # elimination (skipped for a zero column)
        lo1 = tl.where(act & ~zero & ~step2, k, BLK)
        lo2 = tl.where(act & ~zero & step2, k, BLK)
        ckr = _col(Ar, cols, k)
        cki = _col(Ai, cols, k)
        ck1r = _col(Ar, cols, k + 1)
        ck1i = _col(Ai, cols, k + 1)
        akr = _at(ckr, r1, k)
        aki = _at(cki, r1, k)
        xr = tl.where((r1 > k) & (r1 < n), ckr, 0.0)
        xi = tl.where((r1 > k) & (r1 < n), cki, 0.0)
        # 1x1: l = x / a_kk; A -= l x^T (x^H); zsytf2's zsyr / zhetf2's zher
        if HERM:
            d11r = 1.0 / tl.where(akr != 0.0, akr, 1.0)
            d11i = d11r * 0.0
        else:
            nzk = (akr != 0.0) | (aki != 0.0)
            d11r, d11i = _cdiv(1.0, 0.0, tl.where(nzk, akr, 1.0), tl.where(nzk, aki, 0.0))
        lr, li = _cmul(xr, xi, d11r, d11i)
        ur, ui = _cmul(lr[:, None], li[:, None], xr[None, :], hs * xi[None, :])
        t1 = (rows > lo1) & (cols > lo1)
        Ar = tl.where(t1, Ar - ur, Ar)
        Ai = tl.where(t1, Ai - ui, Ai)
        Ar = tl.where((cols == lo1) & (rows > lo1), lr[:, None], Ar)
        Ai = tl.where((cols == lo1) & (rows > lo1), li[:, None], Ai)
        Ar = tl.where((rows == lo1) & (cols > lo1), lr[None, :], Ar)
        Ai = tl.where((rows == lo1) & (cols > lo1), hs * li[None, :], Ai)
        # 2x2 with D = [[a, b'], [b, c]], b = A[k+1, k]
        br = _at(ckr, r1, k + 1)
        bi = _at(cki, r1, k + 1)
        nzb = (br != 0.0) | (bi != 0.0)
        br = tl.where(nzb, br, 1.0)
        bi = tl.where(nzb, bi, 0.0)
        cr = _at(ck1r, r1, k + 1)
        ci = _at(ck1i, r1, k + 1)
        y0r = tl.where((r1 > k + 1) & (r1 < n), ckr, 0.0)
        y0i = tl.where((r1 > k + 1) & (r1 < n), cki, 0.0)
        y1r = tl.where((r1 > k + 1) & (r1 < n), ck1r, 0.0)
        y1i = tl.where((r1 > k + 1) & (r1 < n), ck1i, 0.0)
        if HERM:  # zhetf2: d = |b|, d11 = c / d, d22 = a / d, d21 = b / d (real c, a)
            d = _cabs(br, bi)
            e11 = cr / d
            e22 = akr / d
            tt = 1.0 / (e11 * e22 - 1.0)
            f = tt / d
            g21r = br / d
            g21i = bi / d
            ar_, ai_ = _cmul(g21r, g21i, y1r, y1i)
            wkr = f * (e11 * y0r - ar_)
            wki = f * (e11 * y0i - ai_)
            ar_, ai_ = _cmul(g21r, -g21i, y0r, y0i)
            wk1r = f * (e22 * y1r - ar_)
            wk1i = f * (e22 * y1i - ai_)
        else:  # zsytf2: d11 = c / b, d22 = a / b, t = 1 / (d11 d22 - 1), d21 = t / b
            e11r, e11i = _cdiv(cr, ci, br, bi)
            e22r, e22i = _cdiv(akr, aki, br, bi)
            pr_, pi_ = _cmul(e11r, e11i, e22r, e22i)
            tr, ti = _cdiv(1.0, 0.0, pr_ - 1.0, pi_)
            fr, fi = _cdiv(tr, ti, br, bi)
            ar_, ai_ = _cmul(e11r, e11i, y0r, y0i)
            wkr, wki = _cmul(fr, fi, ar_ - y1r, ai_ - y1i)
            ar_, ai_ = _cmul(e22r, e22i, y1r, y1i)
            wk1r, wk1i = _cmul(fr, fi, ar_ - y0r, ai_ - y0i)
        # A -= y0 wk^T + y1 wkp1^T (^H when HERM)
        ur, ui = _cmul(y0r[:, None], y0i[:, None], wkr[None, :], hs * wki[None, :])
        vr_, vi_ = _cmul(y1r[:, None], y1i[:, None], wk1r[None, :], hs * wk1i[None, :])
        t2 = (rows > lo2 + 1) & (cols > lo2 + 1)
        Ar = tl.where(t2, Ar - ur - vr_, Ar)
        Ai = tl.where(t2, Ai - ui - vi_, Ai)
        Ar = tl.where((cols == lo2) & (rows > lo2 + 1), wkr[:, None], Ar)
        Ai = tl.where((cols == lo2) & (rows > lo2 + 1), wki[:, None], Ai)
        Ar = tl.where((cols == lo2 + 1) & (rows > lo2 + 1), wk1r[:, None], Ar)
        Ai = tl.where((cols == lo2 + 1) & (rows > lo2 + 1), wk1i[:, None], Ai)
        Ar = tl.where((rows == lo2) & (cols > lo2 + 1), wkr[None, :], Ar)
        Ai = tl.where((rows == lo2) & (cols > lo2 + 1), hs * wki[None, :], Ai)
        Ar = tl.where((rows == lo2 + 1) & (cols > lo2 + 1), wk1r[None, :], Ar)
        Ai = tl.where((rows == lo2 + 1) & (cols > lo2 + 1), hs * wk1i[None, :], Ai)
        if HERM:
            Ai = tl.where(rows == cols, 0.0, Ai)
        pval = tl.where(step2, -(kp + 1), kp + 1)
        k2 = tl.where(step2, k + 1, -1)
        pv = tl.where((r1 == k) | (r1 == k2), pval, pv)
        k = tl.where(act, tl.where(step2, k + 2, k + 1), k)
    low = rows >= cols
    _cstore(ld_ptr, _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
            tl.where(low, Ar, 0.0), tl.where(low, Ai, 0.0), (rows < n) & (cols < n), False, ODT)
    tl.store(piv_ptr + _boff(pid, s0, s1, s2, s3, p0, p1, p2, p3) + r1 * p_s, pv, mask=r1 < n)
    tl.store(info_ptr + _boff(pid, s0, s1, s2, s3, i0, i1, i2, i3), info)


def linalg_ldl_factor_ex_out(self, *, hermitian=False, check_errors=False, LD, pivots, info):
    _check_complex("torch.linalg.ldl_factor_ex", self)
    _check_outs("torch.linalg.ldl_factor_ex", LD)
    _square("torch.linalg.ldl_factor_ex", self)
    batch, n = tuple(self.shape[:-2]), self.shape[-1]
    blk = _fits(batch, n)
    LD = _out(LD, self.shape, self.dtype, self.device)
    pivots = _out(pivots, batch + (n,), torch.int32, self.device)
    info = _out(info, batch, torch.int32, self.device)
    nb = _nbatch(batch)
    if nb and n == 0:
        fill_into(info, 0)
    elif nb:
        src = _copy_of(self) if _overlaps(LD, self) else self
        sv, cs = _fv(src)
        ps, pl = _vec_strides(pivots, batch)
        _cldl_kernel[(nb,)](sv, torch.view_as_real(LD), pivots, info, n, *_bsizes(batch), *_cm(src, batch),
                            *_cm(LD, batch), *ps, pl, *_scal_strides(info, batch), CONJ_A=cs,
                            HERM=bool(hermitian), ODT=dtype_code(_REAL_OF[self.dtype]), BLK=blk)
    if check_errors:
        _check_errors(info, "torch.linalg.ldl_factor_ex", self.dim() == 2)
    return LD, pivots, info


@triton.jit
def _cldl_solve_kernel(ld_ptr, piv_ptr, b_ptr, x_ptr, n, k_,
                       s0, s1, s2, s3,
                       a0, a1, a2, a3, a_r, a_c,
                       v0, v1, v2, v3, v_s,
                       b0, b1, b2, b3, b_r, b_c,
                       x0, x1, x2, x3, x_r, x_c,
                       CONJ_L: tl.constexpr, CONJ_B: tl.constexpr, HERM: tl.constexpr, ODT: tl.constexpr,
                       BLK: tl.constexpr, BK: tl.constexpr):
    """A X = B from the Bunch-Kaufman factors, as LAPACK zsytrs (L D L^T) / zhetrs (HERM: L D L^H)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    Lr, Li = _cload(ld_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    (rows < n) & (cols < n) & (rows >= cols), CONJ_L)
    Xr, Xi = _cload(b_ptr, _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                    (rows < n) & (kc < k_), CONJ_B)
    if HERM:
        hs = -1.0
    else:
        hs = 1.0
    voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
    k = tl.zeros((), tl.int32)
    for _ in range(0, n):  # forward: L and D, swaps first
        act = k < n
        p = tl.load(piv_ptr + voff + tl.minimum(k, n - 1) * v_s)
        two = act & (p < 0)
        kp = tl.where(p > 0, p - 1, -p - 1)
        ckr = _col(Lr, cols, k)
        cki = _col(Li, cols, k)
        ck1r = _col(Lr, cols, k + 1)
        ck1i = _col(Li, cols, k + 1)
        # 1x1 pivot
        X1r, X1i = _cswap_rows(Xr, Xi, rows, k, kp)
        xkr = _row(X1r, rows, k)
        xki = _row(X1i, rows, k)
        ur, ui = _cmul(ckr[:, None], cki[:, None], xkr[None, :], xki[None, :])
        X1r = tl.where(rows > k, X1r - ur, X1r)
        X1i = tl.where(rows > k, X1i - ui, X1i)
        akr = _at(ckr, r1, k)
        aki = _at(cki, r1, k)
        if HERM:
            aki = aki * 0.0
        nzk = (akr != 0.0) | (aki != 0.0)
        qr, qi = _cdiv(xkr, xki, tl.where(nzk, akr, 1.0), tl.where(nzk, aki, 0.0))
        X1r = tl.where(rows == k, qr[None, :], X1r)
        X1i = tl.where(rows == k, qi[None, :], X1i)
        # 2x2 pivot
        X2r, X2i = _cswap_rows(Xr, Xi, rows, k + 1, kp)
        xkr = _row(X2r, rows, k)
        xki = _row(X2i, rows, k)
        xk1r = _row(X2r, rows, k + 1)
        xk1i = _row(X2i, rows, k + 1)
        ur, ui = _cmul(ckr[:, None], cki[:, None], xkr[None, :], xki[None, :])
        vr_, vi_ = _cmul(ck1r[:, None], ck1i[:, None], xk1r[None, :], xk1i[None, :])
        X2r = tl.where(rows > k + 1, X2r - ur - vr_, X2r)
        X2i = tl.where(rows > k + 1, X2i - ui - vi_, X2i)
        br = _at(ckr, r1, k + 1)
        bi = _at(cki, r1, k + 1)
        nzb = (br != 0.0) | (bi != 0.0)
        br = tl.where(nzb, br, 1.0)
        bi = tl.where(nzb, bi, 0.0)
        # D = [[a, b'], [b, c]]: akm1 = a / b', ak = c / b, bkm1 = x_k / b', bk = x_k1 / b (b' = b or conj(b))
        akm1r, akm1i = _cdiv(akr, aki, br, hs * bi)
        ckk = _at(ck1r, r1, k + 1)
        ckki = _at(ck1i, r1, k + 1)
        if HERM:
            ckki = ckki * 0.0
        akr2, aki2 = _cdiv(ckk, ckki, br, bi)
        pr_, pi_ = _cmul(akm1r, akm1i, akr2, aki2)
        denr = pr_ - 1.0
        deni = pi_
        bkm1r, bkm1i = _cdiv(xkr, xki, br, hs * bi)
        bkr, bki = _cdiv(xk1r, xk1i, br, bi)
        tr, ti = _cmul(akr2, aki2, bkm1r, bkm1i)
        nr, ni = _cdiv(tr - bkr, ti - bki, denr, deni)
        X2r = tl.where(rows == k, nr[None, :], X2r)
        X2i = tl.where(rows == k, ni[None, :], X2i)
        tr, ti = _cmul(akm1r, akm1i, bkr, bki)
        nr, ni = _cdiv(tr - bkm1r, ti - bkm1i, denr, deni)
        X2r = tl.where(rows == k + 1, nr[None, :], X2r)
        X2i = tl.where(rows == k + 1, ni[None, :], X2i)
        tw = _bvec(two, r1)[:, None]
        ac = _bvec(act, r1)[:, None]
        Xr = tl.where(tw, X2r, tl.where(ac, X1r, Xr))
        Xi = tl.where(tw, X2i, tl.where(ac, X1i, Xi))
        k = tl.where(act, tl.where(two, k + 2, k + 1), k)
    k = n - 1
    for _ in range(0, n):  # backward: L^T (L^H), swaps last
        act = k >= 0
        p = tl.load(piv_ptr + voff + tl.maximum(k, 0) * v_s)
        two = act & (p < 0)
        kp = tl.where(p > 0, p - 1, -p - 1)
        ckr = _col(Lr, cols, k)[:, None]
        cki = hs * _col(Li, cols, k)[:, None]
        ckm1r = _col(Lr, cols, k - 1)[:, None]
        ckm1i = hs * _col(Li, cols, k - 1)[:, None]
        tr_ = tl.where(rows > k, Xr, 0.0)
        ti_ = tl.where(rows > k, Xi, 0.0)
        X1r = tl.where(rows == k, Xr - tl.sum(ckr * tr_ - cki * ti_, axis=0)[None, :], Xr)
        X1i = tl.where(rows == k, Xi - tl.sum(ckr * ti_ + cki * tr_, axis=0)[None, :], Xi)
        X2r = tl.where(rows == k - 1, X1r - tl.sum(ckm1r * tr_ - ckm1i * ti_, axis=0)[None, :], X1r)
        X2i = tl.where(rows == k - 1, X1i - tl.sum(ckm1r * ti_ + ckm1i * tr_, axis=0)[None, :], X1i)
        X1r, X1i = _cswap_rows(X1r, X1i, rows, k, kp)
        X2r, X2i = _cswap_rows(X2r, X2i, rows, k, kp)
        tw = _bvec(two, r1)[:, None]
        ac = _bvec(act, r1)[:, None]
        Xr = tl.where(tw, X2r, tl.where(ac, X1r, Xr))
        Xi = tl.where(tw, X2i, tl.where(ac, X1i, Xi))
        k = tl.where(act, tl.where(two, k - 2, k - 1), k)
    _cstore(x_ptr, _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c, Xr, Xi,
            (rows < n) & (kc < k_), False, ODT)


def linalg_ldl_solve_out(LD, pivots, B, *, hermitian=False, out):
    _check_complex("torch.linalg.ldl_solve", LD, B)
    _check_outs("torch.linalg.ldl_solve", out)
    _square("torch.linalg.ldl_solve", LD)
    if B.dim() < 2:
        raise RuntimeError("torch.linalg.ldl_solve: Expected B to have at least 2 dimensions")
    if pivots.dtype != torch.int32:
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected pivots to be integers. Got {pivots.dtype}")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"torch.linalg.ldl_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    batch = _bcast_batch(LD, B)
    _fits(batch, n, B.shape[-1])
    out = _out(out, batch + tuple(B.shape[-2:]), B.dtype, B.device)
    nb, nrhs = _nbatch(batch), B.shape[-1]
    if nb == 0 or n == 0 or nrhs == 0:
        return out
    clash = _overlaps(out, B) or _overlaps(out, LD)
    X = torch.empty(out.shape, dtype=out.dtype, device=out.device) if clash else out
    piv = pivots.expand(batch + (n,))
    ps, pl = _vec_strides(piv, batch)
    lv, cl = _fv(LD)
    bv, cb = _fv(B)
    _cldl_solve_kernel[(nb,)](lv, piv, bv, torch.view_as_real(X), n, nrhs, *_bsizes(batch), *_cm(LD, batch),
                              *ps, pl, *_cm(B, batch), *_cm(X, batch), CONJ_L=cl, CONJ_B=cb,
                              HERM=bool(hermitian), ODT=dtype_code(_REAL_OF[out.dtype]), BLK=_block(n),
                              BK=_block(nrhs))
    if X is not out:
        copy_into(torch.view_as_real(out), torch.view_as_real(X))
    return out


# ------------------------------------------------------------ matrix_exp --
@triton.jit
def _cmatmul_reg(Ar, Ai, Br, Bi, cols, rows, n):
    """A @ B for two complex register blocks (n x n used): sum of n rank-1 products."""
    Cr = tl.zeros(Ar.shape, tl.float64)
    Ci = tl.zeros(Ar.shape, tl.float64)
    for j in range(0, n):
        ar = _col(Ar, cols, j)[:, None]
        ai = _col(Ai, cols, j)[:, None]
        br = _row(Br, rows, j)[None, :]
        bi = _row(Bi, rows, j)[None, :]
        Cr += ar * br - ai * bi
        Ci += ar * bi + ai * br
    return Cr, Ci


@triton.jit
def _cmatrix_exp_kernel(a_ptr, o_ptr, n,
                        s0, s1, s2, s3,
                        a0, a1, a2, a3, a_r, a_c,
                        o0, o1, o2, o3, o_r, o_c,
                        CONJ_A: tl.constexpr, DEGREE: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """Scaling and squaring in fp64 as the real kernel: A / 2^s with 1-norm <= 1/2, Taylor of
    degree DEGREE (Horner), squared s times."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    msk = (rows < n) & (cols < n)
    Ar, Ai = _cload(a_ptr, _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c, msk, CONJ_A)
    norm = tl.max(tl.sum(_cabs(Ar, Ai), axis=0), axis=0)
    sc = tl.where(norm > 0.5, tl.ceil(tl.log2(tl.where(norm > 0.5, norm, 1.0) / 0.5)), 0.0)
    sc = tl.minimum(sc, 1100.0)  # inf / nan norms: bounded loop, the result stays non-finite
    f = tl.exp2(-sc)
    Ar = Ar * f
    Ai = Ai * f
    eye = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    Er = eye
    Ei = eye * 0.0
    for i in tl.static_range(DEGREE, 0, -1):
        Pr, Pi = _cmatmul_reg(Ar, Ai, Er, Ei, cols, rows, n)
        Er = eye + Pr * (1.0 / i)
        Ei = Pi * (1.0 / i)
    for _ in range(0, sc.to(tl.int32)):
        Er, Ei = _cmatmul_reg(Er, Ei, Er, Ei, cols, rows, n)
    _cstore(o_ptr, _boff(pid, s0, s1, s2, s3, o0, o1, o2, o3) + rows * o_r + cols * o_c, Er, Ei, msk, False, ODT)


def linalg_matrix_exp(self):
    _check_complex("linalg.matrix_exp", self)
    _square("linalg.matrix_exp", self)
    batch, n = tuple(self.shape[:-2]), self.shape[-1]
    blk = _fits(batch, n)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    nb = _nbatch(batch)
    if nb == 0 or n == 0:
        return out
    av, ca = _fv(self)
    _cmatrix_exp_kernel[(nb,)](av, torch.view_as_real(out), n, *_bsizes(batch), *_cm(self, batch),
                               *_cm(out, batch), CONJ_A=ca, DEGREE=18, ODT=dtype_code(_REAL_OF[self.dtype]),
                               BLK=blk)
    return out


COMPLEX_KERNELS: dict[str, Callable] = {
    "_linalg_svd.U": _linalg_svd_U,
    "linalg_inv_ex.inverse": linalg_inv_ex_inverse,
    "_linalg_solve_ex.result": _linalg_solve_ex_result,
    "linalg_lu_factor_ex.out": linalg_lu_factor_ex_out,
    "linalg_lu_solve.out": linalg_lu_solve_out,
    "linalg_solve_triangular": linalg_solve_triangular,
    "linalg_solve_triangular.out": linalg_solve_triangular_out,
    "_linalg_det.result": _linalg_det_result,
    "_linalg_slogdet.sign": _linalg_slogdet_sign,
    "linalg_cholesky_ex.L": linalg_cholesky_ex_L,
    "cholesky": cholesky,
    "cholesky_inverse": cholesky_inverse,
    "_cholesky_solve_helper": _cholesky_solve_helper,
    "_linalg_eigh.eigenvalues": _linalg_eigh_eigenvalues,
    "linalg_qr.out": linalg_qr_out,
    "geqrf": geqrf,
    "ormqr": ormqr,
    "ormqr.out": ormqr_out,
    "linalg_householder_product": linalg_householder_product,
    "linalg_householder_product.out": linalg_householder_product_out,
    "lu_unpack.out": lu_unpack_out,
    "linalg_lu.out": linalg_lu_out,
    "linalg_lstsq.out": linalg_lstsq_out,
    "linalg_ldl_factor_ex.out": linalg_ldl_factor_ex_out,
    "linalg_ldl_solve.out": linalg_ldl_solve_out,
    "linalg_matrix_exp": linalg_matrix_exp,
}


# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
