"""Triton kernels of the fallback library (imported lazily: needs triton).

Dtype codes (`*DT` constexprs) are shared with `_impl.py`:
F32=0 F64=1 F16=2 BF16=3 I32=4 I64=5 BOOL=6 I8=7 U8=8 I16=9.
Compute dtypes (CDT) are only F32, F64, I32, I64: fp16/bf16 compute in fp32 and
round on store (the Triton interpreter also gets bf16 arithmetic wrong, so it
must never be computed in bf16), small ints and bool compute in int32.
"""
from __future__ import annotations

import os

import triton
import triton.language as tl


def _patch_interpreter_index() -> None:
    """Triton 3.6's interpreter turns a scalar kernel argument used as an index
    (``range(0, K, BLOCK)``) into a Python int with ``int(array_of_shape_(1,))``,
    which NumPy >= 2.4 rejects. Re-patch ``__index__`` with ``.item()`` (idempotent,
    interpreter mode only; nothing else of the interpreter is touched)."""
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return
    from triton.runtime import interpreter as _interp

    orig = _interp._patch_lang_tensor
    if getattr(orig, "_torch_fl_patched", False):
        return

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched._torch_fl_patched = True
    _interp._patch_lang_tensor = patched


_patch_interpreter_index()

# ---------------------------------------------------------------- op ids ---
# One table of pointwise op ids; the pointwise kernel is specialised on OP.
PW_OPS = (
    # unary
    "copy", "abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh",
    "silu", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
    "logical_not", "bitwise_not", "square", "cube", "inv_square",
    # binary
    "add", "sub", "mul", "div", "div_trunc", "div_floor", "pow", "maximum", "minimum",
    "fmod", "remainder", "atan2", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "gelu_backward", "gelu_tanh_backward", "silu_backward", "sigmoid_backward",
    "tanh_backward", "clamp_min", "clamp_max", "ipow",
    # ternary / quaternary (add/sub take alpha as 3rd operand)
    "add_alpha", "sub_alpha", "where", "clamp", "lerp", "threshold_backward",
    "addcmul", "addcdiv", "mul_scale",
)
OP_ID = {n: i for i, n in enumerate(PW_OPS)}
for _n, _i in OP_ID.items():
    globals()["OP_" + _n.upper()] = tl.constexpr(_i)

F32 = tl.constexpr(0)
F64 = tl.constexpr(1)
F16 = tl.constexpr(2)
BF16 = tl.constexpr(3)
I32 = tl.constexpr(4)
I64 = tl.constexpr(5)
BOOL = tl.constexpr(6)
I8 = tl.constexpr(7)
U8 = tl.constexpr(8)
I16 = tl.constexpr(9)


@triton.jit
def _to_cdt(v, CDT: tl.constexpr):
    if CDT == F32:
        return v.to(tl.float32)
    elif CDT == F64:
        return v.to(tl.float64)
    elif CDT == I64:
        return v.to(tl.int64)
    else:
        return v.to(tl.int32)


@triton.jit
def _to_odt(v, ODT: tl.constexpr):
    # floats are narrowed through fp32 (fp64 -> fp32 -> bf16 matches c10's
    # double -> BFloat16 conversion, and the interpreter has no direct path).
    if ODT == F32:
        return v.to(tl.float32)
    elif ODT == F64:
        return v.to(tl.float64)
    elif ODT == F16:
        return v.to(tl.float32).to(tl.float16)
    elif ODT == BF16:
        return _f32_to_bf16(v.to(tl.float32))
    elif ODT == I32:
        return v.to(tl.int32)
    elif ODT == I64:
        return v.to(tl.int64)
    elif ODT == BOOL:
        return v != 0
    elif ODT == I8:
        return v.to(tl.int8)
    elif ODT == U8:
        return v.to(tl.uint8)
    else:
        return v.to(tl.int16)


