"""torch_fl.triton_ops linalg family, complex kernels (_linalg_complex.py) against the CPU aten op.

Kernels run under Triton's interpreter on CPU tensors, or compiled on a GPU
(tests/triton_ops/triton_device.py). Small matrices and few parametrizations: the interpreter is slow.
"""
from triton_device import on_device

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

C64, C128, I32 = torch.complex64, torch.complex128, torch.int32
REAL = {C64: torch.float32, C128: torch.float64}
TOL = {C64: dict(rtol=1.3e-6, atol=1e-5), C128: dict(rtol=1e-7, atol=1e-7),
       torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7)}
DTYPES = [C64, C128]
EXERCISED: set = set()


def k(name):
    from torch_fl.triton_ops._linalg_complex import COMPLEX_KERNELS

    EXERCISED.add(name)
    return on_device(COMPLEX_KERNELS[name])


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **{**TOL.get(expected.dtype, {}), **kw})


def rnd(*shape, dtype=C64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=C128).to(dtype)


def well_conditioned(*shape, dtype=C64, seed=0):
    a = rnd(*shape, dtype=C128, seed=seed)
    return (a + a.shape[-1] * torch.eye(a.shape[-1], dtype=C128) * torch.sgn(a[..., :1, :1])).to(dtype)


def hpd(*shape, dtype=C64, seed=0):
    a = rnd(*shape, dtype=C128, seed=seed)
    return (a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=C128)).to(dtype)


def empty(dtype=C64):
    return torch.empty(0, dtype=dtype)


def noncontig(t):
    """Same values, transposed memory (batched column-major)."""
    return t.mT.contiguous().mT


def eye_like(t):
    n = t.shape[-1]
    return torch.eye(n, dtype=t.dtype).expand(t.shape[:-2] + (n, n))


def assert_phase_convention(V, ncols=None):
    """Each column's entry of largest modulus is real and positive (this family's phase choice)."""
    V = V[..., :ncols] if ncols is not None else V
    if V.numel() == 0:
        return
    idx = V.abs().argmax(dim=-2, keepdim=True)
    top = V.gather(-2, idx)
    assert (top.imag.abs() <= 1e-5 * top.abs()).all() and (top.real > 0).all()


# ------------------------------------------------------------- SVD ---------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 1, 3, 3), (2, 0, 3)])
def test_svd(dtype, shape):
    A = rnd(*shape, dtype=dtype)
    for full in (False, True):
        U, S, Vh = k("_linalg_svd.U")(noncontig(A) if full else A, full, U=empty(dtype), S=empty(REAL[dtype]),
                                      Vh=empty(dtype))
        eU, eS, eVh = torch.linalg.svd(A, full_matrices=full)
        assert U.shape == eU.shape and Vh.shape == eVh.shape and S.dtype == REAL[dtype]
        close(S, eS)
        kk = S.shape[-1]
        # as torch's OpInfo: |U|, |Vh| and U Vh of the k leading vectors (phase-invariant)
        close(U[..., :kk].abs(), eU[..., :kk].abs())
        close(Vh[..., :kk, :].abs(), eVh[..., :kk, :].abs())
        close(U[..., :kk] @ Vh[..., :kk, :], eU[..., :kk] @ eVh[..., :kk, :])
        close(U[..., :kk] * S.unsqueeze(-2).to(dtype) @ Vh[..., :kk, :], A)
        close(U.mH @ U, eye_like(U), atol=1e-6, rtol=0)
        close(Vh @ Vh.mH, eye_like(Vh.mH), atol=1e-6, rtol=0)
        assert_phase_convention(U, kk)
    U2, S2, Vh2 = k("_linalg_svd.U")(A, False, False, U=empty(dtype), S=empty(REAL[dtype]), Vh=empty(dtype))
    close(S2, torch.linalg.svdvals(A))
    assert U2.numel() == 0 and Vh2.numel() == 0


