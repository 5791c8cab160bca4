"""Triton kernels of the `linalg` family (dense linear algebra on small matrices).

`KERNELS` maps each name of the `linalg` family of `ops.yaml` to a function with the aten schema's
signature (see the package README).

Design: one program per matrix. A matrix (padded to a power-of-two block, at most
`_MAXN`) lives in registers as a 2-d block; a column is picked with
`tl.sum(tl.where(cols == k, A, 0), axis=1)`, and updates are masked rank-1 or
row/column replacements. Batch dims (up to 4, broadcast by stride 0) are decoded
from the program id. Everything is computed in fp64 (fp32 inputs too: the blocks
are tiny, and the results then differ from LAPACK's only by LAPACK's own rounding).

- `_getrf_kernel`: LU with partial pivoting exactly as LAPACK getrf (first max |a|
  of the column, zero pivot -> info = its 1-based index, elimination continues),
  optionally det / sign + log|det| from the diagonal and the pivot parity.
- `_solve_kernel`: X = op(M)^-1 B by row swaps (from LU pivots, forward or
  reversed), a lower and/or an upper triangular substitution; serves
  solve_triangular, lu_solve, solve, inv, cholesky_solve and cholesky_inverse.
- `_lu_unpack_kernel`, `_cholesky_kernel` (right-looking, info as potrf),
  `_qr_kernel` (Householder as geqrf/orgqr: R's diagonal may be negative),
  `_svd_kernel` (one-sided Jacobi; U completed to a basis by Gram-Schmidt on
  unit vectors), `_eigh_kernel` (cyclic Jacobi).
- `_apply_q_kernel` (Q C / Q^T C from geqrf reflectors: householder_product, ormqr),
  `_ldl_kernel` / `_ldl_solve_kernel` (Bunch-Kaufman as dsytf2 / dsytrs),
  `_lstsq_kernel` (minimum-norm solution from the SVD), `_matrix_exp_kernel`
  (scaling and squaring), `_cross_kernel`.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _kernels as K
from . import _launch
from ._common import cdiv, compute_code, contig, copy_into, dtype_code, fill_into, next_power_of_2, resize_out

_MAXN = 64  # largest matrix side handled by one program
_NB = 4  # batch dims decoded in the kernels
_SWEEPS = 12  # Jacobi sweeps (quadratic convergence: n <= 64 needs far fewer in fp64)


# ------------------------------------------------------------------ helpers --
def _check_float(name, *ts):
    for t in ts:
        if t.dtype not in (torch.float32, torch.float64):
            raise Unsupported(f"{name}: dtype {t.dtype} (only float32/float64 matrices)")


def _block(*sizes):
    n = max([1, *sizes])
    if n > _MAXN:
        raise Unsupported(f"matrix side {n} exceeds the one-program limit {_MAXN}")
    return max(next_power_of_2(n), 2)


def _bstrides(t, batch):
    """Batch strides of `t` (its last two dims are the matrix) broadcast to `batch`, padded to _NB."""
    nb = t.dim() - 2
    st = [0] * (len(batch) - nb) + [t.stride(i) if t.shape[i] != 1 else 0 for i in range(nb)]
    if len(st) > _NB:
        raise Unsupported(f"more than {_NB} batch dims")
    return [0] * (_NB - len(st)) + st


def _margs(t, batch):
    """Kernel args of a (*batch, r, c) matrix operand: 4 batch strides, row and column stride
    (all 0 for an output that is not computed)."""
    if t is None:
        return [0] * (_NB + 2)
    return [*_bstrides(t, batch), t.stride(-2), t.stride(-1)]


def _bsizes(batch):
    if len(batch) > _NB:
        raise Unsupported(f"more than {_NB} batch dims")
    return [1] * (_NB - len(batch)) + list(batch)


def _nbatch(batch):
    n = 1
    for s in batch:
        n *= s
    return n


def _vec_strides(t, batch):
    """Batch strides of a (*batch, n) tensor, padded, plus its last stride."""
    nb = t.dim() - 1
    st = [0] * (len(batch) - nb) + [t.stride(i) if t.shape[i] != 1 else 0 for i in range(nb)]
    return [0] * (_NB - len(st)) + st, (t.stride(-1) if t.dim() else 0)


def _scal_strides(t, batch):
    st = [0] * (len(batch) - t.dim()) + [t.stride(i) if t.shape[i] != 1 else 0 for i in range(t.dim())]
    return [0] * (_NB - len(st)) + st


def _out(out, shape, dtype, device):
    if out is None:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    if out.dtype != dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {dtype}, but got {out.dtype} instead")
    return resize_out(out, shape)


def _check_errors(info, api, is_matrix):
    torch.ops.aten._linalg_check_errors(info, api, is_matrix=is_matrix)


def _square(name, A):
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


# --------------------------------------------------------- device helpers --
@triton.jit
def _boff(pid, s0, s1, s2, s3, t0, t1, t2, t3):
    """Offset of batch element `pid` (row-major over sizes s0..s3) for strides t0..t3."""
    i3 = pid % s3
    r = pid // s3
    i2 = r % s2
    r = r // s2
    i1 = r % s1
    i0 = r // s1
    return i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3


@triton.jit
def _col(A, cols, k):
    return tl.sum(tl.where(cols == k, A, 0.0), axis=1)


@triton.jit
def _row(A, rows, k):
    return tl.sum(tl.where(rows == k, A, 0.0), axis=0)


@triton.jit
def _at(v, idx, k):
    return tl.sum(tl.where(idx == k, v, 0.0), axis=0)


@triton.jit
def _swap_rows(A, rows, i, p):
    ri = _row(A, rows, i)
    rp = _row(A, rows, p)
    return tl.where(rows == i, rp[None, :], tl.where(rows == p, ri[None, :], A))


@triton.jit
def _swap_cols(A, cols, i, p):
    ci = _col(A, cols, i)
    cp = _col(A, cols, p)
    return tl.where(cols == i, cp[:, None], tl.where(cols == p, ci[:, None], A))


@triton.jit
def _sign(x):
    return tl.where(x < 0, -1.0, 1.0)


# ------------------------------------------------------------------ LU -----
@triton.jit
def _getrf_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, det_ptr, logabs_ptr, m, n,
                  s0, s1, s2, s3,
                  a0, a1, a2, a3, a_r, a_c,
                  l0, l1, l2, l3, l_r, l_c,
                  p0, p1, p2, p3, p_s,
                  i0, i1, i2, i3,
                  d0, d1, d2, d3,
                  DET: tl.constexpr, SLOGDET: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    mask = (rows < m) & (cols < n)
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=mask, other=0.0).to(tl.float64)
    kk = tl.minimum(m, n)
    info = tl.zeros((), tl.int32)
    neg = tl.zeros((), tl.int32)  # parity of the row interchanges
    poff = _boff(pid, s0, s1, s2, s3, p0, p1, p2, p3)
    for j in range(0, kk):
        cj = _col(A, cols, j)
        cand = tl.where((r1 >= j) & (r1 < m), tl.abs(cj), -1.0)
        mx = tl.max(cand, axis=0)
        p = tl.min(tl.where(cand == mx, r1, BLK), axis=0)  # first index of the max, as idamax
        A = _swap_rows(A, rows, j, p)
        neg += (p != j).to(tl.int32)
        tl.store(piv_ptr + poff + j * p_s, (p + 1).to(tl.int32))
        cj = _col(A, cols, j)
        rj = _row(A, rows, j)
        piv = _at(rj, r1, j)
        info = tl.where((info == 0) & (piv == 0.0), j + 1, info)
        # a zero pivot means a zero column below it: no scaling, and the update is a no-op
        lcol = tl.where((r1 > j) & (r1 < m), cj / tl.where(piv != 0.0, piv, 1.0), 0.0)
        A = tl.where((cols == j) & (rows > j), lcol[:, None], A)
        A = tl.where((rows > j) & (cols > j), A - lcol[:, None] * rj[None, :], A)
    tl.store(lu_ptr + _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
             K._to_odt(A, ODT), mask=mask)
    tl.store(info_ptr + _boff(pid, s0, s1, s2, s3, i0, i1, i2, i3), info)
    if DET or SLOGDET:
        diag = tl.sum(tl.where(rows == cols, A, 0.0), axis=1)
        doff = _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3)
        flip = tl.where(neg % 2 == 1, -1.0, 1.0)
        if DET:
            det = tl.reduce(tl.where(r1 < n, diag, 1.0), 0, _mul_combine) * flip
            tl.store(det_ptr + doff, K._to_odt(det, ODT))
        else:
            valid = r1 < n
            nneg = tl.sum((valid & (diag < 0)).to(tl.int32), axis=0)
            anyzero = tl.sum((valid & (diag == 0)).to(tl.int32), axis=0) > 0
            sgn = tl.where(nneg % 2 == 1, -1.0, 1.0) * flip
            sgn = tl.where(anyzero, 0.0, sgn)
            la = tl.sum(tl.where(valid, tl.log(tl.abs(diag)), 0.0), axis=0)
            tl.store(det_ptr + doff, K._to_odt(sgn, ODT))
            tl.store(logabs_ptr + doff, K._to_odt(la, ODT))


@triton.jit
def _mul_combine(a, b):
    return a * b


def _getrf(A, LU, pivots, info, det=None, logabs=None):
    """Factor A (*, m, n) into LU/pivots/info (already shaped); det / sign+logabs when given."""
    batch = tuple(A.shape[:-2])
    m, n = A.shape[-2], A.shape[-1]
    nb = _nbatch(batch)
    if nb == 0:
        return
    if m == 0 or n == 0:
        fill_into(info, 0)
        if det is not None:
            fill_into(det, 1.0)
        if logabs is not None:
            fill_into(logabs, 0.0)
        return
    blk = _block(m, n)
    dd = det if det is not None else info
    la = logabs if logabs is not None else dd
    ps, pl = _vec_strides(pivots, batch)
    _getrf_kernel[(nb,)](A, LU, pivots, info, dd, la, m, n, *_bsizes(batch),
                         *_margs(A, batch),
                         *_margs(LU, batch),
                         *ps, pl, *_scal_strides(info, batch), *_scal_strides(dd, batch),
                         DET=det is not None and logabs is None, SLOGDET=logabs is not None,
                         ODT=dtype_code(A.dtype), BLK=blk)


def linalg_lu_factor_ex_out(A, *, pivot=True, check_errors=False, LU, pivots, info):
    if A.dim() < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{tuple(A.shape)} instead")
    _check_float("linalg_lu_factor_ex", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    _block(m, n)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (min(m, n),), torch.int32, A.device)
    info = _out(info, batch, torch.int32, A.device)
    _getrf(A, LU, pivots, info)
    if check_errors:
        _check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return LU, pivots, info


def _lu_tmp(A):
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    LU = torch.empty(A.shape, dtype=A.dtype, device=A.device)
    piv = torch.empty(batch + (min(m, n),), dtype=torch.int32, device=A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    return LU, piv, info


def _det_operand(A):
    """aten factors A^T when A is contiguous (and real): its LU is then F-contiguous without a copy,
    and the det/slogdet backward solves with `adjoint` chosen by the same test."""
    return A.mT if A.is_contiguous() else A


def _linalg_det_result(A, *, result, LU, pivots):
    _square("linalg.det", A)
    _check_float("linalg.det", A)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _block(n)
    result = _out(result, batch, A.dtype, A.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (n,), torch.int32, A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    _getrf(_det_operand(A), LU, pivots, info, det=result)
    return result, LU, pivots


def _linalg_slogdet_sign(A, *, sign, logabsdet, LU, pivots):
    _square("linalg.slogdet", A)
    _check_float("linalg.slogdet", A)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _block(n)
    sign = _out(sign, batch, A.dtype, A.device)
    logabsdet = _out(logabsdet, batch, A.dtype, A.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, batch + (n,), torch.int32, A.device)
    info = torch.empty(batch, dtype=torch.int32, device=A.device)
    _getrf(_det_operand(A), LU, pivots, info, det=sign, logabs=logabsdet)
    return sign, logabsdet, LU, pivots


# ------------------------------------------------------------ lu_unpack ----
@triton.jit
def _lu_unpack_kernel(lu_ptr, piv_ptr, p_ptr, l_ptr, u_ptr, m, n, kk,
                      s0, s1, s2, s3,
                      a0, a1, a2, a3, a_r, a_c,
                      v0, v1, v2, v3, v_s,
                      q0, q1, q2, q3, q_r, q_c,
                      l0, l1, l2, l3, l_r, l_c,
                      u0, u1, u2, u3, u_r, u_c,
                      DATA: tl.constexpr, PIVOTS: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    if DATA:
        A = tl.load(lu_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                    mask=(rows < m) & (cols < n), other=0.0)
        L = tl.where(rows > cols, A, tl.where(rows == cols, 1.0, 0.0).to(A.dtype))
        tl.store(l_ptr + _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
                 L, mask=(rows < m) & (cols < kk))
        U = tl.where(rows <= cols, A, 0.0)
        tl.store(u_ptr + _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c,
                 U, mask=(rows < kk) & (cols < n))
    if PIVOTS:
        # perm[i]: the row of A that ends up in row i of P^T A = L U
        perm = r1
        voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
        for i in range(0, kk):
            p = tl.load(piv_ptr + voff + i * v_s).to(tl.int32) - 1
            vi = tl.sum(tl.where(r1 == i, perm, 0), axis=0)
            vp = tl.sum(tl.where(r1 == p, perm, 0), axis=0)
            perm = tl.where(r1 == i, vp, tl.where(r1 == p, vi, perm))
        P = tl.where(rows == perm[None, :], 1.0, 0.0)
        tl.store(p_ptr + _boff(pid, s0, s1, s2, s3, q0, q1, q2, q3) + rows * q_r + cols * q_c,
                 K._to_odt(P, ODT), mask=(rows < m) & (cols < m))


def _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U):
    batch, m, n = tuple(LU_data.shape[:-2]), LU_data.shape[-2], LU_data.shape[-1]
    kk = min(m, n)
    nb = _nbatch(batch)
    if nb == 0 or m == 0:
        return
    blk = _block(m, n)
    ps, pl = _vec_strides(LU_pivots, batch)
    _lu_unpack_kernel[(nb,)](LU_data, LU_pivots, P, L, U, m, n, kk, *_bsizes(batch),
                             *_margs(LU_data, batch),
                             *ps, pl, *_margs(P if unpack_pivots else None, batch),
                             *_margs(L if unpack_data else None, batch),
                             *_margs(U if unpack_data else None, batch),
                             DATA=bool(unpack_data), PIVOTS=bool(unpack_pivots),
                             ODT=dtype_code(P.dtype), BLK=blk)


def lu_unpack_out(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, P, L, U):
    _check_float("lu_unpack", LU_data)
    if LU_pivots.dtype != torch.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                           f"dtype. Note: this function is intended to be used with the output produced by "
                           f"torch.linalg.lu_factor, but got {LU_pivots.dtype}")
    batch, m, n = tuple(LU_data.shape[:-2]), LU_data.shape[-2], LU_data.shape[-1]
    kk = min(m, n)
    dt, dev = LU_data.dtype, LU_data.device
    _block(m, n)
    P = _out(P, batch + (m, m) if unpack_pivots else (0,), dt, dev)
    L = _out(L, batch + (m, kk) if unpack_data else (0,), dt, dev)
    U = _out(U, batch + (kk, n) if unpack_data else (0,), dt, dev)
    _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U)
    return P, L, U


def linalg_lu_out(A, *, pivot=True, P, L, U):
    if A.dim() < 2:
        raise RuntimeError("linalg.lu: Expected tensor with 2 or more dimensions. Got size: "
                           f"{tuple(A.shape)} instead")
    _check_float("linalg.lu", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    _block(m, n)
    P = _out(P, batch + (m, m), A.dtype, A.device)
    L = _out(L, batch + (m, kk), A.dtype, A.device)
    U = _out(U, batch + (kk, n), A.dtype, A.device)
    LU, piv, info = _lu_tmp(A)
    _getrf(A, LU, piv, info)
    _lu_unpack(LU, piv, True, True, P, L, U)
    return P, L, U


# ---------------------------------------------------------------- solves ---
@triton.jit
def _trsv(M, X, rows, cols, r1, n, UPPER: tl.constexpr, UNIT: tl.constexpr):
    """Substitution with the lower (or upper) triangle of M: rows of X are solved in order."""
    for ii in range(0, n):
        if UPPER:
            i = n - 1 - ii
        else:
            i = ii
        mi = _row(M, rows, i)  # indexed by column of M == row of X
        if UPPER:
            mi_off = tl.where(r1 > i, mi, 0.0)
        else:
            mi_off = tl.where(r1 < i, mi, 0.0)
        dot = tl.sum(mi_off[:, None] * X, axis=0)
        xi = _row(X, rows, i) - dot
        if not UNIT:
            xi = xi / _at(mi, r1, i)
        X = tl.where(rows == i, xi[None, :], X)
    return X


@triton.jit
def _solve_kernel(m_ptr, piv_ptr, b_ptr, x_ptr, n, k,
                  s0, s1, s2, s3,
                  a0, a1, a2, a3, a_r, a_c,
                  v0, v1, v2, v3, v_s,
                  b0, b1, b2, b3, b_r, b_c,
                  x0, x1, x2, x3, x_r, x_c,
                  SYM: tl.constexpr, EYE: tl.constexpr, PIV_FWD: tl.constexpr, PIV_BWD: tl.constexpr,
                  LOWER: tl.constexpr, UNIT_L: tl.constexpr, UPPER: tl.constexpr, UNIT_U: tl.constexpr,
                  ODT: tl.constexpr, BLK: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    M = tl.load(m_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < n) & (cols < n), other=0.0).to(tl.float64)
    if SYM:  # M's lower triangle L given: the upper one is L^T (cholesky solves)
        M = tl.where(rows >= cols, M, tl.trans(M))
    if EYE:
        X = tl.where((rows == kc) & (rows < n), 1.0, 0.0).to(tl.float64)
    else:
        X = tl.load(b_ptr + _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                    mask=(rows < n) & (kc < k), other=0.0).to(tl.float64)
    voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
    if PIV_FWD:
        for i in range(0, n):
            p = tl.load(piv_ptr + voff + i * v_s) - 1
            X = _swap_rows(X, rows, i, p)
    if LOWER:
        X = _trsv(M, X, rows, cols, r1, n, False, UNIT_L)
    if UPPER:
        X = _trsv(M, X, rows, cols, r1, n, True, UNIT_U)
    if PIV_BWD:
        for ii in range(0, n):
            i = n - 1 - ii
            p = tl.load(piv_ptr + voff + i * v_s) - 1
            X = _swap_rows(X, rows, i, p)
    tl.store(x_ptr + _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c,
             K._to_odt(X, ODT), mask=(rows < n) & (kc < k))


def _solve(M, B, X, piv=None, *, sym=False, eye=False, piv_fwd=False, piv_bwd=False,
           lower=False, unit_l=False, upper=False, unit_u=False):
    """X (*, n, k) = op(M)^-1 B with batch dims broadcast; all strided (B unused when eye)."""
    batch = tuple(X.shape[:-2])
    n, k = X.shape[-2], X.shape[-1]
    nb = _nbatch(batch)
    if nb == 0 or n == 0 or k == 0:
        return X
    blk = _block(n)
    bk = _block(k)
    B = X if eye else B
    pv = piv if piv is not None else X
    ps, pl = _vec_strides(pv, batch) if piv is not None else ([0] * _NB, 0)
    _solve_kernel[(nb,)](M, pv, B, X, n, k, *_bsizes(batch),
                         *_margs(M, batch), *ps, pl,
                         *_margs(B, batch),
                         *_margs(X, batch),
                         SYM=sym, EYE=eye, PIV_FWD=piv_fwd, PIV_BWD=piv_bwd, LOWER=lower, UNIT_L=unit_l,
                         UPPER=upper, UNIT_U=unit_u, ODT=dtype_code(X.dtype), BLK=blk, BK=bk)
    return X


def _bcast_batch(a, b):
    return tuple(torch.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))


def _solve_triangular(A, B, upper, left, unitriangular, out):
    _check_float("linalg.solve_triangular", A, B)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found "
                           f"A of type {A.dtype} and B of type {B.dtype} instead")
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
    _block(n, B.shape[-1] if left else B.shape[-2])
    out = _out(out, shape, B.dtype, B.device)
    if left:
        M, Bv, Xv, up = A, B, out, upper
    else:  # X A = B  <=>  A^T X^T = B^T
        M, Bv, Xv, up = A.mT, B.mT, out.mT, not upper
    if _overlaps(Xv, Bv) or _overlaps(Xv, M):
        tmp = torch.empty(Xv.shape, dtype=Xv.dtype, device=Xv.device)
        _solve(M, Bv, tmp, lower=not up, unit_l=unitriangular, upper=up, unit_u=unitriangular)
        copy_into(Xv, tmp)
    else:
        _solve(M, Bv, Xv, lower=not up, unit_l=unitriangular, upper=up, unit_u=unitriangular)
    return out


def _overlaps(a, b):
    # The kernel reads all of B before writing X, per program, but programs of a
    # broadcast batch would race; only the same storage matters.
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() and b.numel()


def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    return _solve_triangular(self, B, upper, left, unitriangular, None)


def linalg_solve_triangular_out(self, B, *, upper, left=True, unitriangular=False, out):
    return _solve_triangular(self, B, upper, left, unitriangular, out)


def _lu_solve_into(LU, pivots, B, X, adjoint):
    """X = A^-1 B (or A^-T B) for A = P L U given by LU/pivots; X/B (*, n, k) views."""
    if not adjoint:
        _solve(LU, B, X, pivots, piv_fwd=True, lower=True, unit_l=True, upper=True, unit_u=False)
    else:  # A^T = U^T L^T P^T: lower solve with U^T, unit upper with L^T, swaps reversed
        _solve(LU.mT, B, X, pivots, piv_bwd=True, lower=True, unit_l=False, upper=True, unit_u=True)


def linalg_lu_solve_out(LU, pivots, B, *, left=True, adjoint=False, out):
    _check_float("linalg.lu_solve", LU, B)
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
    _block(n, B.shape[-1] if left else B.shape[-2])
    out = _out(out, batch + tuple(B.shape[-2:]), B.dtype, B.device)
    piv = pivots.expand(batch + (n,))
    if left:
        Bv, Xv, adj = B, out, adjoint
    else:  # X A = B  <=>  A^T X^T = B^T (and X A^T = B <=> A X^T = B^T)
        Bv, Xv, adj = B.mT, out.mT, not adjoint
    tmp = torch.empty(Xv.shape, dtype=Xv.dtype, device=Xv.device) if _overlaps(Xv, Bv) else Xv
    _lu_solve_into(LU, piv, Bv, tmp, adj)
    if tmp is not Xv:
        copy_into(Xv, tmp)
    return out


def _linalg_solve_ex_result(A, B, *, left=True, check_errors=False, result, LU, pivots, info):
    _check_float("linalg.solve", A, B)
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
    _block(n, B2.shape[-1] if left else B2.shape[-2])
    rshape = batch + tuple(B2.shape[-2:])
    result = _out(result, rshape[:-1] if vector else rshape, B.dtype, B.device)
    LU = _out(LU, A.shape, A.dtype, A.device)
    pivots = _out(pivots, abatch + (n,), torch.int32, A.device)
    info = _out(info, abatch, torch.int32, A.device)
    _getrf(A, LU, pivots, info)  # LU of A itself (unlike det/slogdet), as the backward expects
    if check_errors:
        _check_errors(info, "torch.linalg.solve_ex", A.dim() == 2)
    X = result.unsqueeze(-1) if vector else result
    piv = pivots.expand(batch + (n,))
    if left:
        _lu_solve_into(LU, piv, B2, X, False)
    else:
        _lu_solve_into(LU, piv, B2.mT, X.mT, True)
    return result, LU, pivots, info


def linalg_inv_ex_inverse(A, *, check_errors=False, inverse, info):
    _check_float("linalg.inv", A)
    _square("linalg.inv", A)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    _block(n)
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
def _cholesky_kernel(a_ptr, l_ptr, info_ptr, n,
                     s0, s1, s2, s3,
                     a0, a1, a2, a3, a_r, a_c,
                     l0, l1, l2, l3, l_r, l_c,
                     i0, i1, i2, i3,
                     ODT: tl.constexpr, BLK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    mask = (rows < n) & (cols < n)
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=mask & (rows >= cols), other=0.0).to(tl.float64)
    info = tl.zeros((), tl.int32)
    for j in range(0, n):
        cj = _col(A, cols, j)
        d = _at(cj, r1, j)
        # potrf stops at the first non-positive (or NaN) pivot; `lim` then masks every update
        ok = (d > 0.0) & (info == 0)
        info = tl.where((info == 0) & ~(d > 0.0), j + 1, info)
        lim = tl.where(ok, BLK, -1)
        s = tl.sqrt(tl.where(ok, d, 1.0))
        lcol = tl.where((r1 >= j) & (r1 < n), cj / s, 0.0)
        A = tl.where((cols == j) & (rows >= j) & (cols < lim), lcol[:, None], A)
        A = tl.where((rows > j) & (cols > j) & (rows >= cols) & (cols < lim), A - lcol[:, None] * lcol[None, :], A)
    A = tl.where(rows >= cols, A, 0.0)
    tl.store(l_ptr + _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
             K._to_odt(A, ODT), mask=mask)
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
    # upper: A = U^T U reads the upper triangle; that is the lower Cholesky of A^T, stored transposed
    Av, Lv = (A.mT, L.mT) if upper else (A, L)
    _cholesky_kernel[(nb,)](Av, Lv, info, n, *_bsizes(batch),
                            *_margs(Av, batch),
                            *_margs(Lv, batch),
                            *_scal_strides(info, batch), ODT=dtype_code(A.dtype), BLK=blk)


def linalg_cholesky_ex_L(self, *, upper=False, check_errors=False, L, info):
    _check_float("linalg.cholesky", self)
    _square("linalg.cholesky", self)
    batch = tuple(self.shape[:-2])
    _block(self.shape[-1])
    L = _out(L, self.shape, self.dtype, self.device)
    info = _out(info, batch, torch.int32, self.device)
    src = _copy_of(self) if _overlaps(L, self) else self
    _cholesky(src, upper, L, info)
    if check_errors:
        _check_errors(info, "torch.linalg.cholesky_ex", self.dim() == 2)
    return L, info


def _copy_of(t):
    return copy_into(torch.empty(t.shape, dtype=t.dtype, device=t.device), t)


def cholesky(self, upper=False):
    _check_float("cholesky", self)
    _square("cholesky", self)
    batch = tuple(self.shape[:-2])
    _block(self.shape[-1])
    L = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    info = torch.empty(batch, dtype=torch.int32, device=self.device)
    _cholesky(self, upper, L, info)
    _check_errors(info, "cholesky", self.dim() == 2)
    return L


def cholesky_inverse(self, upper=False):
    _check_float("cholesky_inverse", self)
    _square("cholesky_inverse", self)
    _block(self.shape[-1])
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    Lv = self.mT if upper else self
    # (L L^T)^-1: forward with L, back with L^T, on the identity
    _solve(Lv, None, out, sym=True, eye=True, lower=True, upper=True)
    return out


def _cholesky_solve_helper(self, A, upper):
    _check_float("cholesky_solve", self, A)
    batch = _bcast_batch(self, A)
    n = A.shape[-1]
    _block(n, self.shape[-1])
    out = torch.empty(batch + tuple(self.shape[-2:]), dtype=self.dtype, device=self.device)
    Lv = A.mT if upper else A
    _solve(Lv, self, out, sym=True, lower=True, upper=True)
    return out


# -------------------------------------------------------------------- QR ---
@triton.jit
def _qr_kernel(a_ptr, q_ptr, r_ptr, tau_ptr, m, n, qcols,
               s0, s1, s2, s3,
               a0, a1, a2, a3, a_r, a_c,
               q0, q1, q2, q3, q_r, q_c,
               r0, r1_, r2, r3, r_r, r_c,
               t0, t1, t2, t3, t_s,
               RMODE: tl.constexpr, WANT_Q: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """Householder QR as LAPACK geqrf (dlarfg: beta = -sign(alpha) * ||x||, tau = (beta - alpha) / beta).
    RMODE 0: R = triu rows < qcols (linalg_qr); 1: geqrf's packed a (R + reflectors below) and tau."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < m) & (cols < n), other=0.0).to(tl.float64)
    kk = tl.minimum(m, n)
    V = tl.zeros((BLK, BLK), tl.float64)  # reflectors by column (unit diagonal)
    taus = tl.zeros((BLK,), tl.float64)
    for j in range(0, kk):
        cj = _col(A, cols, j)
        alpha = _at(cj, r1, j)
        x = tl.where((r1 > j) & (r1 < m), cj, 0.0)
        xn2 = tl.sum(x * x, axis=0)
        nz = xn2 > 0.0
        beta = -_sign(alpha) * tl.sqrt(alpha * alpha + xn2)
        tau = tl.where(nz, (beta - alpha) / tl.where(nz, beta, 1.0), 0.0)
        v = tl.where(r1 == j, 1.0, tl.where(nz, x / tl.where(nz, alpha - beta, 1.0), 0.0))
        # apply H = I - tau v v^T to the columns right of j
        w = tl.sum(v[:, None] * A, axis=0)
        A = tl.where(cols > j, A - tau * v[:, None] * w[None, :], A)
        A = tl.where((cols == j) & (rows == j), tl.where(nz, beta, alpha), A)
        A = tl.where((cols == j) & (rows > j), v[:, None], A)
        V = tl.where(cols == j, v[:, None], V)
        taus = tl.where(r1 == j, tau, taus)
    roff = _boff(pid, s0, s1, s2, s3, r0, r1_, r2, r3)
    if RMODE == 0:
        R = tl.where(rows <= cols, A, 0.0)
        tl.store(r_ptr + roff + rows * r_r + cols * r_c, K._to_odt(R, ODT),
                 mask=(rows < qcols) & (cols < n))
    else:
        tl.store(r_ptr + roff + rows * r_r + cols * r_c, K._to_odt(A, ODT), mask=(rows < m) & (cols < n))
        tl.store(tau_ptr + _boff(pid, s0, s1, s2, s3, t0, t1, t2, t3) + r1 * t_s, K._to_odt(taus, ODT),
                 mask=r1 < kk)
    if WANT_Q:
        # Q = H_0 ... H_{k-1} applied to the first qcols columns of I (orgqr: backward accumulation)
        Q = tl.where((rows == cols) & (rows < m), 1.0, 0.0).to(tl.float64)
        for jj in range(0, kk):
            j = kk - 1 - jj
            v = _col(V, cols, j)
            tau = _at(taus, r1, j)
            w = tl.sum(v[:, None] * Q, axis=0)
            Q = Q - tau * v[:, None] * w[None, :]
        tl.store(q_ptr + _boff(pid, s0, s1, s2, s3, q0, q1, q2, q3) + rows * q_r + cols * q_c,
                 K._to_odt(Q, ODT), mask=(rows < m) & (cols < qcols))


