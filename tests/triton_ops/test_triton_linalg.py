"""torch_fl.triton_ops linalg family: every kernel against the CPU aten op (LAPACK).

Kernels run under Triton's interpreter on CPU tensors, or compiled on a GPU
(tests/triton_ops/triton_device.py), and a few on `npu` tensors.
"""
from triton_device import npu_available, on_device

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, I32 = torch.float32, torch.float64, torch.int32
TOL = {F32: dict(rtol=1.3e-6, atol=1e-5), F64: dict(rtol=1e-7, atol=1e-7)}
EXERCISED: set = set()


def k(name):
    EXERCISED.add(name)
    return on_device(tops.kernel_for(name))


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **{**TOL.get(expected.dtype, {}), **kw})


def rnd(*shape, dtype=F32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def well_conditioned(*shape, dtype=F32, seed=0):
    """Random square matrices plus n*I: LU pivots still vary, the condition number stays small."""
    a = rnd(*shape, dtype=F64, seed=seed)
    return (a + a.shape[-1] * torch.eye(a.shape[-1], dtype=F64) * torch.sign(a[..., :1, :1])).to(dtype)


def spd(*shape, dtype=F32, seed=0):
    a = rnd(*shape, dtype=F64, seed=seed)
    return (a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=F64)).to(dtype)


def empty(dtype=F32):
    return torch.empty(0, dtype=dtype)


def noncontig(t):
    """Same values, transposed memory (batched column-major)."""
    return t.mT.contiguous().mT


# ------------------------------------------------------------------ LU -----
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (3, 4, 6), (6, 3), (2, 1, 3, 3), (0, 3, 3), (3, 0)])
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
    P, L, U = k("linalg_lu.out")(noncontig(A) if A.dim() >= 2 else A, P=empty(dtype), L=empty(dtype),
                                 U=empty(dtype))
    for a, e in zip((P, L, U), torch.linalg.lu(A)):
        close(a, e)


def test_lu_unpack_flags_and_singular_info():
    A = rnd(3, 4, 4)
    A[1, :, 2] = 0  # column 3 zero: the third pivot is zero, getrf reports info = 3 and goes on
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


@pytest.mark.parametrize("dtype", [F32, F64])
def test_det_slogdet(dtype):
    A = rnd(3, 5, 5, dtype=dtype)
    A[2] = 0  # singular: det 0, sign 0, logabsdet -inf
    det, LU, piv = k("_linalg_det.result")(A, result=empty(dtype), LU=empty(dtype), pivots=empty(I32))
    edet, eLU, epiv = torch.ops.aten._linalg_det(A)
    close(det, edet)
    close(LU, eLU)
    assert torch.equal(piv, epiv)
    sign, logabs, LU, piv = k("_linalg_slogdet.sign")(A, sign=empty(dtype), logabsdet=empty(dtype), LU=empty(dtype),
                                                      pivots=empty(I32))
    esign, elogabs, _, _ = torch.ops.aten._linalg_slogdet(A)
    close(sign, esign)
    close(logabs, elogabs)
    d0 = k("_linalg_det.result")(rnd(0, 0, dtype=dtype), result=empty(dtype), LU=empty(dtype), pivots=empty(I32))[0]
    assert d0.item() == 1.0


# ---------------------------------------------------------------- solves ---
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
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