def test_svd_rank_deficient_and_conj_input():
    A = rnd(5, 2, dtype=C128) @ rnd(2, 4, dtype=C128, seed=1)  # rank 2
    U, S, Vh = k("_linalg_svd.U")(A, True, U=empty(C128), S=empty(torch.float64), Vh=empty(C128))
    close(S, torch.linalg.svdvals(A), atol=1e-12)
    close(U.mH @ U, torch.eye(5, dtype=C128), atol=1e-12, rtol=0)
    close(U[:, :4] * S.to(C128) @ Vh, A, atol=1e-12)
    B = rnd(3, 4, seed=2)
    U, S, Vh = k("_linalg_svd.U")(B.conj(), U=empty(), S=empty(torch.float32), Vh=empty())
    close(U * S.to(C64) @ Vh, B.conj().resolve_conj())


# ------------------------------------------------------------------ LU -----
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (3, 4, 6), (6, 3), (0, 3, 3), (3, 0)])
def test_lu_factor_ex_unpack_and_lu(shape, dtype):
    A = rnd(*shape, dtype=dtype)
    LU, piv, info = k("linalg_lu_factor_ex.out")(A, LU=empty(dtype), pivots=empty(I32), info=empty(I32))
    eLU, epiv, einfo = torch.linalg.lu_factor_ex(A)
    close(LU, eLU)
    assert piv.dtype == I32 and torch.equal(piv, epiv)
    assert torch.equal(info, einfo)
    P, L, U = k("lu_unpack.out")(eLU, epiv, P=empty(dtype), L=empty(dtype), U=empty(dtype))
    for a, e in zip((P, L, U), torch.lu_unpack(eLU, epiv)):
        close(a, e, rtol=0, atol=0)
    P, L, U = k("linalg_lu.out")(noncontig(A), P=empty(dtype), L=empty(dtype), U=empty(dtype))
    for a, e in zip((P, L, U), torch.linalg.lu(A)):
        close(a, e)


def test_lu_pivots_by_cabs1_and_singular_info():
    # column 0: |2.9+2.9j| = 4.10 < 4.2, but izamax's cabs1 = |re| + |im| is 5.8 > 4.2: row 1 is the pivot
    A = torch.tensor([[4.2, 1, 2], [2.9 + 2.9j, 0, 1], [1, 2, 0]], dtype=C128)
    LU, piv, info = k("linalg_lu_factor_ex.out")(A, LU=empty(C128), pivots=empty(I32), info=empty(I32))
    eLU, epiv, _ = torch.linalg.lu_factor_ex(A)
    assert piv.tolist() == epiv.tolist() and piv[0].item() == 2
    close(LU, eLU)
    A = rnd(3, 4, 4)
    A[1, :, 2] = 0  # the third pivot is zero: info = 3, elimination goes on
    LU, piv, info = k("linalg_lu_factor_ex.out")(A, LU=empty(), pivots=empty(I32), info=empty(I32))
    eLU, epiv, einfo = torch.linalg.lu_factor_ex(A)
    assert info.tolist() == einfo.tolist() == [0, 3, 0]
    close(LU, eLU)
    assert torch.equal(piv, epiv)
    P, L, U = k("lu_unpack.out")(eLU, epiv, False, True, P=empty(), L=empty(), U=empty())
    eP, eL, eU = torch.lu_unpack(eLU, epiv, unpack_data=False)
    assert torch.equal(P, eP) and L.shape == eL.shape and U.shape == eU.shape
    with pytest.raises(RuntimeError, match="not invertible|singular|zero"):
        k("linalg_lu_factor_ex.out")(A, check_errors=True, LU=empty(), pivots=empty(I32), info=empty(I32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet(dtype):
    A = rnd(3, 5, 5, dtype=dtype)
    A[2] = 0  # singular: det 0, sign 0, logabsdet -inf
    det, LU, piv = k("_linalg_det.result")(A, result=empty(dtype), LU=empty(dtype), pivots=empty(I32))
    edet, eLU, epiv = torch.ops.aten._linalg_det(A)
    close(det, edet)
    close(LU, eLU)
    assert torch.equal(piv, epiv)
    sign, logabs, LU, piv = k("_linalg_slogdet.sign")(noncontig(A), sign=empty(dtype), logabsdet=empty(REAL[dtype]),
                                                      LU=empty(dtype), pivots=empty(I32))
    esign, elogabs, eLU, _ = torch.ops.aten._linalg_slogdet(A)
    assert sign.dtype == dtype and logabs.dtype == REAL[dtype]
    close(sign, esign)
    close(logabs, elogabs)
    close(LU, eLU)
    d0 = k("_linalg_det.result")(rnd(0, 0, dtype=dtype), result=empty(dtype), LU=empty(dtype), pivots=empty(I32))[0]
    assert d0.item() == 1.0


# ---------------------------------------------------------------- solves ---
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper,left,unit", [(False, True, False), (True, True, True), (True, False, False),
                                             (False, False, True)])