def linalg_qr_out(A, mode="reduced", *, Q, R):
    if A.dim() < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           f"(default), 'r', or 'complete'")
    _check_float("linalg.qr", A)
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    qc = m if mode == "complete" else kk
    blk = _block(m, n)
    Q = _out(Q, batch + (m, qc) if mode != "r" else (0,), A.dtype, A.device)
    R = _out(R, batch + (qc, n), A.dtype, A.device)
    nb = _nbatch(batch)
    if nb == 0 or (m == 0 and n == 0):
        return Q, R
    want_q = mode != "r"
    _qr_kernel[(nb,)](A, Q, R, R, m, n, qc, *_bsizes(batch),
                      *_margs(A, batch),
                      *_margs(Q if want_q else None, batch), *_margs(R, batch),
                      0, 0, 0, 0, 0, RMODE=0, WANT_Q=want_q, ODT=dtype_code(A.dtype), BLK=blk)
    return Q, R


def geqrf(self):
    if self.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _check_float("geqrf", self)
    batch, m, n = tuple(self.shape[:-2]), self.shape[-2], self.shape[-1]
    kk = min(m, n)
    blk = _block(m, n)
    # aten returns a in batched column-major layout
    a = torch.empty(batch + (n, m), dtype=self.dtype, device=self.device).mT
    tau = torch.empty(batch + (kk,), dtype=self.dtype, device=self.device)
    nb = _nbatch(batch)
    if nb == 0 or m == 0 or n == 0:
        return a, tau
    ts, tl_ = _vec_strides(tau, batch)
    _qr_kernel[(nb,)](self, a, a, tau, m, n, kk, *_bsizes(batch),
                      *_margs(self, batch),
                      *([0] * _NB), 0, 0, *_margs(a, batch), *ts, tl_,
                      RMODE=1, WANT_Q=False, ODT=dtype_code(self.dtype), BLK=blk)
    return a, tau