def test_solve_triangular_in_place_out_is_b():
    A, B = well_conditioned(4, 4), rnd(4, 3, seed=2)
    expected = torch.linalg.solve_triangular(A, B, upper=True)
    k("linalg_solve_triangular.out")(A, B, upper=True, out=B)
    close(B, expected)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    A = rnd(2, 5, 5, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    B = rnd(5, 3, dtype=dtype, seed=1)
    B = B if left else B.mT
    got = k("linalg_lu_solve.out")(LU, piv, B, left=left, adjoint=adjoint, out=empty(dtype))
    close(got, torch.linalg.lu_solve(LU, piv, B, left=left, adjoint=adjoint))


@pytest.mark.parametrize("dtype", [F32, F64])
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


@pytest.mark.parametrize("dtype", [F32, F64])
def test_inv_ex(dtype):
    A = rnd(3, 4, 4, dtype=dtype)
    A[1] = 0
    inv, info = k("linalg_inv_ex.inverse")(noncontig(A), inverse=empty(dtype), info=empty(I32))
    einv, einfo = torch.linalg.inv_ex(A)
    assert torch.equal(info, einfo) and info.tolist() == [0, 1, 0]
    close(inv[[0, 2]], einv[[0, 2]])
    with pytest.raises(RuntimeError, match="not invertible|singular"):
        k("linalg_inv_ex.inverse")(A, check_errors=True, inverse=empty(dtype), info=empty(I32))


# -------------------------------------------------------------- cholesky ---
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(dtype, upper):
    A = spd(2, 5, 5, dtype=dtype)
    # garbage in the ignored triangle must not matter
    Ag = A + (torch.triu(rnd(5, 5, dtype=dtype, seed=3), 1) if not upper else torch.tril(rnd(5, 5, dtype=dtype), -1))
    L, info = k("linalg_cholesky_ex.L")(Ag, upper=upper, L=empty(dtype), info=empty(I32))
    eL, einfo = torch.linalg.cholesky_ex(A, upper=upper)
    close(L, eL)
    assert torch.equal(info, einfo)
    close(k("cholesky")(A, upper), torch.cholesky(A, upper))
    close(k("cholesky_inverse")(eL, upper), torch.cholesky_inverse(eL, upper))
    B = rnd(5, 2, dtype=dtype, seed=1)
    close(k("_cholesky_solve_helper")(B.expand(2, 5, 2), eL, upper), torch.cholesky_solve(B, eL, upper))


def test_cholesky_not_positive_definite():
    A = spd(3, 4, 4)
    A[1, 2, 2] = -100.0
    L, info = k("linalg_cholesky_ex.L")(A, L=empty(), info=empty(I32))
    assert info.tolist() == torch.linalg.cholesky_ex(A).info.tolist() == [0, 3, 0]
    close(L[[0, 2]], torch.linalg.cholesky(A[[0, 2]]))
    with pytest.raises(RuntimeError, match="positive-definite"):
        k("cholesky")(A, False)


# -------------------------------------------------------------------- QR ---
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (1, 1), (0, 3)])
def test_qr_geqrf(dtype, shape):
    A = rnd(*shape, dtype=dtype)
    for mode in ("reduced", "complete", "r"):
        Q, R = k("linalg_qr.out")(noncontig(A), mode, Q=empty(dtype), R=empty(dtype))
        eQ, eR = torch.linalg.qr(A, mode)
        assert Q.shape == eQ.shape
        close(Q, eQ)  # Householder signs as LAPACK: compared as they are
        close(R, eR)
    a, tau = k("geqrf")(A)
    ea, etau = torch.geqrf(A)
    close(a, ea)
    close(tau, etau)


# ------------------------------------------------------------- SVD / eigh --
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (1, 3), (2, 0, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, shape, full):
    A = rnd(*shape, dtype=dtype)
    U, S, Vh = k("_linalg_svd.U")(A, full, U=empty(dtype), S=empty(dtype), Vh=empty(dtype))
    eU, eS, eVh = torch.linalg.svd(A, full_matrices=full)
    assert U.shape == eU.shape and Vh.shape == eVh.shape
    close(S, eS)
    kk = S.shape[-1]
    # singular vectors are unique up to sign: compare |U|, |Vh| of the k leading ones, and U S Vh
    close(U[..., :kk].abs(), eU[..., :kk].abs())
    close(Vh[..., :kk, :].abs(), eVh[..., :kk, :].abs())
    close((U[..., :kk] * S.unsqueeze(-2)) @ Vh[..., :kk, :], A, atol=1e-5 if dtype == F32 else 1e-12)
    eye = lambda n: torch.eye(n, dtype=dtype)  # noqa: E731
    close(U.mT @ U, eye(U.shape[-1]).expand(U.mT.shape[:-2] + (U.shape[-1],) * 2), atol=1e-6, rtol=0)
    close(Vh @ Vh.mT, eye(Vh.shape[-2]).expand(Vh.shape[:-2] + (Vh.shape[-2],) * 2), atol=1e-6, rtol=0)
    U2, S2, Vh2 = k("_linalg_svd.U")(A, full, False, U=empty(dtype), S=empty(dtype), Vh=empty(dtype))
    close(S2, eS)
    assert U2.numel() == 0 and Vh2.numel() == 0