@triton.jit
def _f32_to_bf16(v):
    # Round-to-nearest-even by hand: the interpreter's fp32 -> bf16 cast truncates.
    b = v.to(tl.int32, bitcast=True)
    r = b + (((b >> 16) & 1) + 0x7FFF)
    h = tl.where(v != v, 0x7FC0, (r >> 16) & 0xFFFF).to(tl.int16)
    return h.to(tl.bfloat16, bitcast=True)


# ------------------------------------------------------- math helpers -------
@triton.jit
def _isnan(x):
    return x != x


@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _expm1(x):
    # Kahan's trick: accurate near 0 with only exp/log.
    u = tl.exp(x)
    um1 = u - 1.0
    r = tl.where(u == 1.0, x, um1 * x / tl.log(u))
    r = tl.where(um1 == -1.0, -1.0, r)
    return tl.where(x > 80.0, um1, r)


@triton.jit
def _log1p(x):
    u = 1.0 + x
    r = tl.where(u == 1.0, x, tl.log(u) * (x / (u - 1.0)))
    return tl.where(u == x, tl.log(u), r)


@triton.jit
def _tanh(x):
    e = _expm1(-2.0 * tl.abs(x))
    t = -e / (2.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _atan(x):
    # Cephes atan (double coefficients; also fine in fp32).
    ax = tl.abs(x)
    big = ax > 2.414213562373095
    mid = ax > 0.66
    xr = tl.where(big, -1.0 / ax, tl.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    y0 = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = xr * xr
    p = (((-8.750608600031904122785e-1 * z - 1.615753718733365076637e1) * z
          - 7.500855792314704667340e1) * z - 1.228866684490136173410e2) * z - 6.485021904942025371773e1
    q = (((((z + 2.485846490142306297962e1) * z + 1.650270098316988542046e2) * z
           + 4.328810604912902668951e2) * z + 4.853903996359136964868e2) * z + 1.945506571482613964425e2)
    r = y0 + (xr * (z * p / q) + xr)
    return tl.where(x < 0, -r, r)


@triton.jit
def _atan2(y, x):
    r = _atan(y / x)
    pi = 3.141592653589793
    r = tl.where(x < 0, tl.where(y >= 0, r + pi, r - pi), r)
    r = tl.where(x == 0, tl.where(y > 0, pi / 2, tl.where(y < 0, -pi / 2, 0.0 * y)), r)
    return r


@triton.jit
def _erf(x):
    return tl.erf(x)


@triton.jit
def _fmod_f(a, b):
    # exact for fp32 inputs when computed in fp64 (caller widens); for fp64 the
    # product q*b is rounded once (fused on GPUs).
    q = _trunc(a / b)
    r = a - q * b
    # fix a quotient rounded across an integer
    r = tl.where((r != 0) & ((r < 0) != (a < 0)), r + tl.where((a < 0) == (b < 0), b, -b), r)
    return tl.where(b == 0, float("nan"), r)


@triton.jit
def _ipow(base, e):
    # integer power by squaring (64 steps cover any int64 exponent)
    res = base * 0 + 1
    b = base
    ee = e
    for _ in range(63):
        res = tl.where((ee & 1) != 0, res * b, res)
        b = b * b
        ee = ee >> 1
    return res


@triton.jit
def _fpow(a, b):
    ab = tl.abs(a)
    r = tl.exp(b * tl.log(ab))
    bint = tl.floor(b) == b
    half = b * 0.5
    odd = bint & (tl.floor(half) != half)
    r = tl.where((a < 0) & odd, -r, r)
    r = tl.where((a < 0) & (~bint), float("nan"), r)
    r = tl.where(b == 0, 1.0, r)
    return r


@triton.jit
def _round_even(x):
    f = tl.floor(x)
    d = x - f
    half_f = f * 0.5
    even = tl.floor(half_f) == half_f
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))