def test_solve_triangular(dtype, upper, left, unit):
    A = well_conditioned(2, 1, 5, 5, dtype=dtype)
    B = rnd(3, 5, 2, dtype=dtype, seed=1)  # batch dims broadcast: (2, 1) with (3,)
    B = B if left else B.mT
    expected = torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    close(k("linalg_solve_triangular")(A, B, upper=upper, left=left, unitriangular=unit), expected)
    out = torch.empty(7, dtype=dtype)
    got = k("linalg_solve_triangular.out")(noncontig(A), B, upper=upper, left=left, unitriangular=unit, out=out)
    assert got is out
    close(out, expected)


def test_solve_triangular_conj_views_and_in_place():
    # the op is on torch's Conjugate fallthrough list: lazily conjugated A and B reach the kernel
    A, B = well_conditioned(4, 4, dtype=C128), rnd(4, 3, dtype=C128, seed=2)
    for a, b in ((A.conj(), B), (A, B.conj()), (A.mH, B.conj()), (A.conj().mT, B)):
        for left in (True, False):
            bb = b if left else b.mT
            expected = torch.linalg.solve_triangular(a.resolve_conj(), bb.resolve_conj(), upper=True, left=left)
            close(k("linalg_solve_triangular")(a, bb, upper=True, left=left), expected)
    Bc = B.clone()
    k("linalg_solve_triangular.out")(A, Bc, upper=False, out=Bc)
    close(Bc, torch.linalg.solve_triangular(A, B, upper=False))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    A = rnd(2, 5, 5, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    B = rnd(5, 3, dtype=dtype, seed=1)
    B = B if left else B.mT
    got = k("linalg_lu_solve.out")(LU, piv, B, left=left, adjoint=adjoint, out=empty(dtype))
    close(got, torch.linalg.lu_solve(LU, piv, B, left=left, adjoint=adjoint))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
def test_solve_ex(dtype, left):
    A = rnd(2, 4, 4, dtype=dtype)
    for B in (rnd(2, 4, 3, dtype=dtype, seed=1), rnd(2, 4, dtype=dtype, seed=1)):
        if B.dim() == 2 and not left:
            continue
        B = B if left or B.dim() == 2 else B.mT
        got = k("_linalg_solve_ex.result")(A, B, left=left, result=empty(dtype), LU=empty(dtype),
                                           pivots=empty(I32), info=empty(I32))
        expected = torch.ops.aten._linalg_solve_ex(A, B, left=left)
        close(got[0], expected[0])
        close(got[1], expected[1])
        assert torch.equal(got[2], expected[2]) and torch.equal(got[3], expected[3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_ex(dtype):
    A = rnd(3, 4, 4, dtype=dtype)
    A[1] = 0
    inv, info = k("linalg_inv_ex.inverse")(noncontig(A), inverse=empty(dtype), info=empty(I32))
    einv, einfo = torch.linalg.inv_ex(A)
    assert torch.equal(info, einfo) and info.tolist() == [0, 1, 0]
    close(inv[[0, 2]], einv[[0, 2]])
    with pytest.raises(RuntimeError, match="not invertible|singular"):
        k("linalg_inv_ex.inverse")(A, check_errors=True, inverse=empty(dtype), info=empty(I32))
    inv, info = k("linalg_inv_ex.inverse")(rnd(2, 0, 0, dtype=dtype), inverse=empty(dtype), info=empty(I32))
    assert inv.shape == (2, 0, 0) and info.tolist() == [0, 0]


# -------------------------------------------------------------- cholesky ---
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(dtype, upper):
    A = hpd(2, 5, 5, dtype=dtype)
    # garbage in the ignored triangle and in the diagonal's imaginary part must not matter
    g = rnd(5, 5, dtype=dtype, seed=3)
    Ag = A + (torch.triu(g, 1) if not upper else torch.tril(g, -1)) + 1j * torch.diag(g.diagonal().real)
    L, info = k("linalg_cholesky_ex.L")(Ag, upper=upper, L=empty(dtype), info=empty(I32))
    eL, einfo = torch.linalg.cholesky_ex(A, upper=upper)
    close(L, eL)
    assert torch.equal(info, einfo)
    close(k("cholesky")(A, upper), torch.cholesky(A, upper))
    close(k("cholesky_inverse")(eL, upper), torch.cholesky_inverse(eL, upper))
    B = rnd(5, 2, dtype=dtype, seed=1)
    close(k("_cholesky_solve_helper")(B.expand(2, 5, 2), eL, upper), torch.cholesky_solve(B, eL, upper))


def test_cholesky_not_positive_definite():
    A = hpd(3, 4, 4)
    A[1, 2, 2] = -100.0
    L, info = k("linalg_cholesky_ex.L")(A, L=empty(), info=empty(I32))
    assert info.tolist() == torch.linalg.cholesky_ex(A).info.tolist() == [0, 3, 0]
    close(L[[0, 2]], torch.linalg.cholesky(A[[0, 2]]))
    with pytest.raises(RuntimeError, match="positive-definite"):
        k("cholesky")(A, False)
    L, info = k("linalg_cholesky_ex.L")(rnd(0, 0), L=empty(), info=empty(I32))
    assert L.shape == (0, 0) and info.item() == 0


# ------------------------------------------------------------------ eigh ---
@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh(dtype):
    S = rnd(2, 4, 4, dtype=dtype)
    S = S + S.mH
    g = rnd(4, 4, dtype=dtype, seed=4)
    for uplo, A in (("L", S), ("U", noncontig(S[1, :3, :3]))):
        # garbage in the ignored triangle and in the diagonal's imaginary part must not matter
        gg = g[:A.shape[-1], :A.shape[-1]]
        Ag = A + (torch.triu(gg, 1) if uplo == "L" else torch.tril(gg, -1)) + 1j * torch.diag(gg.diagonal().real)
        w, v = k("_linalg_eigh.eigenvalues")(Ag, uplo, eigenvalues=empty(REAL[dtype]), eigenvectors=empty(dtype))
        ew, ev = torch.linalg.eigh(A)
        assert w.dtype == REAL[dtype] and v.dtype == dtype
        close(w, ew)
        close(v.abs(), ev.abs())  # eigenvectors are unique up to a phase: OpInfo compares |V|
        close(v @ torch.diag_embed(w.to(dtype)) @ v.mH, A)
        assert_phase_convention(v)
    w2, v2 = k("_linalg_eigh.eigenvalues")(S[0, 1:, 1:].conj(), "U", False, eigenvalues=empty(REAL[dtype]),
                                           eigenvectors=empty(dtype))
    close(w2, torch.linalg.eigvalsh(S[0, 1:, 1:].conj()))
    assert v2.numel() == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_converges_past_tiny_off_diagonals(dtype):
    # Sweeps after convergence meet off-diagonal parts near 1e-160, whose squares underflow: the
    # phase conj(a)/|a| must still have modulus 1 (it once scaled rows, eigenvalues off by 0.2).
    # This matrix reaches them (with the phase unscaled its eigenvalues come out 2e-2 off).
    S = rnd(8, 8, dtype=dtype, seed=9)
    S = S + S.mH
    w, _ = k("_linalg_eigh.eigenvalues")(S, "L", False, eigenvalues=empty(REAL[dtype]), eigenvectors=empty(dtype))
    close(w, torch.linalg.eigvalsh(S))


# -------------------------------------------------------------------- QR ---
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
def test_qr_geqrf(dtype, shape):
    A = rnd(*shape, dtype=dtype)
    if A.numel():
        A[..., 1:, 0] = 0  # x = 0 below a complex alpha: zlarfg's tau is still nonzero (R's diagonal real)
    for mode in ("reduced", "complete", "r"):
        Q, R = k("linalg_qr.out")(noncontig(A), mode, Q=empty(dtype), R=empty(dtype))
        eQ, eR = torch.linalg.qr(A, mode)
        assert Q.shape == eQ.shape
        close(Q, eQ)  # Householder phases as LAPACK: compared as they are
        close(R, eR)
    a, tau = k("geqrf")(A)
    ea, etau = torch.geqrf(A)
    assert a.stride() == ea.stride() or a.numel() == 0
    close(a, ea)
    close(tau, etau)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (2, 1, 5, 3)])
def test_householder_product_ormqr(dtype, shape):
    a, tau = torch.geqrf(rnd(*shape, dtype=dtype))
    for t in (tau, tau[..., :2], tau[..., :0]):
        expected = torch.linalg.householder_product(a, t)
        close(k("linalg_householder_product")(a, t), expected)
        out = torch.empty(3, dtype=dtype)
        assert k("linalg_householder_product.out")(noncontig(a), t, out=out) is out
        close(out, expected)
    m = shape[-2]
    for left in (True, False):
        for transpose in (False, True):
            C = rnd(*shape[:-2], *((m, 3) if left else (3, m)), dtype=dtype, seed=1)
            expected = torch.ormqr(a, tau, C, left, transpose)
            close(k("ormqr")(a, tau, C, left, transpose), expected)
            close(k("ormqr.out")(a, tau, noncontig(C), left, transpose, out=empty(dtype)), expected)


# ----------------------------------------------------------------- lstsq ---
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,drivers", [((4, 3), ("gelsy", "gels", "gelss")), ((2, 3), ("gelsd",)),
                                           ((2, 5, 3), ("gelsd",))])