def test_svd_rank_deficient_completes_u():
    A = rnd(5, 2, dtype=F64) @ rnd(2, 4, dtype=F64, seed=1)  # rank 2
    U, S, Vh = k("_linalg_svd.U")(A, True, U=empty(F64), S=empty(F64), Vh=empty(F64))
    close(S, torch.linalg.svdvals(A), atol=1e-12)
    close(U.mT @ U, torch.eye(5, dtype=F64), atol=1e-12, rtol=0)
    close(U[:, :4] * S @ Vh, A, atol=1e-12)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    S = rnd(2, 5, 5, dtype=dtype)
    S = S + S.mT
    Sg = S + (torch.triu(rnd(5, 5, dtype=dtype, seed=4), 1) if uplo == "L" else torch.tril(rnd(5, 5, dtype=dtype), -1))
    w, v = k("_linalg_eigh.eigenvalues")(Sg, uplo, eigenvalues=empty(dtype), eigenvectors=empty(dtype))
    ew, ev = torch.linalg.eigh(S)
    close(w, ew)
    close(v.abs(), ev.abs())  # eigenvectors are unique up to sign
    w2, v2 = k("_linalg_eigh.eigenvalues")(S, uplo, False, eigenvalues=empty(dtype), eigenvectors=empty(dtype))
    close(w2, ew)
    assert v2.numel() == 0


# --------------------------------------------------- Householder products --
@pytest.mark.parametrize("dtype", [F32, F64])
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


# ----------------------------------------------------- triangular_solve (legacy) --
@pytest.mark.parametrize("dtype", [F32, F64])
def test_triangular_solve(dtype):
    A = well_conditioned(2, 4, 4, dtype=dtype).triu()
    for upper, transpose, unit in ((True, False, False), (True, True, False), (False, False, True),
                                   (False, True, True)):
        M = A if upper else A.mT
        B = rnd(3, 1, 4, 2, dtype=dtype, seed=5)  # batch dims broadcast against A's
        X, C = k("triangular_solve.X")(B, M, upper, transpose, unit, X=empty(dtype), M=empty(dtype))
        eX, eC = torch.triangular_solve(B, M, upper, transpose, unit)
        close(X, eX)
        close(C, eC)


# ------------------------------------------------------------------ cross --
@pytest.mark.parametrize("dtype", [F32, F64, torch.int64, I32])
def test_cross(dtype):
    for sa, sb, dim in [((5, 3), (5, 3), -1), ((4, 3, 2), (4, 3, 2), 1), ((1, 3), (5, 3), -1), ((0, 3), (0, 3), 1)]:
        a, b = (rnd(*sa, seed=1) * 10).to(dtype), (rnd(*sb, seed=2) * 10).to(dtype)
        expected = torch.linalg.cross(a, b, dim=dim)
        close(k("linalg_cross")(a, b, dim=dim), expected, **({} if dtype.is_floating_point else dict(rtol=0, atol=0)))
        out = torch.empty(2, 2, dtype=dtype).mT  # wrong shape and not contiguous: resized
        close(k("linalg_cross.out")(a, b, dim=dim, out=out), expected)
    with pytest.raises(RuntimeError, match="must have length 3"):
        k("linalg_cross")(rnd(2, 4), rnd(2, 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cross_of_16_bit_floats_rounds_once(dtype):
    # computed in fp32 and rounded once: within half an ulp of the exact product, where ATen's
    # CPU kernel rounds each product
    a, b = rnd(6, 3, seed=1).to(dtype), rnd(6, 3, seed=2).to(dtype)
    got = k("linalg_cross")(a, b)
    assert got.dtype == dtype
    exact = torch.linalg.cross(a.double(), b.double())
    torch.testing.assert_close(got, exact.to(dtype), rtol=0, atol=0)


# ----------------------------------------------------------------- lstsq ---
@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 3), (2, 5, 3)])
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelss", "gelsd"])
def test_lstsq(shape, driver):
    A = rnd(*shape, dtype=F64)
    A = (A + torch.eye(*shape[-2:], dtype=F64) * 3).to(F32)  # well conditioned
    for B in (rnd(*shape[:-1], 2, seed=1), rnd(*shape[:-1], seed=1) if len(shape) == 3 else None):
        if B is None:
            continue
        expected = torch.linalg.lstsq(A, B, driver=driver)
        got = k("linalg_lstsq.out")(A, B, driver=driver, solution=empty(), residuals=empty(),
                                    rank=empty(torch.int64), singular_values=empty())
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype
            close(g, e, **({} if e.dtype.is_floating_point else dict(rtol=0, atol=0)))