@triton.jit
def _apply(x, y, z, w, OP: tl.constexpr, CDT: tl.constexpr):
    FL: tl.constexpr = (CDT == F32) or (CDT == F64)
    # ---- unary
    if OP == OP_COPY:
        return x
    elif OP == OP_ABS:
        return tl.abs(x)
    elif OP == OP_NEG:
        return -x
    elif OP == OP_EXP:
        return tl.exp(x)
    elif OP == OP_EXP2:
        return tl.exp2(x)
    elif OP == OP_EXPM1:
        return _expm1(x)
    elif OP == OP_LOG:
        return tl.log(x)
    elif OP == OP_LOG2:
        return tl.log2(x)
    elif OP == OP_LOG10:
        return tl.log(x) * 0.4342944819032518
    elif OP == OP_LOG1P:
        return _log1p(x)
    elif OP == OP_SQRT:
        return tl.sqrt(x)
    elif OP == OP_RSQRT:
        return 1.0 / tl.sqrt(x)
    elif OP == OP_SIN:
        return tl.sin(x)
    elif OP == OP_COS:
        return tl.cos(x)
    elif OP == OP_TAN:
        return tl.sin(x) / tl.cos(x)
    elif OP == OP_TANH:
        return _tanh(x)
    elif OP == OP_SIGMOID:
        return 1.0 / (1.0 + tl.exp(-x))
    elif OP == OP_RELU:
        return tl.where(x > 0, x, 0)
    elif OP == OP_GELU:
        return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif OP == OP_GELU_TANH:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + _tanh(inner))
    elif OP == OP_SILU:
        return x / (1.0 + tl.exp(-x))
    elif OP == OP_ERF:
        return _erf(x)
    elif OP == OP_FLOOR:
        return tl.floor(x)
    elif OP == OP_CEIL:
        return tl.ceil(x)
    elif OP == OP_ROUND:
        return _round_even(x)
    elif OP == OP_TRUNC:
        return _trunc(x)
    elif OP == OP_SIGN:
        return (tl.where(x > 0, 1, 0) - tl.where(x < 0, 1, 0)).to(x.dtype)
    elif OP == OP_RECIPROCAL:
        return 1.0 / x
    elif OP == OP_LOGICAL_NOT:
        return x == 0
    elif OP == OP_BITWISE_NOT:
        return ~x
    elif OP == OP_SQUARE:
        return x * x
    elif OP == OP_CUBE:
        return x * x * x
    elif OP == OP_INV_SQUARE:
        return 1.0 / (x * x)
    # ---- binary
    elif OP == OP_ADD:
        return x + y
    elif OP == OP_SUB:
        return x - y
    elif OP == OP_MUL:
        return x * y
    elif OP == OP_DIV:
        return x / y
    elif OP == OP_DIV_TRUNC:
        if FL:
            return _trunc(x / y)
        else:
            return x // y  # C semantics (truncation) in Triton
    elif OP == OP_DIV_FLOOR:
        if FL:
            # mirrors ATen's div_floor_floating
            mod = _fmod_f(x, y)
            d = (x - mod) / y
            d = tl.where((mod != 0) & ((y < 0) != (mod < 0)), d - 1.0, d)
            fd = tl.floor(d)
            fd = tl.where(d - fd > 0.5, fd + 1.0, fd)
            fd = tl.where(d == 0, 0.0 * (x / y), fd)
            return tl.where(y == 0, x / y, fd)
        else:
            q = x // y
            r = x % y
            return tl.where((r != 0) & ((r < 0) != (y < 0)), q - 1, q)
    elif OP == OP_POW:
        if FL:
            return _fpow(x, y)
        else:
            return _ipow(x, y)
    elif OP == OP_IPOW:
        return _ipow(x, y)
    elif OP == OP_MAXIMUM:
        if FL:
            return tl.where(_isnan(x) | (x > y), x, y)
        else:
            return tl.where(x > y, x, y)
    elif OP == OP_MINIMUM:
        if FL:
            return tl.where(_isnan(x) | (x < y), x, y)
        else:
            return tl.where(x < y, x, y)
    elif OP == OP_FMOD:
        if FL:
            return _fmod_f(x, y)
        else:
            return x % y
    elif OP == OP_REMAINDER:
        if FL:
            r = _fmod_f(x, y)
        else:
            r = x % y
        return tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
    elif OP == OP_ATAN2:
        return _atan2(x, y)
    elif OP == OP_EQ:
        return x == y
    elif OP == OP_NE:
        return x != y
    elif OP == OP_LT:
        return x < y
    elif OP == OP_LE:
        return x <= y
    elif OP == OP_GT:
        return x > y
    elif OP == OP_GE:
        return x >= y
    elif OP == OP_LOGICAL_AND:
        return (x != 0) & (y != 0)
    elif OP == OP_LOGICAL_OR:
        return (x != 0) | (y != 0)
    elif OP == OP_LOGICAL_XOR:
        return (x != 0) != (y != 0)
    elif OP == OP_BITWISE_AND:
        return x & y
    elif OP == OP_BITWISE_OR:
        return x | y
    elif OP == OP_BITWISE_XOR:
        return x ^ y
    elif OP == OP_GELU_BACKWARD:
        # x = grad, y = self
        cdf = 0.5 * (1.0 + tl.erf(y * 0.7071067811865476))
        pdf = tl.exp(-0.5 * y * y) * 0.3989422804014327
        return x * (cdf + y * pdf)
    elif OP == OP_GELU_TANH_BACKWARD:
        kb = 0.7978845608028654
        kk = 0.044715
        xsq = y * y
        inner = kb * (y + kk * xsq * y)
        th = _tanh(inner)
        left = 0.5 * y
        right = 1.0 + th
        ld = 0.5 * right
        rd = left * (1.0 - th * th) * kb * (1.0 + 3.0 * kk * xsq)
        return x * (ld + rd)
    elif OP == OP_SILU_BACKWARD:
        s = 1.0 / (1.0 + tl.exp(-y))
        return x * s * (1.0 + y * (1.0 - s))
    elif OP == OP_SIGMOID_BACKWARD:
        return x * (1.0 - y) * y
    elif OP == OP_TANH_BACKWARD:
        return x * (1.0 - y * y)
    elif OP == OP_CLAMP_MIN:
        if FL:
            return tl.where(_isnan(x) | _isnan(y), x + y, tl.where(x < y, y, x))
        else:
            return tl.where(x < y, y, x)
    elif OP == OP_CLAMP_MAX:
        if FL:
            return tl.where(_isnan(x) | _isnan(y), x + y, tl.where(x > y, y, x))
        else:
            return tl.where(x > y, y, x)
    # ---- ternary
    elif OP == OP_ADD_ALPHA:
        return x + z * y
    elif OP == OP_SUB_ALPHA:
        return x - z * y
    elif OP == OP_WHERE:
        return tl.where(x != 0, y, z)
    elif OP == OP_CLAMP:
        r = tl.where(x < y, y, x)
        r = tl.where(r > z, z, r)
        if FL:
            r = tl.where(_isnan(x), x, r)
        return r
    elif OP == OP_LERP:
        d = y - x
        return tl.where(tl.abs(z) < 0.5, x + z * d, y - d * (1.0 - z))
    elif OP == OP_THRESHOLD_BACKWARD:
        # x = grad, y = self, z = threshold
        return tl.where(y <= z, 0, x)
    elif OP == OP_ADDCMUL:
        return x + w * y * z
    elif OP == OP_ADDCDIV:
        return x + w * (y / z)
    elif OP == OP_MUL_SCALE:
        return x * y * z
    else:
        tl.static_assert(False, "unknown pointwise op")