def test_lstsq(dtype, shape, drivers):
    A = rnd(*shape, dtype=C128)
    A = (A + torch.eye(*shape[-2:], dtype=C128) * 3).to(dtype)  # well conditioned
    for driver in drivers:
        for B in (rnd(*shape[:-1], 2, dtype=dtype, seed=1), rnd(*shape[:-1], dtype=dtype, seed=1)):
            if B.dim() == 1 and len(shape) == 2:
                continue
            expected = torch.linalg.lstsq(A, B, driver=driver)
            got = k("linalg_lstsq.out")(A, B, driver=driver, solution=empty(dtype), residuals=empty(REAL[dtype]),
                                        rank=empty(torch.int64), singular_values=empty(REAL[dtype]))
            for g, e in zip(got, expected):
                assert g.shape == e.shape and g.dtype == e.dtype
                close(g, e, **({} if e.dtype.is_floating_point or e.is_complex() else dict(rtol=0, atol=0)))


# ------------------------------------------------------------------- LDL ---
def _ldl_cases(dtype, hermitian):
    a = rnd(2, 5, 5, dtype=C128, seed=5)
    a = a + (a.mH if hermitian else a.mT)
    zero_diag = a.clone()
    zero_diag[..., [0, 1, 3], [0, 1, 3]] = 0  # forces 2x2 pivots and interchanges
    zero_col = a.clone()
    zero_col[1, :, 2] = 0
    zero_col[1, 2, :] = 0  # a zero column: info, no elimination there
    return [t.to(dtype) for t in (a, zero_diag, zero_col, hpd(4, 4, dtype=C128))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_factor_and_solve(dtype, hermitian):
    saw_2x2 = False
    for A in _ldl_cases(dtype, hermitian):
        LD, piv, info = k("linalg_ldl_factor_ex.out")(A, hermitian=hermitian, LD=empty(dtype), pivots=empty(I32),
                                                      info=empty(I32))
        eLD, epiv, einfo = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
        assert torch.equal(piv, epiv) and torch.equal(info, einfo)
        close(LD, eLD)
        saw_2x2 |= bool((epiv < 0).any())
        if (einfo != 0).any():
            continue
        B = rnd(*A.shape[:-1], 3, dtype=dtype, seed=6)
        expected = torch.linalg.ldl_solve(eLD, epiv, B, hermitian=hermitian)
        close(k("linalg_ldl_solve.out")(eLD, epiv, B, hermitian=hermitian, out=empty(dtype)), expected,
              **({} if dtype == C128 else dict(rtol=1e-5, atol=1e-4)))
    assert saw_2x2, "the cases must exercise 2x2 pivots"


# ------------------------------------------------------------ matrix_exp --
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp(dtype):
    for A in (rnd(3, 4, 4, dtype=dtype), rnd(5, 5, dtype=dtype) * 3, torch.zeros(2, 2, dtype=dtype),
              noncontig(rnd(2, 3, 3, dtype=dtype) * 0.01), rnd(3, 3, dtype=dtype).conj()):
        truth = torch.linalg.matrix_exp(A.to(C128))
        got = k("linalg_matrix_exp")(A)
        assert got.dtype == dtype
        close(got.to(C128), truth, **({} if dtype == C128 else dict(rtol=1.3e-6 * 4, atol=1e-5)))


# ---------------------------------------------------------- declining ------
def test_unsupported_inputs_decline():
    half = rnd(3, 3).to(torch.complex32)
    out = torch.full((3, 3), 7.0 + 0j, dtype=C64)
    with pytest.raises(tops.Unsupported, match="complex32|dtype"):
        k("linalg_inv_ex.inverse")(half, inverse=out, info=empty(I32))
    assert (out == 7).all()  # nothing written
    with pytest.raises(tops.Unsupported):
        k("linalg_matrix_exp")(rnd(3, 3).real)
    with pytest.raises(tops.Unsupported, match="mixed"):
        k("linalg_solve_triangular")(rnd(3, 3), rnd(3, 2, dtype=C128), upper=True)
    with pytest.raises(tops.Unsupported, match="exceeds"):
        k("linalg_inv_ex.inverse")(rnd(65, 65), inverse=out, info=empty(I32))
    with pytest.raises(tops.Unsupported, match="batch dims"):
        k("linalg_inv_ex.inverse")(rnd(1, 1, 1, 1, 1, 2, 2), inverse=out, info=empty(I32))
    with pytest.raises(tops.Unsupported, match="conjugate"):
        k("linalg_solve_triangular.out")(rnd(3, 3), rnd(3, 2), upper=True, out=torch.empty(3, 2, dtype=C64).conj())
    assert out.shape == (3, 3) and (out == 7).all()


def test_zz_every_complex_op_exercised():
    from torch_fl.triton_ops._linalg_complex import COMPLEX_KERNELS

    assert set(COMPLEX_KERNELS) <= set(tops.family_ops("linalg"))
    missing = set(COMPLEX_KERNELS) - EXERCISED
    assert not missing, f"complex kernels without a test: {sorted(missing)}"