# ------------------------------------------------------------------- LDL ---
def _symmetric_cases(dtype):
    a = rnd(3, 6, 6, dtype=F64, seed=5)
    a = a + a.mT
    zero_diag = a.clone()
    zero_diag[..., [0, 1, 3], [0, 1, 3]] = 0  # forces 2x2 pivots and interchanges
    zero_col = a.clone()
    zero_col[1, :, 2] = 0
    zero_col[1, 2, :] = 0  # a zero column: info, no elimination there
    return [t.to(dtype) for t in (a, zero_diag, zero_col, spd(2, 5, 5, dtype=F64))]


@pytest.mark.parametrize("dtype", [F32, F64])
def test_ldl_factor_and_solve(dtype):
    saw_2x2 = False
    for A in _symmetric_cases(dtype):
        LD, piv, info = k("linalg_ldl_factor_ex.out")(A, LD=empty(dtype), pivots=empty(I32), info=empty(I32))
        eLD, epiv, einfo = torch.linalg.ldl_factor_ex(A)
        assert torch.equal(piv, epiv) and torch.equal(info, einfo)
        close(LD, eLD)
        saw_2x2 |= bool((epiv < 0).any())
        if (einfo != 0).any():
            continue
        B = rnd(*A.shape[:-1], 3, dtype=dtype, seed=6)
        expected = torch.linalg.ldl_solve(eLD, epiv, B)
        close(k("linalg_ldl_solve.out")(eLD, epiv, B, out=empty(dtype)), expected,
              **({} if dtype == F64 else dict(rtol=1e-5, atol=1e-4)))
    assert saw_2x2, "the cases must exercise 2x2 pivots"


# ------------------------------------------------------------ matrix_exp --
@pytest.mark.parametrize("dtype", [F32, F64])
def test_matrix_exp(dtype):
    for A in (rnd(3, 4, 4, dtype=dtype), rnd(5, 5, dtype=dtype) * 3, torch.zeros(2, 2, dtype=dtype),
              rnd(1, 1, dtype=dtype), noncontig(rnd(2, 3, 3, dtype=dtype) * 0.01)):
        truth = torch.linalg.matrix_exp(A.double())
        got = k("linalg_matrix_exp")(A)
        assert got.dtype == dtype
        # against the fp64 result: LAPACK-free, and aten's own fp32 result is further off
        close(got.double(), truth, **({} if dtype == F64 else dict(rtol=1.3e-6 * 4, atol=1e-5)))


# ---------------------------------------------------------- declining ------
def test_unsupported_inputs_decline():
    with pytest.raises(tops.Unsupported, match="exceeds"):
        k("linalg_inv_ex.inverse")(rnd(65, 65), inverse=empty(), info=empty(I32))
    half = torch.complex32  # complex64/complex128 have kernels of their own (_linalg_complex)
    with pytest.raises(tops.Unsupported):
        k("_linalg_svd.U")(rnd(3, 3).to(half), U=empty(half), S=empty(torch.float16), Vh=empty(half))


# ------------------------------------------------------------------ npu ----
@pytest.mark.skipif(not npu_available(), reason="npu backend not installed")
def test_on_npu():
    A, B = rnd(2, 4, 4), rnd(2, 4, 3, seed=1)
    dev = lambda t: t.to("npu")  # noqa: E731
    got = k("_linalg_solve_ex.result")(dev(A), dev(B), result=empty().to("npu"), LU=empty().to("npu"),
                                       pivots=empty(I32).to("npu"), info=empty(I32).to("npu"))
    assert got[0].device.type == "npu"
    close(got[0].cpu(), torch.linalg.solve(A, B))
    U, S, Vh = k("_linalg_svd.U")(dev(A), U=empty().to("npu"), S=empty().to("npu"), Vh=empty().to("npu"))
    close(S.cpu(), torch.linalg.svdvals(A))
    L, _ = k("linalg_cholesky_ex.L")(dev(spd(4, 4)), L=empty().to("npu"), info=empty(I32).to("npu"))
    close(L.cpu(), torch.linalg.cholesky(spd(4, 4)))


def test_zz_every_linalg_op_exercised():
    from torch_fl.triton_ops import family_ops

    missing = set(family_ops("linalg")) - EXERCISED
    assert not missing, f"ops without a test: {sorted(missing)}"