@triton.jit
def _off6(i0, i1, i2, i3, i4, i5, s0, s1, s2, s3, s4, s5):
    return i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3 + i4 * s4 + i5 * s5


@triton.jit
def pointwise_kernel(out, a, b, c, d, N,
                     S0, S1, S2, S3, S4, S5,
                     o0, o1, o2, o3, o4, o5,
                     a0, a1, a2, a3, a4, a5,
                     b0, b1, b2, b3, b4, b5,
                     c0, c1, c2, c3, c4, c5,
                     d0, d1, d2, d3, d4, d5,
                     OP: tl.constexpr, NIN: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                     BLOCK: tl.constexpr):
    """out[idx] = OP(a[idx], b[idx], c[idx], d[idx]) over a 6-d index space (sizes S*);
    every operand has its own element strides (0 for broadcast dims)."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    i5 = r % S5
    r = r // S5
    i4 = r % S4
    r = r // S4
    i3 = r % S3
    r = r // S3
    i2 = r % S2
    r = r // S2
    i1 = r % S1
    i0 = r // S1
    x = _to_cdt(tl.load(a + _off6(i0, i1, i2, i3, i4, i5, a0, a1, a2, a3, a4, a5), mask=mask, other=0), CDT)
    y = x
    z = x
    w = x
    if NIN >= 2:
        y = _to_cdt(tl.load(b + _off6(i0, i1, i2, i3, i4, i5, b0, b1, b2, b3, b4, b5), mask=mask, other=1), CDT)
    if NIN >= 3:
        z = _to_cdt(tl.load(c + _off6(i0, i1, i2, i3, i4, i5, c0, c1, c2, c3, c4, c5), mask=mask, other=1), CDT)
    if NIN >= 4:
        w = _to_cdt(tl.load(d + _off6(i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5), mask=mask, other=1), CDT)
    res = _apply(x, y, z, w, OP, CDT)
    tl.store(out + _off6(i0, i1, i2, i3, i4, i5, o0, o1, o2, o3, o4, o5), _to_odt(res, ODT), mask=mask)


@triton.jit
def fill_kernel(out, N, S0, S1, S2, S3, S4, S5, o0, o1, o2, o3, o4, o5, bits,
                IS_FLOAT: tl.constexpr, ODT: tl.constexpr, BLOCK: tl.constexpr):
    """Fill a strided tensor with a scalar passed exactly: a double as its int64 bit pattern."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    i5 = r % S5
    r = r // S5
    i4 = r % S4
    r = r // S4
    i3 = r % S3
    r = r // S3
    i2 = r % S2
    r = r // S2
    i1 = r % S1
    i0 = r // S1
    bv = bits.to(tl.int64)
    if IS_FLOAT:
        v = bv.to(tl.float64, bitcast=True)
    else:
        v = bv
    v = v + tl.zeros([BLOCK], dtype=v.dtype)
    tl.store(out + _off6(i0, i1, i2, i3, i4, i5, o0, o1, o2, o3, o4, o5), _to_odt(v, ODT), mask=mask)