# ------------------------------------------------------------- SVD / eigh --
@triton.jit
def _complete_basis(U, rows, cols, r1, start, m):
    """Fill columns start..m-1 of U (its first `start` columns orthonormal, the rest zero)
    with orthonormal vectors: each is the unit vector e_i least covered by the columns so
    far, orthogonalised twice (Gram-Schmidt) and normalised."""
    for j in range(start, m):
        cover = tl.sum(U * U, axis=1)
        cand = tl.where(r1 < m, 1.0 - cover, -1.0)
        best = tl.max(cand, axis=0)
        i = tl.min(tl.where(cand == best, r1, m), axis=0)
        v = tl.where(r1 == i, 1.0, 0.0).to(tl.float64)
        for _ in tl.static_range(2):
            proj = tl.sum(U * v[:, None], axis=0)
            v = v - tl.sum(U * proj[None, :], axis=1)
        v = v / tl.sqrt(tl.sum(v * v, axis=0))
        U = tl.where(cols == j, v[:, None], U)
    return U


@triton.jit
def _svd_kernel(a_ptr, u_ptr, s_ptr, v_ptr, m, n, ucols,
                s0, s1, s2, s3,
                a0, a1, a2, a3, a_r, a_c,
                u0, u1, u2, u3, u_r, u_c,
                d0, d1, d2, d3, d_s,
                v0, v1, v2, v3, v_r, v_c,
                SWEEPS: tl.constexpr, WANT_UV: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """One-sided (Hestenes) Jacobi on W = A (m x n, m >= n): rotate column pairs until all
    are orthogonal; then S = column norms, U = W / S, V = accumulated rotations."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    W = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < m) & (cols < n), other=0.0).to(tl.float64)
    V = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    for _ in range(0, SWEEPS):
        for p in range(0, n - 1):
            for q in range(p + 1, n):
                wp = _col(W, cols, p)
                wq = _col(W, cols, q)
                alpha = tl.sum(wp * wp, axis=0)
                beta = tl.sum(wq * wq, axis=0)
                gamma = tl.sum(wp * wq, axis=0)
                rot = tl.abs(gamma) > 1e-300
                zeta = (beta - alpha) / (2.0 * tl.where(rot, gamma, 1.0))
                zc = tl.minimum(tl.abs(zeta), 1e150)  # zeta^2 would overflow; t ~ 1/(2 zeta) is ~0 there
                t = _sign(zeta) / (tl.abs(zeta) + tl.sqrt(1.0 + zc * zc))
                c = tl.where(rot, 1.0 / tl.sqrt(1.0 + t * t), 1.0)
                s = tl.where(rot, c * t, 0.0)
                W = tl.where(cols == p, (c * wp - s * wq)[:, None], tl.where(cols == q, (s * wp + c * wq)[:, None], W))
                vp = _col(V, cols, p)
                vq = _col(V, cols, q)
                V = tl.where(cols == p, (c * vp - s * vq)[:, None], tl.where(cols == q, (s * vp + c * vq)[:, None], V))
    sv = tl.where(r1 < n, tl.sqrt(tl.sum(W * W, axis=0)), -1.0)
    # selection sort, descending (stable: first max)
    for i in range(0, n):
        cand = tl.where(r1 >= i, sv, -2.0)
        mx = tl.max(cand, axis=0)
        p = tl.min(tl.where(cand == mx, r1, BLK), axis=0)
        si = _at(sv, r1, i)
        sv = tl.where(r1 == i, mx, tl.where(r1 == p, si, sv))
        W = _swap_cols(W, cols, i, p)
        V = _swap_cols(V, cols, i, p)
    tl.store(s_ptr + _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3) + r1 * d_s, K._to_odt(sv, ODT), mask=r1 < n)
    if WANT_UV:
        # columns with a (numerically) zero singular value are completed like the extra ones
        smax = _at(sv, r1, 0)
        good = (sv > smax * 1e-15 * n) & (sv > 0) & (r1 < n)
        ngood = tl.sum(good.to(tl.int32), axis=0)
        U = tl.where(good[None, :], W / tl.where(good, sv, 1.0)[None, :], 0.0)
        U = _complete_basis(U, rows, cols, r1, ngood, m)
        tl.store(u_ptr + _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c,
                 K._to_odt(U, ODT), mask=(rows < m) & (cols < ucols))
        tl.store(v_ptr + _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c,
                 K._to_odt(V, ODT), mask=(rows < n) & (cols < n))


def _linalg_svd_U(A, full_matrices=False, compute_uv=True, *, driver=None, U, S, Vh):
    if A.dim() < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.svd", A)
    batch, m, n = tuple(A.shape[:-2]), A.shape[-2], A.shape[-1]
    kk = min(m, n)
    blk = _block(m, n)
    dt, dev = A.dtype, A.device
    if compute_uv:
        U = _out(U, batch + (m, m if full_matrices else kk), dt, dev)
        Vh = _out(Vh, batch + (n if full_matrices else kk, n), dt, dev)
    else:
        U, Vh = _out(U, (0,), dt, dev), _out(Vh, (0,), dt, dev)
    S = _out(S, batch + (kk,), dt, dev)
    nb = _nbatch(batch)
    if nb == 0:
        return U, S, Vh
    if kk == 0:
        if compute_uv and full_matrices:  # the identity of the nonzero side
            for t in (U, Vh):
                if t.numel():  # the substitution kernel with no substitution step writes I
                    _solve(t, None, t, eye=True)
        return U, S, Vh
    # Jacobi works on the tall side: for m < n, A^T = V S U^T
    tall = m >= n
    W = A if tall else A.mT
    mm, nn = (m, n) if tall else (n, m)
    ucols = mm if full_matrices else nn
    if compute_uv:
        Uk, Vk = (U, Vh.mT) if tall else (Vh.mT, U)
    else:
        Uk = Vk = None
    ss, sl = _vec_strides(S, batch)
    _svd_kernel[(nb,)](W, S if Uk is None else Uk, S, S if Vk is None else Vk, mm, nn, ucols, *_bsizes(batch),
                       *_margs(W, batch), *_margs(Uk, batch), *ss, sl, *_margs(Vk, batch),
                       SWEEPS=_SWEEPS, WANT_UV=bool(compute_uv), ODT=dtype_code(dt), BLK=blk)
    return U, S, Vh


@triton.jit
def _eigh_kernel(a_ptr, w_ptr, v_ptr, n,
                 s0, s1, s2, s3,
                 a0, a1, a2, a3, a_r, a_c,
                 w0, w1, w2, w3, w_s,
                 v0, v1, v2, v3, v_r, v_c,
                 SWEEPS: tl.constexpr, WANT_V: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """Cyclic Jacobi on the symmetric matrix given by A's lower triangle."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < n) & (cols < n) & (rows >= cols), other=0.0).to(tl.float64)
    A = tl.where(rows >= cols, A, tl.trans(A))
    V = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    for _ in range(0, SWEEPS):
        for p in range(0, n - 1):
            for q in range(p + 1, n):
                cp = _col(A, cols, p)
                cq = _col(A, cols, q)
                apq = _at(cp, r1, q)
                app = _at(cp, r1, p)
                aqq = _at(cq, r1, q)
                rot = tl.abs(apq) > 1e-300
                theta = (aqq - app) / (2.0 * tl.where(rot, apq, 1.0))
                tc = tl.minimum(tl.abs(theta), 1e150)  # theta^2 would overflow; t ~ 1/(2 theta) is ~0 there
                t = _sign(theta) / (tl.abs(theta) + tl.sqrt(tc * tc + 1.0))
                c = tl.where(rot, 1.0 / tl.sqrt(t * t + 1.0), 1.0)
                s = tl.where(rot, t * c, 0.0)
                # A <- J^T A J with J the (p, q) rotation [[c, s], [-s, c]]
                A = tl.where(cols == p, (c * cp - s * cq)[:, None], tl.where(cols == q, (s * cp + c * cq)[:, None], A))
                rp = _row(A, rows, p)
                rq = _row(A, rows, q)
                A = tl.where(rows == p, (c * rp - s * rq)[None, :], tl.where(rows == q, (s * rp + c * rq)[None, :], A))
                A = tl.where(((rows == p) & (cols == q)) | ((rows == q) & (cols == p)), 0.0, A)
                vp = _col(V, cols, p)
                vq = _col(V, cols, q)
                V = tl.where(cols == p, (c * vp - s * vq)[:, None], tl.where(cols == q, (s * vp + c * vq)[:, None], V))
    ev = tl.sum(tl.where(rows == cols, A, 0.0), axis=1)
    for i in range(0, n):  # ascending (selection sort; first of equal values)
        live = (r1 >= i) & (r1 < n)
        cand = tl.where(live, ev, 1.0e308)
        mn = tl.min(cand, axis=0)
        p = tl.min(tl.where((cand == mn) & live, r1, BLK), axis=0)
        ei = _at(ev, r1, i)
        ev = tl.where(r1 == i, mn, tl.where(r1 == p, ei, ev))
        V = _swap_cols(V, cols, i, p)
    tl.store(w_ptr + _boff(pid, s0, s1, s2, s3, w0, w1, w2, w3) + r1 * w_s, K._to_odt(ev, ODT), mask=r1 < n)
    if WANT_V:
        tl.store(v_ptr + _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c,
                 K._to_odt(V, ODT), mask=(rows < n) & (cols < n))


def _linalg_eigh_eigenvalues(A, UPLO="L", compute_v=True, *, eigenvalues, eigenvectors):
    _check_float("linalg.eigh", A)
    _square("linalg.eigh", A)
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    blk = _block(n)
    eigenvalues = _out(eigenvalues, batch + (n,), A.dtype, A.device)
    eigenvectors = _out(eigenvectors, A.shape if compute_v else (0,), A.dtype, A.device)
    nb = _nbatch(batch)
    if nb == 0 or n == 0:
        return eigenvalues, eigenvectors
    Av = A.mT if UPLO in ("U", "u") else A  # the upper triangle is the lower one of A^T
    V = eigenvectors if compute_v else None
    ws, wl = _vec_strides(eigenvalues, batch)
    _eigh_kernel[(nb,)](Av, eigenvalues, eigenvalues if V is None else V, n, *_bsizes(batch),
                        *_margs(Av, batch), *ws, wl, *_margs(V, batch),
                        SWEEPS=_SWEEPS, WANT_V=bool(compute_v), ODT=dtype_code(A.dtype), BLK=blk)
    return eigenvalues, eigenvectors


# ------------------------------------------------- Householder products ---
@triton.jit
def _apply_q_kernel(v_ptr, tau_ptr, c_ptr, x_ptr, m, ncols, kk, nv,
                    s0, s1, s2, s3,
                    a0, a1, a2, a3, a_r, a_c,
                    t0, t1, t2, t3, t_s,
                    c0, c1, c2, c3, c_r, c_c,
                    x0, x1, x2, x3, x_r, x_c,
                    TRANS: tl.constexpr, EYE: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr,
                    BK: tl.constexpr):
    """X = Q C (or Q^T C) for Q = H_0 ... H_{k-1}, H_j = I - tau_j v_j v_j^T, v_j the j-th column
    of the reflector matrix below the diagonal with a unit diagonal (geqrf's layout);
    EYE: C = the first `ncols` columns of the m x m identity (orgqr)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    V = tl.load(v_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < m) & (cols < nv) & (rows > cols), other=0.0).to(tl.float64)
    V = tl.where((rows == cols) & (rows < m), 1.0, V)
    taus = tl.load(tau_ptr + _boff(pid, s0, s1, s2, s3, t0, t1, t2, t3) + r1 * t_s, mask=r1 < kk,
                   other=0.0).to(tl.float64)
    if EYE:
        X = tl.where((rows == kc) & (rows < m), 1.0, 0.0).to(tl.float64)
    else:
        X = tl.load(c_ptr + _boff(pid, s0, s1, s2, s3, c0, c1, c2, c3) + rows * c_r + kc * c_c,
                    mask=(rows < m) & (kc < ncols), other=0.0).to(tl.float64)
    for jj in range(0, kk):
        if TRANS:
            j = jj  # Q^T C = H_{k-1} ... H_0 C: H_0 first
        else:
            j = kk - 1 - jj
        v = tl.where(r1 >= j, _col(V, cols, j), 0.0)
        tau = _at(taus, r1, j)
        w = tl.sum(v[:, None] * X, axis=0)
        X = X - tau * v[:, None] * w[None, :]
    tl.store(x_ptr + _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c,
             K._to_odt(X, ODT), mask=(rows < m) & (kc < ncols))


def _apply_q(V, tau, C, X, trans, eye):
    """X (*, m, c) = Q C / Q^T C (C is the identity when eye); V (*, m, nv), tau (*, k)."""
    batch = tuple(X.shape[:-2])
    m, ncols = X.shape[-2], X.shape[-1]
    nb = _nbatch(batch)
    if nb == 0 or m == 0 or ncols == 0:
        return X
    kk = tau.shape[-1]
    blk = _block(m, V.shape[-1])
    bk = _block(ncols)
    ts, tl_ = _vec_strides(tau, batch)
    C = X if eye else C
    _apply_q_kernel[(nb,)](V, tau, C, X, m, ncols, kk, V.shape[-1], *_bsizes(batch), *_margs(V, batch), *ts, tl_,
                           *_margs(C, batch), *_margs(X, batch), TRANS=trans, EYE=eye, ODT=dtype_code(X.dtype),
                           BLK=blk, BK=bk)
    return X


def _householder_product(input, tau, out):
    _check_float("linalg.householder_product", input, tau)
    if input.dim() < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    m, n = input.shape[-2], input.shape[-1]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal "
                           "to input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal "
                           "to tau.shape[-1]")
    out = _out(out, input.shape, input.dtype, input.device)
    tmp = torch.empty(input.shape, dtype=input.dtype, device=input.device) if _overlaps(out, input) else out
    _apply_q(input, tau, None, tmp, False, True)
    if tmp is not out:
        copy_into(out, tmp)
    return out


def linalg_householder_product(input, tau):
    return _householder_product(input, tau, None)


def linalg_householder_product_out(input, tau, *, out):
    return _householder_product(input, tau, out)


def _ormqr(self, input2, input3, left, transpose, out):
    _check_float("ormqr", self, input2, input3)
    if self.dim() < 2 or input3.dim() < 2:
        raise RuntimeError("torch.ormqr: input must have at least 2 dimensions.")
    nq = input3.shape[-2] if left else input3.shape[-1]
    if self.shape[-2] != nq:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    out = _out(out, input3.shape, input3.dtype, input3.device)
    # C Q = (Q^T C^T)^T: the right product is a left one on the transposes
    C, X, trans = (input3, out, transpose) if left else (input3.mT, out.mT, not transpose)
    tmp = torch.empty(X.shape, dtype=X.dtype, device=X.device) if _overlaps(out, input3) or _overlaps(out, self) else X
    _apply_q(self, input2, C, tmp, trans, False)
    if tmp is not X:
        copy_into(X, tmp)
    return out


def ormqr(self, input2, input3, left=True, transpose=False):
    return _ormqr(self, input2, input3, left, transpose, None)


def ormqr_out(self, input2, input3, left=True, transpose=False, *, out):
    return _ormqr(self, input2, input3, left, transpose, out)


# ------------------------------------------------------------------ cross --
@triton.jit
def _cross_kernel(a_ptr, b_ptr, o_ptr, n, sa, sb, so, ODT: tl.constexpr, CDT: tl.constexpr, BLOCK: tl.constexpr):
    """Rows of 3 (contiguous (n, 3) operands), the component stride given separately."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    msk = i < n
    a0 = K._to_cdt(tl.load(a_ptr + i * 3, mask=msk, other=0), CDT)
    a1 = K._to_cdt(tl.load(a_ptr + i * 3 + sa, mask=msk, other=0), CDT)
    a2 = K._to_cdt(tl.load(a_ptr + i * 3 + 2 * sa, mask=msk, other=0), CDT)
    b0 = K._to_cdt(tl.load(b_ptr + i * 3, mask=msk, other=0), CDT)
    b1 = K._to_cdt(tl.load(b_ptr + i * 3 + sb, mask=msk, other=0), CDT)
    b2 = K._to_cdt(tl.load(b_ptr + i * 3 + 2 * sb, mask=msk, other=0), CDT)
    tl.store(o_ptr + i * 3, K._to_odt(a1 * b2 - a2 * b1, ODT), mask=msk)
    tl.store(o_ptr + i * 3 + so, K._to_odt(a2 * b0 - a0 * b2, ODT), mask=msk)
    tl.store(o_ptr + i * 3 + 2 * so, K._to_odt(a0 * b1 - a1 * b0, ODT), mask=msk)


def _cross(self, other, dim, out):
    if self.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if self.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {self.dtype} but found {other.dtype}")
    if self.dtype == torch.bool or self.is_complex():  # 16-bit floats compute in fp32, rounded once
        raise Unsupported(f"linalg.cross of {self.dtype}")
    d = dim + self.dim() if dim < 0 else dim
    if not 0 <= d < self.dim():
        raise IndexError(f"Dimension out of range (expected to be in range of [{-self.dim()}, "
                         f"{self.dim() - 1}], but got {dim})")
    if self.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {self.shape[d]} and {other.shape[d]}")
    shape = torch.broadcast_shapes(self.shape, other.shape)
    out = _out(out, shape, self.dtype, self.device)
    n = out.numel() // 3
    if n == 0:
        return out
    # components last, rows packed: (n, 3) buffers of the broadcast operands
    a = contig(self.expand(shape).movedim(d, -1))
    b = contig(other.expand(shape).movedim(d, -1))
    ov = out.movedim(d, -1)
    res = ov if ov.is_contiguous() else torch.empty(ov.shape, dtype=out.dtype, device=out.device)
    _cross_kernel[(cdiv(n, 256),)](a, b, res, n, 1, 1, 1, ODT=dtype_code(out.dtype), CDT=compute_code(out.dtype),
                                          BLOCK=256)
    if res is not ov:
        copy_into(ov, res)
    return out


def linalg_cross_out(self, other, *, dim=-1, out):
    return _cross(self, other, dim, out)


def linalg_cross(self, other, *, dim=-1):
    return _cross(self, other, dim, None)


# ----------------------------------------------------------------- lstsq ---
@triton.jit
def _lstsq_kernel(u_ptr, s_ptr, v_ptr, b_ptr, x_ptr, res_ptr, rank_ptr, m, n, kk, nrhs, rcond,
                  s0, s1, s2, s3,
                  u0, u1, u2, u3, u_r, u_c,
                  d0, d1, d2, d3, d_s,
                  v0, v1, v2, v3, v_r, v_c,
                  b0, b1, b2, b3, b_r, b_c,
                  x0, x1, x2, x3, x_r, x_c,
                  e0, e1, e2, e3, e_s,
                  k0, k1, k2, k3,
                  RES: tl.constexpr, RANK: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr, BK: tl.constexpr):
    """Minimum-norm least squares from the SVD A = U S V^T (U m x k, V^T k x n):
    X = sum_{s_j > rcond s_0} v_j (u_j^T B) / s_j; residuals = ||B - U_r U_r^T B||^2 per column."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    U = tl.load(u_ptr + _boff(pid, s0, s1, s2, s3, u0, u1, u2, u3) + rows * u_r + cols * u_c,
                mask=(rows < m) & (cols < kk), other=0.0).to(tl.float64)
    Vh = tl.load(v_ptr + _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3) + rows * v_r + cols * v_c,
                 mask=(rows < kk) & (cols < n), other=0.0).to(tl.float64)
    sv = tl.load(s_ptr + _boff(pid, s0, s1, s2, s3, d0, d1, d2, d3) + r1 * d_s, mask=r1 < kk,
                 other=0.0).to(tl.float64)
    B = tl.load(b_ptr + _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                mask=(rows < m) & (kc < nrhs), other=0.0).to(tl.float64)
    tol = rcond * _at(sv, r1, 0)
    X = tl.zeros((BLK, BK), tl.float64)
    R = B
    rank = tl.zeros((), tl.int64)
    for j in range(0, kk):
        s = _at(sv, r1, j)
        keep = s > tol
        rank += keep.to(tl.int64)
        u = _col(U, cols, j)
        y = tl.sum(u[:, None] * B, axis=0)
        v = _row(Vh, rows, j)  # column j of V, indexed by row of X
        X = X + v[:, None] * tl.where(keep, y / tl.where(keep, s, 1.0), 0.0)[None, :]
        R = R - u[:, None] * tl.where(keep, y, 0.0)[None, :]
    tl.store(x_ptr + _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c,
             K._to_odt(X, ODT), mask=(rows < n) & (kc < nrhs))
    if RES:
        kr = tl.arange(0, BK)
        res = tl.sum(tl.where(rows < m, R * R, 0.0), axis=0)
        tl.store(res_ptr + _boff(pid, s0, s1, s2, s3, e0, e1, e2, e3) + kr * e_s, K._to_odt(res, ODT),
                 mask=kr < nrhs)
    if RANK:
        tl.store(rank_ptr + _boff(pid, s0, s1, s2, s3, k0, k1, k2, k3), rank)


def linalg_lstsq_out(self, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    _check_float("torch.linalg.lstsq", self, b)
    if self.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if self.dtype != b.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and b to have the same dtype, but got "
                           f"input with dtype {self.dtype} and b with dtype {b.dtype}")
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
    _block(m, n, nrhs)
    nb = _nbatch(batch)
    if nb and (kk == 0 or nrhs == 0):
        raise Unsupported("torch.linalg.lstsq of an empty matrix or right-hand side")
    dt, dev = self.dtype, self.device
    rc = float(rcond) if rcond is not None and rcond >= 0 else torch.finfo(dt).eps * max(m, n)
    solution = _out(solution, batch + ((n,) if vector else (n, nrhs)), dt, dev)
    want_rank = driver != "gels"
    want_sv = driver in ("gelsd", "gelss")
    rank = _out(rank, batch if want_rank else (0,), torch.int64, dev)
    singular_values = _out(singular_values, batch + (kk,) if want_sv else (0,), dt, dev)
    res_all = torch.empty(batch + (nrhs,), dtype=dt, device=dev)
    rk = rank if want_rank else torch.empty(batch, dtype=torch.int64, device=dev)
    if nb:
        U = torch.empty(batch + (m, kk), dtype=dt, device=dev)
        S = singular_values if want_sv else torch.empty(batch + (kk,), dtype=dt, device=dev)
        Vh = torch.empty(batch + (kk, n), dtype=dt, device=dev)
        _linalg_svd_U(self.expand(batch + (m, n)), False, True, U=U, S=S, Vh=Vh)
        X = solution.unsqueeze(-1) if vector else solution
        ss, sl = _vec_strides(S, batch)
        es, el = _vec_strides(res_all, batch)
        _lstsq_kernel[(nb,)](U, S, Vh, B, X, res_all, rk, m, n, kk, nrhs, rc, *_bsizes(batch),
                             *_margs(U, batch), *ss, sl, *_margs(Vh, batch),
                             *_margs(B.expand(batch + (m, nrhs)), batch), *_margs(X, batch), *es, el,
                             *_scal_strides(rk, batch), RES=True, RANK=True, ODT=dtype_code(dt),
                             BLK=_block(m, n), BK=_block(nrhs))
    # residuals as aten: only for m > n, not for gelsy, and (gelss/gelsd) when every A has full
    # rank; whether they exist depends on the data, so that is read back (aten does too)
    has_res = m > n and driver != "gelsy" and (driver == "gels" or nb == 0 or bool((rk == n).all()))
    if has_res:
        residuals = _out(residuals, res_all.shape, dt, dev)
        copy_into(residuals, res_all)
    else:
        residuals = _out(residuals, (0,), dt, dev)
    return solution, residuals, rank, singular_values


# ------------------------------------------------------------------- LDL ---
@triton.jit
def _ldl_kernel(a_ptr, ld_ptr, piv_ptr, info_ptr, n,
                s0, s1, s2, s3,
                a0, a1, a2, a3, a_r, a_c,
                l0, l1, l2, l3, l_r, l_c,
                p0, p1, p2, p3, p_s,
                i0, i1, i2, i3,
                ODT: tl.constexpr, BLK: tl.constexpr):
    """Bunch-Kaufman L D L^T of the lower triangle, step for step as LAPACK dsytf2 (uplo L):
    1x1 or 2x2 pivots, interchanges only inside the trailing matrix, pivots 1-based (negative
    for both rows of a 2x2 block). The trailing matrix is kept symmetric in registers."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < n) & (cols < n) & (rows >= cols), other=0.0).to(tl.float64)
    A = tl.where(rows >= cols, A, tl.trans(A))
    alpha = (1.0 + tl.sqrt(17.0)) / 8.0
    info = tl.zeros((), tl.int32)
    pv = tl.zeros((BLK,), tl.int32)
    k = tl.zeros((), tl.int32)
    for _ in range(0, n):
        act = k < n
        ck = _col(A, cols, k)
        absakk = tl.abs(_at(ck, r1, k))
        below = tl.where((r1 > k) & (r1 < n), tl.abs(ck), -1.0)
        colmax = tl.maximum(tl.max(below, axis=0), 0.0)
        imax = tl.min(tl.where(below == tl.max(below, axis=0), r1, BLK), axis=0)
        zero = (tl.maximum(absakk, colmax) == 0.0) | (absakk != absakk)
        info = tl.where(act & zero & (info == 0), k + 1, info)
        cim = _col(A, cols, imax)
        rowmax = tl.max(tl.where((r1 >= k) & (r1 < n) & (r1 != imax), tl.abs(cim), 0.0), axis=0)
        absimax = tl.abs(_at(cim, r1, imax))
        one_k = zero | (absakk >= alpha * colmax) | (absakk * rowmax >= alpha * colmax * colmax)
        one_imax = (~one_k) & (absimax >= alpha * rowmax)
        step2 = (~one_k) & (~one_imax)
        kp = tl.where(one_k, k, imax)
        kk = tl.where(step2, k + 1, k)
        # symmetric interchange of kk and kp inside the trailing matrix (rows/cols >= k)
        lo = tl.where(act, k, BLK)
        ri = _row(A, rows, kk)
        rp = _row(A, rows, kp)
        A = tl.where((cols >= lo) & (rows == kk), rp[None, :], tl.where((cols >= lo) & (rows == kp), ri[None, :], A))
        ci = _col(A, cols, kk)
        cp = _col(A, cols, kp)
        A = tl.where((rows >= lo) & (cols == kk), cp[:, None], tl.where((rows >= lo) & (cols == kp), ci[:, None], A))
        # elimination (skipped for a zero column)
        lo1 = tl.where(act & ~zero & ~step2, k, BLK)
        lo2 = tl.where(act & ~zero & step2, k, BLK)
        ck = _col(A, cols, k)
        ck1 = _col(A, cols, k + 1)
        akk = _at(ck, r1, k)
        x = tl.where((r1 > k) & (r1 < n), ck, 0.0)
        d11 = 1.0 / tl.where(akk != 0.0, akk, 1.0)
        A = tl.where((rows > lo1) & (cols > lo1), A - d11 * x[:, None] * x[None, :], A)
        A = tl.where((cols == lo1) & (rows > lo1), (x * d11)[:, None], A)
        A = tl.where((rows == lo1) & (cols > lo1), (x * d11)[None, :], A)
        d21 = _at(ck, r1, k + 1)
        d21s = tl.where(d21 != 0.0, d21, 1.0)
        e11 = _at(ck1, r1, k + 1) / d21s
        e22 = akk / d21s
        t = 1.0 / (e11 * e22 - 1.0)
        f21 = t / d21s
        y0 = tl.where((r1 > k + 1) & (r1 < n), ck, 0.0)
        y1 = tl.where((r1 > k + 1) & (r1 < n), ck1, 0.0)
        wk = f21 * (e11 * y0 - y1)
        wkp1 = f21 * (e22 * y1 - y0)
        A = tl.where((rows > lo2 + 1) & (cols > lo2 + 1),
                     A - (y0[:, None] * wk[None, :] + y1[:, None] * wkp1[None, :]), A)
        A = tl.where((cols == lo2) & (rows > lo2 + 1), wk[:, None], A)
        A = tl.where((cols == lo2 + 1) & (rows > lo2 + 1), wkp1[:, None], A)
        A = tl.where((rows == lo2) & (cols > lo2 + 1), wk[None, :], A)
        A = tl.where((rows == lo2 + 1) & (cols > lo2 + 1), wkp1[None, :], A)
        pval = tl.where(step2, -(kp + 1), kp + 1)
        k2 = tl.where(step2, k + 1, -1)
        pv = tl.where((r1 == k) | (r1 == k2), pval, pv)
        k = tl.where(act, tl.where(step2, k + 2, k + 1), k)
    L = tl.where(rows >= cols, A, 0.0)
    tl.store(ld_ptr + _boff(pid, s0, s1, s2, s3, l0, l1, l2, l3) + rows * l_r + cols * l_c,
             K._to_odt(L, ODT), mask=(rows < n) & (cols < n))
    tl.store(piv_ptr + _boff(pid, s0, s1, s2, s3, p0, p1, p2, p3) + r1 * p_s, pv, mask=r1 < n)
    tl.store(info_ptr + _boff(pid, s0, s1, s2, s3, i0, i1, i2, i3), info)


def linalg_ldl_factor_ex_out(self, *, hermitian=False, check_errors=False, LD, pivots, info):
    _check_float("torch.linalg.ldl_factor_ex", self)
    _square("torch.linalg.ldl_factor_ex", self)
    batch, n = tuple(self.shape[:-2]), self.shape[-1]
    blk = _block(n)
    LD = _out(LD, self.shape, self.dtype, self.device)
    pivots = _out(pivots, batch + (n,), torch.int32, self.device)
    info = _out(info, batch, torch.int32, self.device)
    nb = _nbatch(batch)
    if nb and n == 0:
        fill_into(info, 0)
    elif nb:
        src = _copy_of(self) if _overlaps(LD, self) else self
        ps, pl = _vec_strides(pivots, batch)
        _ldl_kernel[(nb,)](src, LD, pivots, info, n, *_bsizes(batch), *_margs(src, batch), *_margs(LD, batch),
                           *ps, pl, *_scal_strides(info, batch), ODT=dtype_code(self.dtype), BLK=blk)
    if check_errors:
        _check_errors(info, "torch.linalg.ldl_factor_ex", self.dim() == 2)
    return LD, pivots, info


@triton.jit
def _bvec(flag, r1):
    """A scalar condition as a vector (the interpreter cannot combine scalar and vector bools)."""
    return (r1 * 0 + flag.to(tl.int32)) != 0


@triton.jit
def _ldl_solve_kernel(ld_ptr, piv_ptr, b_ptr, x_ptr, n, k_,
                      s0, s1, s2, s3,
                      a0, a1, a2, a3, a_r, a_c,
                      v0, v1, v2, v3, v_s,
                      b0, b1, b2, b3, b_r, b_c,
                      x0, x1, x2, x3, x_r, x_c,
                      ODT: tl.constexpr, BLK: tl.constexpr, BK: tl.constexpr):
    """A X = B for A = L D L^T from the Bunch-Kaufman factors, as LAPACK dsytrs (uplo L)."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    kc = tl.arange(0, BK)[None, :]
    L = tl.load(ld_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=(rows < n) & (cols < n) & (rows >= cols), other=0.0).to(tl.float64)
    X = tl.load(b_ptr + _boff(pid, s0, s1, s2, s3, b0, b1, b2, b3) + rows * b_r + kc * b_c,
                mask=(rows < n) & (kc < k_), other=0.0).to(tl.float64)
    voff = _boff(pid, s0, s1, s2, s3, v0, v1, v2, v3)
    k = tl.zeros((), tl.int32)
    for _ in range(0, n):  # forward: L and D, swaps first
        act = k < n
        p = tl.load(piv_ptr + voff + tl.minimum(k, n - 1) * v_s)
        two = act & (p < 0)
        kp = tl.where(p > 0, p - 1, -p - 1)
        # 1x1 pivot
        X1 = _swap_rows(X, rows, k, kp)
        ck = _col(L, cols, k)
        xk = _row(X1, rows, k)
        X1 = tl.where(rows > k, X1 - ck[:, None] * xk[None, :], X1)
        X1 = tl.where(rows == k, (xk / _at(ck, r1, k))[None, :], X1)
        # 2x2 pivot
        X2 = _swap_rows(X, rows, k + 1, kp)
        ck1 = _col(L, cols, k + 1)
        xk = _row(X2, rows, k)
        xk1 = _row(X2, rows, k + 1)
        X2 = tl.where(rows > k + 1, X2 - ck[:, None] * xk[None, :] - ck1[:, None] * xk1[None, :], X2)
        akm1k = _at(ck, r1, k + 1)
        akm1k = tl.where(akm1k != 0.0, akm1k, 1.0)
        akm1 = _at(ck, r1, k) / akm1k
        ak = _at(ck1, r1, k + 1) / akm1k
        denom = akm1 * ak - 1.0
        bkm1 = xk / akm1k
        bk = xk1 / akm1k
        X2 = tl.where(rows == k, ((ak * bkm1 - bk) / denom)[None, :], X2)
        X2 = tl.where(rows == k + 1, ((akm1 * bk - bkm1) / denom)[None, :], X2)
        X = tl.where(_bvec(two, r1)[:, None], X2, tl.where(_bvec(act, r1)[:, None], X1, X))
        k = tl.where(act, tl.where(two, k + 2, k + 1), k)
    k = n - 1
    for _ in range(0, n):  # backward: L^T, swaps last
        act = k >= 0
        p = tl.load(piv_ptr + voff + tl.maximum(k, 0) * v_s)
        two = act & (p < 0)
        kp = tl.where(p > 0, p - 1, -p - 1)
        ck = _col(L, cols, k)
        ckm1 = _col(L, cols, k - 1)
        tail = tl.where(rows > k, X, 0.0)
        X1 = tl.where(rows == k, X - tl.sum(ck[:, None] * tail, axis=0)[None, :], X)
        X2 = tl.where(rows == k - 1, X1 - tl.sum(ckm1[:, None] * tail, axis=0)[None, :], X1)
        X1 = _swap_rows(X1, rows, k, kp)
        X2 = _swap_rows(X2, rows, k, kp)
        X = tl.where(_bvec(two, r1)[:, None], X2, tl.where(_bvec(act, r1)[:, None], X1, X))
        k = tl.where(act, tl.where(two, k - 2, k - 1), k)
    tl.store(x_ptr + _boff(pid, s0, s1, s2, s3, x0, x1, x2, x3) + rows * x_r + kc * x_c,
             K._to_odt(X, ODT), mask=(rows < n) & (kc < k_))


def linalg_ldl_solve_out(LD, pivots, B, *, hermitian=False, out):
    _check_float("torch.linalg.ldl_solve", LD, B)
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
    _block(n, B.shape[-1])
    out = _out(out, batch + tuple(B.shape[-2:]), B.dtype, B.device)
    nb, nrhs = _nbatch(batch), B.shape[-1]
    if nb == 0 or n == 0 or nrhs == 0:
        return out
    X = torch.empty(out.shape, dtype=out.dtype, device=out.device) if _overlaps(out, B) else out
    piv = pivots.expand(batch + (n,))
    ps, pl = _vec_strides(piv, batch)
    _ldl_solve_kernel[(nb,)](LD, piv, B, X, n, nrhs, *_bsizes(batch), *_margs(LD, batch), *ps, pl,
                             *_margs(B, batch), *_margs(X, batch), ODT=dtype_code(out.dtype),
                             BLK=_block(n), BK=_block(nrhs))
    if X is not out:
        copy_into(out, X)
    return out


# ------------------------------------------------------------ matrix_exp --
@triton.jit
def _matmul_reg(A, B, cols, rows, n):
    """A @ B for two register blocks (n x n used): sum of n rank-1 products."""
    C = tl.zeros(A.shape, tl.float64)
    for j in range(0, n):
        C += _col(A, cols, j)[:, None] * _row(B, rows, j)[None, :]
    return C


@triton.jit
def _matrix_exp_kernel(a_ptr, o_ptr, n,
                       s0, s1, s2, s3,
                       a0, a1, a2, a3, a_r, a_c,
                       o0, o1, o2, o3, o_r, o_c,
                       DEGREE: tl.constexpr, ODT: tl.constexpr, BLK: tl.constexpr):
    """Scaling and squaring in fp64: A / 2^s has 1-norm <= 1/2, its exponential is the Taylor
    polynomial of degree DEGREE (Horner; truncation error < 2^-19 / 19! relative), then squared s times."""
    pid = tl.program_id(0).to(tl.int64)
    r1 = tl.arange(0, BLK)
    rows = r1[:, None]
    cols = r1[None, :]
    msk = (rows < n) & (cols < n)
    A = tl.load(a_ptr + _boff(pid, s0, s1, s2, s3, a0, a1, a2, a3) + rows * a_r + cols * a_c,
                mask=msk, other=0.0).to(tl.float64)
    norm = tl.max(tl.sum(tl.abs(A), axis=0), axis=0)
    sc = tl.where(norm > 0.5, tl.ceil(tl.log2(tl.where(norm > 0.5, norm, 1.0) / 0.5)), 0.0)
    sc = tl.minimum(sc, 1100.0)  # inf / nan norms: bounded loop, the result stays non-finite
    A = A * tl.exp2(-sc)
    eye = tl.where((rows == cols) & (rows < n), 1.0, 0.0).to(tl.float64)
    E = eye
    for i in tl.static_range(DEGREE, 0, -1):
        E = eye + _matmul_reg(A, E, cols, rows, n) * (1.0 / i)
    for _ in range(0, sc.to(tl.int32)):
        E = _matmul_reg(E, E, cols, rows, n)
    tl.store(o_ptr + _boff(pid, s0, s1, s2, s3, o0, o1, o2, o3) + rows * o_r + cols * o_c,
             K._to_odt(E, ODT), mask=msk)


def linalg_matrix_exp(self):
    _check_float("linalg.matrix_exp", self)
    _square("linalg.matrix_exp", self)
    batch, n = tuple(self.shape[:-2]), self.shape[-1]
    blk = _block(n)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    nb = _nbatch(batch)
    if nb == 0 or n == 0:
        return out
    _matrix_exp_kernel[(nb,)](self, out, n, *_bsizes(batch), *_margs(self, batch), *_margs(out, batch),
                              DEGREE=18, ODT=dtype_code(self.dtype), BLK=blk)
    return out


def triangular_solve_X(self, A, upper=True, transpose=False, unitriangular=False, *, X, M):
    """The legacy triangular_solve: solve_triangular on the broadcast operands (A^T when
    `transpose`, conjugated never), and A's broadcast copy as the second result."""
    if self.dim() < 2 or A.dim() < 2:
        raise Unsupported("triangular_solve of fewer than 2 dims (the CPU's error)")
    batch = torch.broadcast_shapes(tuple(self.shape[:-2]), tuple(A.shape[:-2]))
    Ab = A.expand(*batch, *A.shape[-2:])
    solution = torch.linalg.solve_triangular(Ab.mT if transpose else Ab, self.expand(*batch, *self.shape[-2:]),
                                             upper=upper != transpose, unitriangular=unitriangular)
    resize_out(X, solution.shape).copy_(solution)
    resize_out(M, Ab.shape).copy_(Ab)
    return X, M


# ------------------------------------------------------------------- table ----
KERNELS: dict[str, Callable] = {
    "linalg_lu_factor_ex.out": linalg_lu_factor_ex_out,
    "lu_unpack.out": lu_unpack_out,
    "linalg_lu.out": linalg_lu_out,
    "linalg_lu_solve.out": linalg_lu_solve_out,
    "linalg_solve_triangular": linalg_solve_triangular,
    "linalg_solve_triangular.out": linalg_solve_triangular_out,
    "_linalg_solve_ex.result": _linalg_solve_ex_result,
    "linalg_inv_ex.inverse": linalg_inv_ex_inverse,
    "_linalg_det.result": _linalg_det_result,
    "_linalg_slogdet.sign": _linalg_slogdet_sign,
    "linalg_cholesky_ex.L": linalg_cholesky_ex_L,
    "cholesky": cholesky,
    "cholesky_inverse": cholesky_inverse,
    "_cholesky_solve_helper": _cholesky_solve_helper,
    "linalg_qr.out": linalg_qr_out,
    "geqrf": geqrf,
    "_linalg_svd.U": _linalg_svd_U,
    "_linalg_eigh.eigenvalues": _linalg_eigh_eigenvalues,
    "linalg_householder_product": linalg_householder_product,
    "linalg_householder_product.out": linalg_householder_product_out,
    "ormqr": ormqr,
    "ormqr.out": ormqr_out,
    "linalg_cross": linalg_cross,
    "linalg_cross.out": linalg_cross_out,
    "linalg_lstsq.out": linalg_lstsq_out,
    "linalg_ldl_factor_ex.out": linalg_ldl_factor_ex_out,
    "linalg_ldl_solve.out": linalg_ldl_solve_out,
    "linalg_matrix_exp": linalg_matrix_exp,
    "triangular_solve.X": triangular_solve_X,
}


# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