# ------------------------------------------------------------ reductions ---
RED_OPS = ("sum", "prod", "max", "min", "argmax", "argmin", "mean", "var", "all", "any",
           "norm2", "norm1", "normp", "norm0", "amax_abs", "amin_abs")
RED_ID = {n: i for i, n in enumerate(RED_OPS)}
for _n, _i in RED_ID.items():
    globals()["R_" + _n.upper()] = tl.constexpr(_i)


@triton.jit
def reduce_kernel(x, out, M, K, p, corr, OP: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Reduce each row of a contiguous (M, K) buffer (already in the compute dtype)."""
    FL: tl.constexpr = (CDT == F32) or (CDT == F64)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    cols0 = tl.arange(0, BLOCK_K)
    base = rows[:, None] * K
    zero = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32 if CDT == F32 else (
        tl.float64 if CDT == F64 else (tl.int64 if CDT == I64 else tl.int32)))
    if OP == R_PROD:
        acc = zero + 1
    elif OP == R_ALL:
        acc = zero + 1
    elif OP == R_MAX or OP == R_ARGMAX or OP == R_MIN or OP == R_ARGMIN or OP == R_AMAX_ABS or OP == R_AMIN_ABS:
        acc = zero
        started = zero != zero
    else:
        acc = zero
    idx = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.int64)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        m2 = rmask[:, None] & (cols[None, :] < K)
        v = tl.load(x + base + cols[None, :], mask=m2, other=0)
        if OP == R_SUM or OP == R_MEAN:
            acc += v
        elif OP == R_PROD:
            acc = tl.where(m2, acc * v, acc)
        elif OP == R_NORM2:
            acc += v * v
        elif OP == R_NORM1:
            acc += tl.abs(v)
        elif OP == R_NORM0:
            acc += tl.where(v != 0, 1.0, 0.0)
        elif OP == R_NORMP:
            acc += tl.where(m2, tl.exp(p * tl.log(tl.abs(v))), 0.0)
        elif OP == R_ALL:
            acc = tl.where(m2 & (v == 0), 0, acc)
        elif OP == R_ANY:
            acc = tl.where(m2 & (v != 0), 1, acc)
        elif OP == R_MAX or OP == R_ARGMAX or OP == R_AMAX_ABS:
            if OP == R_AMAX_ABS:
                v = tl.abs(v)
            if FL:
                better = (v > acc) | (_isnan(v) & (~_isnan(acc)))
            else:
                better = v > acc
            upd = m2 & ((~started) | better)
            acc = tl.where(upd, v, acc)
            idx = tl.where(upd, cols[None, :].to(tl.int64), idx)
            started = started | m2
        elif OP == R_MIN or OP == R_ARGMIN or OP == R_AMIN_ABS:
            if OP == R_AMIN_ABS:
                v = tl.abs(v)
            if FL:
                better = (v < acc) | (_isnan(v) & (~_isnan(acc)))
            else:
                better = v < acc
            upd = m2 & ((~started) | better)
            acc = tl.where(upd, v, acc)
            idx = tl.where(upd, cols[None, :].to(tl.int64), idx)
            started = started | m2
        elif OP == R_VAR:
            acc += v
    if OP == R_SUM or OP == R_NORM1 or OP == R_NORM0:
        res = tl.sum(acc, axis=1)
    elif OP == R_MEAN:
        res = tl.sum(acc, axis=1) / K
    elif OP == R_NORM2:
        res = tl.sqrt(tl.sum(acc, axis=1))
    elif OP == R_NORMP:
        res = tl.exp(tl.log(tl.sum(acc, axis=1)) / p)
    elif OP == R_PROD:
        # tree product over the lanes
        res = tl.reduce(acc, 1, _mul_combine)
    elif OP == R_ALL:
        res = tl.min(acc, axis=1)
    elif OP == R_ANY:
        res = tl.max(acc, axis=1)
    elif OP == R_VAR:
        mean = tl.sum(acc, axis=1) / K
        acc2 = zero
        for k0 in range(0, K, BLOCK_K):
            cols = k0 + cols0
            m2 = rmask[:, None] & (cols[None, :] < K)
            v = tl.load(x + base + cols[None, :], mask=m2, other=0)
            dv = tl.where(m2, v - mean[:, None], 0.0)
            acc2 += dv * dv
        den = K - corr
        res = tl.sum(acc2, axis=1) / tl.where(den > 0, den, 0.0)
        if p != 0:
            res = tl.sqrt(res)
    else:
        # max/min/arg*: lane-wise candidates -> row result
        if OP == R_MAX or OP == R_ARGMAX or OP == R_AMAX_ABS:
            accm = tl.where(started, acc, tl.min(acc, axis=1)[:, None])
            best = tl.max(accm, axis=1)
        else:
            accm = tl.where(started, acc, tl.max(acc, axis=1)[:, None])
            best = tl.min(accm, axis=1)
        if FL:
            nanlane = _isnan(acc) & started
            hasnan = tl.max(nanlane.to(tl.int32), axis=1) > 0
            best = tl.where(hasnan, float("nan"), best)
            hit = started & ((accm == best[:, None]) | (nanlane & hasnan[:, None]))
        else:
            hit = started & (accm == best[:, None])
        if OP == R_ARGMAX or OP == R_ARGMIN:
            res = tl.min(tl.where(hit, idx, 9223372036854775807), axis=1)
        else:
            res = best
    tl.store(out + rows, _to_odt(res, ODT), mask=rmask)


@triton.jit
def _mul_combine(a, b):
    return a * b


# --------------------------------------------------------------- softmax ---
@triton.jit
def softmax_kernel(x, out, M, K, LOG: tl.constexpr, ODT: tl.constexpr, BLOCK_K: tl.constexpr):
    """Rows of a contiguous (M, K) buffer of the compute dtype (fp32/fp64)."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    base = x + row * K
    mx = tl.load(base + cols0, mask=cols0 < 0, other=0).to(x.dtype.element_ty) - float("inf")
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        v = tl.load(base + cols, mask=cols < K, other=-float("inf"))
        mx = tl.maximum(mx, v)
    m = tl.max(mx, axis=0)
    s = tl.zeros([BLOCK_K], dtype=x.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        v = tl.load(base + cols, mask=cols < K, other=-float("inf"))
        s += tl.where(cols < K, tl.exp(v - m), 0.0)
    tot = tl.sum(s, axis=0)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        v = tl.load(base + cols, mask=cols < K, other=0)
        if LOG:
            r = v - m - tl.log(tot)
        else:
            r = tl.exp(v - m) / tot
        tl.store(out + row * K + cols, _to_odt(r, ODT), mask=cols < K)


@triton.jit
def softmax_bwd_kernel(g, y, out, M, K, LOG: tl.constexpr, ODT: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    s = tl.zeros([BLOCK_K], dtype=g.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        mk = cols < K
        gv = tl.load(g + row * K + cols, mask=mk, other=0)
        if LOG:
            s += gv
        else:
            yv = tl.load(y + row * K + cols, mask=mk, other=0)
            s += gv * yv
    tot = tl.sum(s, axis=0)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        mk = cols < K
        gv = tl.load(g + row * K + cols, mask=mk, other=0)
        yv = tl.load(y + row * K + cols, mask=mk, other=0)
        if LOG:
            r = gv - tl.exp(yv) * tot
        else:
            r = yv * (gv - tot)
        tl.store(out + row * K + cols, _to_odt(r, ODT), mask=mk)


# ------------------------------------------------------------ layer norm ---
@triton.jit
def layer_norm_kernel(x, w, b, out, mean_out, rstd_out, M, K, eps,
                      HAS_W: tl.constexpr, HAS_B: tl.constexpr, ODT: tl.constexpr, SDT: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    s = tl.zeros([BLOCK_K], dtype=x.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        s += tl.load(x + row * K + cols, mask=cols < K, other=0)
    mean = tl.sum(s, axis=0) / K
    s2 = tl.zeros([BLOCK_K], dtype=x.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        v = tl.load(x + row * K + cols, mask=cols < K, other=0)
        dv = tl.where(cols < K, v - mean, 0.0)
        s2 += dv * dv
    var = tl.sum(s2, axis=0) / K
    rstd = 1.0 / tl.sqrt(var + eps)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        mk = cols < K
        v = tl.load(x + row * K + cols, mask=mk, other=0)
        r = (v - mean) * rstd
        if HAS_W:
            r = r * tl.load(w + cols, mask=mk, other=0)
        if HAS_B:
            r = r + tl.load(b + cols, mask=mk, other=0)
        tl.store(out + row * K + cols, _to_odt(r, ODT), mask=mk)
    tl.store(mean_out + row, _to_odt(mean, SDT))
    tl.store(rstd_out + row, _to_odt(rstd, SDT))


@triton.jit
def layer_norm_bwd_kernel(g, x, mean, rstd, w, dx, M, K, HAS_W: tl.constexpr, ODT: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    """dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) per row (buffers in compute dtype)."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    mu = tl.load(mean + row)
    rs = tl.load(rstd + row)
    s1 = tl.zeros([BLOCK_K], dtype=x.dtype.element_ty)
    s2 = tl.zeros([BLOCK_K], dtype=x.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        mk = cols < K
        gv = tl.load(g + row * K + cols, mask=mk, other=0)
        if HAS_W:
            gv = gv * tl.load(w + cols, mask=mk, other=0)
        xh = (tl.load(x + row * K + cols, mask=mk, other=0) - mu) * rs
        s1 += gv
        s2 += tl.where(mk, gv * xh, 0.0)
    a = tl.sum(s1, axis=0) / K
    c = tl.sum(s2, axis=0) / K
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + cols0
        mk = cols < K
        gv = tl.load(g + row * K + cols, mask=mk, other=0)
        if HAS_W:
            gv = gv * tl.load(w + cols, mask=mk, other=0)
        xh = (tl.load(x + row * K + cols, mask=mk, other=0) - mu) * rs
        tl.store(dx + row * K + cols, _to_odt(rs * (gv - a - xh * c), ODT), mask=mk)


# ---------------------------------------------------------------- matmul ---
@triton.jit
def bmm_kernel(a, b, c, bias, M, N, K,
               sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_,
               alpha, beta,
               HAS_BIAS: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c[bt] = beta*bias[bt] + alpha*(a[bt] @ b[bt]); arbitrary strides; fp32 (fp64) accumulate."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bt = tl.program_id(2).to(tl.int64)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk0 = tl.arange(0, BK)
    if CDT == F64:
        acc = tl.zeros([BM, BN], dtype=tl.float64)
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + rk0
        av = tl.load(a + bt * sab + rm[:, None] * sam + rk[None, :] * sak,
                     mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
        bv = tl.load(b + bt * sbb + rk[:, None] * sbk + rn[None, :] * sbn,
                     mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
        if CDT == F64:
            acc += tl.dot(av.to(tl.float64), bv.to(tl.float64))
        else:
            # bf16/fp16 operands are widened: the interpreter's bf16 math is wrong
            acc += tl.dot(av.to(tl.float32), bv.to(tl.float32), input_precision="ieee")
    acc = acc * alpha
    cm = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_BIAS:
        bi = tl.load(bias + bt * sib + rm[:, None] * sim + rn[None, :] * sin_, mask=cm, other=0)
        acc = acc + beta * bi.to(acc.dtype)
    tl.store(c + bt * scb + rm[:, None] * scm + rn[None, :] * scn, _to_odt(acc, ODT), mask=cm)


# ------------------------------------------------------- index kernels ------
@triton.jit
def index_kernel(src, idx, out, N, S0, S1, S2, S3, S4, S5,
                 x0, x1, x2, x3, x4, x5, i0s, i1s, i2s, i3s, i4s, i5s,
                 o0, o1, o2, o3, o4, o5, SIZE_DIM, PAD,
                 DIM: tl.constexpr, SCATTER: tl.constexpr, HAS_PAD: tl.constexpr, ODT: tl.constexpr,
                 BLOCK: tl.constexpr):
    """Iterate over the index's shape (S*).
    SCATTER=False: out[p] = src[p with p[DIM] := idx[p]]   (gather, index_select, embedding)
    SCATTER=True:  out[p with p[DIM] := idx[p]] += src[p]   (scatter_add, embedding backward; atomics)
    """
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    r = lin
    j5 = r % S5
    r = r // S5
    j4 = r % S4
    r = r // S4
    j3 = r % S3
    r = r // S3
    j2 = r % S2
    r = r // S2
    j1 = r % S1
    j0 = r // S1
    iv = tl.load(idx + _off6(j0, j1, j2, j3, j4, j5, i0s, i1s, i2s, i3s, i4s, i5s), mask=mask, other=0).to(tl.int64)
    iv = tl.where(iv < 0, iv + SIZE_DIM, iv)
    mask = mask & (iv >= 0) & (iv < SIZE_DIM)
    if HAS_PAD:
        mask = mask & (iv != PAD)
    if SCATTER:
        soff = _off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5)
    else:
        ooff = _off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5)
    if DIM == 0:
        j0 = iv
    elif DIM == 1:
        j1 = iv
    elif DIM == 2:
        j2 = iv
    elif DIM == 3:
        j3 = iv
    elif DIM == 4:
        j4 = iv
    else:
        j5 = iv
    if SCATTER:
        v = tl.load(src + soff, mask=mask, other=0)
        tl.atomic_add(out + _off6(j0, j1, j2, j3, j4, j5, o0, o1, o2, o3, o4, o5), _to_odt(v, ODT), mask=mask)
    else:
        v = tl.load(src + _off6(j0, j1, j2, j3, j4, j5, x0, x1, x2, x3, x4, x5), mask=mask, other=0)
        tl.store(out + ooff, v, mask=mask)
