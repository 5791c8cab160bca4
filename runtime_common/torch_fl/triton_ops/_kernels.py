"""Triton kernels of the fallback library (imported lazily: needs triton).

Dtype codes (`*DT` constexprs) are shared with `_common.py` (DTYPE_CODES):
F32=0 F64=1 F16=2 BF16=3 I32=4 I64=5 BOOL=6 I8=7 U8=8 I16=9.
Compute dtypes (CDT) are only F32, F64, I32, I64: fp16/bf16 compute in fp32 and
round on store (the Triton interpreter also gets bf16 arithmetic wrong, so it
must never be computed in bf16), small ints and bool compute in int32.
"""
from __future__ import annotations

import os

import triton
import triton.language as tl

from . import _launch


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
# The pointwise ops, by group: the pointwise kernels are specialised on OP (a constexpr),
# _apply picks the group's function by id range (groups start at multiples of 100) and that
# function the op. The host names an op by its OP_ID key: "gelu" is OP_GELU.
# unary: f(x)
UNARY_OPS = tl.constexpr(0)  # the group's first id
OP_COPY = tl.constexpr(0)
OP_ABS = tl.constexpr(1)
OP_NEG = tl.constexpr(2)
OP_EXP = tl.constexpr(3)
OP_EXP2 = tl.constexpr(4)
OP_EXPM1 = tl.constexpr(5)
OP_LOG = tl.constexpr(6)
OP_LOG2 = tl.constexpr(7)
OP_LOG10 = tl.constexpr(8)
OP_LOG1P = tl.constexpr(9)
OP_SQRT = tl.constexpr(10)
OP_RSQRT = tl.constexpr(11)
OP_SIN = tl.constexpr(12)
OP_COS = tl.constexpr(13)
OP_TAN = tl.constexpr(14)
OP_TANH = tl.constexpr(15)
OP_SIGMOID = tl.constexpr(16)
OP_RELU = tl.constexpr(17)
OP_GELU = tl.constexpr(18)
OP_GELU_TANH = tl.constexpr(19)
OP_SILU = tl.constexpr(20)
OP_ERF = tl.constexpr(21)
OP_FLOOR = tl.constexpr(22)
OP_CEIL = tl.constexpr(23)
OP_ROUND = tl.constexpr(24)
OP_TRUNC = tl.constexpr(25)
OP_SIGN = tl.constexpr(26)
OP_RECIPROCAL = tl.constexpr(27)
OP_LOGICAL_NOT = tl.constexpr(28)
OP_BITWISE_NOT = tl.constexpr(29)
OP_SQUARE = tl.constexpr(30)
OP_CUBE = tl.constexpr(31)
OP_INV_SQUARE = tl.constexpr(32)

# binary arithmetic: f(x, y); p0 = the result's bit width for the shifts
BINARY_OPS = tl.constexpr(100)  # the group's first id
OP_ADD = tl.constexpr(100)
OP_SUB = tl.constexpr(101)
OP_MUL = tl.constexpr(102)
OP_DIV = tl.constexpr(103)
OP_DIV_TRUNC = tl.constexpr(104)
OP_DIV_FLOOR = tl.constexpr(105)
OP_POW = tl.constexpr(106)
OP_IPOW = tl.constexpr(107)
OP_MAXIMUM = tl.constexpr(108)
OP_MINIMUM = tl.constexpr(109)
OP_FMOD = tl.constexpr(110)
OP_REMAINDER = tl.constexpr(111)
OP_ATAN2 = tl.constexpr(112)
OP_CLAMP_MIN = tl.constexpr(113)
OP_CLAMP_MAX = tl.constexpr(114)
OP_LOGADDEXP = tl.constexpr(115)
OP_LOGADDEXP2 = tl.constexpr(116)
OP_HYPOT = tl.constexpr(117)
OP_COPYSIGN = tl.constexpr(118)
OP_FMAX = tl.constexpr(119)
OP_FMIN = tl.constexpr(120)
OP_HEAVISIDE = tl.constexpr(121)
OP_NEXTAFTER = tl.constexpr(122)
OP_XLOGY = tl.constexpr(123)
OP_XLOG1PY = tl.constexpr(124)
OP_GCD = tl.constexpr(125)
OP_LCM = tl.constexpr(126)
OP_SHL = tl.constexpr(127)
OP_SHR = tl.constexpr(128)
OP_ZETA = tl.constexpr(129)

# comparisons, logical and bitwise binaries: f(x, y)
COMPARISON_OPS = tl.constexpr(200)  # the group's first id
OP_EQ = tl.constexpr(200)
OP_NE = tl.constexpr(201)
OP_LT = tl.constexpr(202)
OP_LE = tl.constexpr(203)
OP_GT = tl.constexpr(204)
OP_GE = tl.constexpr(205)
OP_LOGICAL_AND = tl.constexpr(206)
OP_LOGICAL_OR = tl.constexpr(207)
OP_LOGICAL_XOR = tl.constexpr(208)
OP_BITWISE_AND = tl.constexpr(209)
OP_BITWISE_OR = tl.constexpr(210)
OP_BITWISE_XOR = tl.constexpr(211)

# ternary / quaternary: f(x, y, z[, w]) (add/sub take alpha as z)
TERNARY_OPS = tl.constexpr(300)  # the group's first id
OP_ADD_ALPHA = tl.constexpr(300)
OP_SUB_ALPHA = tl.constexpr(301)
OP_WHERE = tl.constexpr(302)
OP_CLAMP = tl.constexpr(303)
OP_LERP = tl.constexpr(304)
OP_THRESHOLD_BACKWARD = tl.constexpr(305)
OP_ADDCMUL = tl.constexpr(306)
OP_ADDCDIV = tl.constexpr(307)
OP_MUL_SCALE = tl.constexpr(308)

# inverse trig / hyperbolic and special functions: f(x) (computed in fp64 for floating inputs)
SPECIAL_OPS = tl.constexpr(400)  # the group's first id
OP_ACOS = tl.constexpr(400)
OP_ASIN = tl.constexpr(401)
OP_ATAN = tl.constexpr(402)
OP_ASINH = tl.constexpr(403)
OP_ACOSH = tl.constexpr(404)
OP_ATANH = tl.constexpr(405)
OP_SINH = tl.constexpr(406)
OP_COSH = tl.constexpr(407)
OP_ERFC = tl.constexpr(408)
OP_ERFINV = tl.constexpr(409)
OP_LGAMMA = tl.constexpr(410)
OP_DIGAMMA = tl.constexpr(411)
OP_TRIGAMMA = tl.constexpr(412)
OP_POLYGAMMA = tl.constexpr(413)
OP_FRAC = tl.constexpr(414)
OP_SINC = tl.constexpr(415)
OP_ANGLE = tl.constexpr(416)
OP_ERFCX = tl.constexpr(417)
OP_LOG_NDTR = tl.constexpr(418)
OP_NDTRI = tl.constexpr(419)
OP_ENTR = tl.constexpr(420)
OP_ISNAN = tl.constexpr(421)
OP_ISPOSINF = tl.constexpr(422)
OP_ISNEGINF = tl.constexpr(423)
OP_SIGNBIT = tl.constexpr(424)
OP_NAN_TO_NUM = tl.constexpr(425)
OP_ROUND_DECIMALS = tl.constexpr(426)

# activations: f(x), P0..P2 = the op's scalar parameters
ACTIVATION_OPS = tl.constexpr(500)  # the group's first id
OP_ELU = tl.constexpr(500)
OP_SOFTPLUS = tl.constexpr(501)
OP_MISH = tl.constexpr(502)
OP_THRESHOLD = tl.constexpr(503)
OP_LEAKY_RELU = tl.constexpr(504)
OP_HARDSIGMOID = tl.constexpr(505)
OP_HARDSWISH = tl.constexpr(506)
OP_SOFTSHRINK = tl.constexpr(507)
OP_HARDSHRINK = tl.constexpr(508)
OP_LOG_SIGMOID = tl.constexpr(509)
OP_LOGIT = tl.constexpr(510)

# activation backwards: f(grad = x, self or result = y), P0..P2 as forward
ACTIVATION_BACKWARD_OPS = tl.constexpr(600)  # the group's first id
OP_GELU_BACKWARD = tl.constexpr(600)
OP_GELU_TANH_BACKWARD = tl.constexpr(601)
OP_SILU_BACKWARD = tl.constexpr(602)
OP_SIGMOID_BACKWARD = tl.constexpr(603)
OP_TANH_BACKWARD = tl.constexpr(604)
OP_ELU_BACKWARD = tl.constexpr(605)
OP_ELU_BACKWARD_RESULT = tl.constexpr(606)
OP_HARDTANH_BACKWARD = tl.constexpr(607)
OP_SOFTPLUS_BACKWARD = tl.constexpr(608)
OP_MISH_BACKWARD = tl.constexpr(609)
OP_LEAKY_RELU_BACKWARD = tl.constexpr(610)
OP_HARDSIGMOID_BACKWARD = tl.constexpr(611)
OP_HARDSWISH_BACKWARD = tl.constexpr(612)
OP_SHRINK_BACKWARD = tl.constexpr(613)
OP_LOG_SIGMOID_BACKWARD = tl.constexpr(614)
OP_LOGIT_BACKWARD = tl.constexpr(615)

# op name -> id, for the host: "gelu" -> OP_GELU's value
OP_ID: dict[str, int] = {name[3:].lower(): value.value for name, value in list(globals().items())
                         if name.startswith("OP_") and isinstance(value, tl.constexpr)}

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
    # The quadrant offsets in x's dtype: a where() of two Python floats is an fp32 tensor,
    # 4e-8 off in fp64.
    y0 = tl.where(big, tl.full(x.shape, 1.5707963267948966, x.dtype),
                  tl.where(mid, tl.full(x.shape, 0.7853981633974483, x.dtype), tl.zeros(x.shape, x.dtype)))
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
    pi = tl.full(r.shape, 3.141592653589793, r.dtype)  # in r's dtype: a Python float is fp32
    r = tl.where(x < 0, tl.where(y >= 0, r + pi, r - pi), r)
    half_pi = tl.full(r.shape, 1.5707963267948966, r.dtype)
    r = tl.where(x == 0, tl.where(y > 0, half_pi, tl.where(y < 0, -half_pi, 0.0 * y)), r)
    return r


@triton.jit
def _erf(x):
    return tl.erf(x)


@triton.jit
def _div_rn(a, b):
    """a / b rounded to nearest, as ATen divides on every device. Triton's `/` on float32 is the
    GPU's approximate division (NVIDIA's div.full.f32, up to 2 ulp off): a quotient that is
    exactly an integer can come out just below it, and trunc, floor and fmod then answer one
    unit off (fmod(2.78125, -0.6953125) gave 0.6953125 on the GPU, not 0)."""
    if a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b


@triton.jit
def _fmod_f(a, b):
    # exact for fp32 inputs when computed in fp64 (caller widens); for fp64 the
    # product q*b is rounded once (fused on GPUs).
    q = _trunc(_div_rn(a, b))
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
    # negative exponents (as ATen): 1 stays 1, -1 alternates, every other base gives 0
    neg = tl.where((e & 1) != 0, base * 0 - 1, base * 0 + 1)
    small = tl.where(base == 1, base * 0 + 1, tl.where(base == -1, neg, base * 0))
    return tl.where(e < 0, small, res)


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


# ------------------------------------------- inverse trig and special functions ---
# These run in fp64 for every floating input (the caller picks CDT=F64), so
# straightforward formulas meet fp32 tolerances; fp64 inputs get near-ulp results.
@triton.jit
def _asinh(x):
    a = tl.abs(x)
    r = _log1p(a + a * a / (1.0 + tl.sqrt(1.0 + a * a)))
    r = tl.where(a > 1e150, tl.log(a) + 0.6931471805599453, r)
    return tl.where(x < 0, -r, r)


@triton.jit
def _acosh(x):
    t = x - 1.0
    r = _log1p(t + tl.sqrt(2.0 * t + t * t))
    r = tl.where(x > 1e150, tl.log(x) + 0.6931471805599453, r)
    return tl.where(x < 1.0, float("nan"), r)


@triton.jit
def _sinh(x):
    a = tl.abs(x)
    e = _expm1(a)
    small = 0.5 * (e + e / (e + 1.0))
    h = tl.exp(0.5 * a)  # (h/2)*h cannot overflow before the result does
    big = (0.5 * h) * h - 0.5 / (h * h)
    r = tl.where(a < 1.0, small, big)
    return tl.where(x < 0, -r, r)


@triton.jit
def _cosh(x):
    h = tl.exp(0.5 * tl.abs(x))
    return (0.5 * h) * h + 0.5 / (h * h)


@triton.jit
def _erfc_cf(a):
    # continued fraction K = a + (1/2)/(a + 1/(a + (3/2)/(a + ...))), evaluated bottom-up; a >= 3
    f = a
    for i in range(60):
        n = 60 - i
        f = a + (n * 0.5) / f
    return f


@triton.jit
def _erfc(x):
    a = tl.abs(x)
    big = a >= 3.0
    safe = tl.where(big, a, 3.0)
    tail = tl.exp(-safe * safe) / (1.7724538509055160 * _erfc_cf(safe))
    r = tl.where(big, tail, 1.0 - tl.erf(a))
    r = tl.where(a == float("inf"), 0.0, r)
    r = tl.where(x < 0, 2.0 - r, r)
    return tl.where(x != x, x, r)


@triton.jit
def _erfcx(x):
    big = x >= 3.0
    safe = tl.where(big, x, 3.0)
    tail = 1.0 / (1.7724538509055160 * _erfc_cf(safe))
    r = tl.where(big, tail, tl.exp(x * x) * _erfc(x))
    return tl.where(x == float("inf"), 0.0, r)


@triton.jit
def _erfinv_guess(y):
    # Giles' single-precision approximation, refined by Newton steps in _erfinv
    w = -tl.log((1.0 - y) * (1.0 + y))
    ws = w - 2.5
    p1 = 2.81022636e-08
    p1 = 3.43273939e-07 + p1 * ws
    p1 = -3.5233877e-06 + p1 * ws
    p1 = -4.39150654e-06 + p1 * ws
    p1 = 0.00021858087 + p1 * ws
    p1 = -0.00125372503 + p1 * ws
    p1 = -0.00417768164 + p1 * ws
    p1 = 0.246640727 + p1 * ws
    p1 = 1.50140941 + p1 * ws
    wb = tl.sqrt(tl.where(w < 5.0, 5.0, w)) - 3.0
    p2 = -0.000200214257
    p2 = 0.000100950558 + p2 * wb
    p2 = 0.00134934322 + p2 * wb
    p2 = -0.00367342844 + p2 * wb
    p2 = 0.00573950773 + p2 * wb
    p2 = -0.0076224613 + p2 * wb
    p2 = 0.00943887047 + p2 * wb
    p2 = 1.00167406 + p2 * wb
    p2 = 2.83297682 + p2 * wb
    return tl.where(w < 5.0, p1, p2) * y


@triton.jit
def _erfinv(y):
    x = _erfinv_guess(y)
    tail = tl.abs(y) > 0.9
    c = 1.0 - tl.abs(y)  # exact for |y| > 0.5 (Sterbenz)
    for _ in range(3):
        ax = tl.abs(x)
        d = 1.1283791670955126 * tl.exp(-x * x)
        # in the tails solve erfc(|x|) = 1 - |y|, where erf(x) - y would cancel
        step_tail = (_erfc(ax) - c) / d
        step_tail = tl.where(x < 0, -step_tail, step_tail)
        step = tl.where(tail, -step_tail, (tl.erf(x) - y) / d)
        step = tl.where(d > 0, step, 0.0)
        x = x - step
    x = tl.where(y == 1.0, float("inf"), tl.where(y == -1.0, float("-inf"), x))
    return tl.where((y != y) | (tl.abs(y) > 1.0), float("nan"), x)


@triton.jit
def _ndtri(p):
    # ndtri(p) = -sqrt(2) * erfcinv(2p): Newton on erfc(z) = 2p keeps precision for tiny p
    c = 2.0 * p
    z = _erfinv_guess(1.0 - c)  # erfcinv(c) = erfinv(1 - c)
    for _ in range(4):
        d = -1.1283791670955126 * tl.exp(-z * z)
        step = tl.where(d != 0, (_erfc(z) - c) / d, 0.0)
        z = z - step
    r = -1.4142135623730951 * z
    r = tl.where(p == 0.0, float("-inf"), tl.where(p == 1.0, float("inf"), r))
    return tl.where((p != p) | (p < 0.0) | (p > 1.0), float("nan"), r)


@triton.jit
def _log_ndtr(x):
    t = x * 0.7071067811865476
    # x < -3: log(erfc(-t)/2) = log(erfcx(-t)) - t^2 - log 2 avoids erfc underflow
    lo = tl.log(_erfcx(-t)) - t * t - 0.6931471805599453
    hi = _log1p(-0.5 * _erfc(t))
    mid = tl.log(0.5 * _erfc(-t))
    return tl.where(x < -3.0, lo, tl.where(x > 0.0, hi, mid))


@triton.jit
def _sin_pi(x):
    # sin(pi x) with the argument reduced first (pi * x loses the integer part's bits)
    r = x - 2.0 * tl.floor(0.5 * x)
    return tl.sin(3.141592653589793 * r)


@triton.jit
def _lgamma_pos(x):
    # Lanczos (g = 7, n = 9), x >= 0.5
    z = x - 1.0
    a = 0.99999999999980993
    a += 676.5203681218851 / (z + 1.0)
    a += -1259.1392167224028 / (z + 2.0)
    a += 771.32342877765313 / (z + 3.0)
    a += -176.61502916214059 / (z + 4.0)
    a += 12.507343278686905 / (z + 5.0)
    a += -0.13857109526572012 / (z + 6.0)
    a += 9.9843695780195716e-6 / (z + 7.0)
    a += 1.5056327351493116e-7 / (z + 8.0)
    t = z + 7.5
    return 0.9189385332046727 + (z + 0.5) * tl.log(t) - t + tl.log(a)


@triton.jit
def _lgamma(x):
    pos = _lgamma_pos(tl.where(x < 0.5, 1.0 - x, x))
    refl = tl.log(3.141592653589793 / tl.abs(_sin_pi(x))) - pos
    r = tl.where(x < 0.5, refl, pos)
    r = tl.where((x <= 0) & (tl.floor(x) == x), float("inf"), r)
    r = tl.where(tl.abs(x) == float("inf"), float("inf"), r)
    return tl.where(x != x, x, r)


@triton.jit
def _digamma_pos(x):
    # x > 0: recurrence up to x >= 10, then the asymptotic series (as ATen's calc_digamma)
    res = x * 0.0
    for _ in range(10):
        lt = x < 10.0
        res = tl.where(lt, res - 1.0 / x, res)
        x = tl.where(lt, x + 1.0, x)
    z = 1.0 / (x * x)
    y = 8.33333333333333333333E-2
    y = y * z - 2.10927960927960927961E-2
    y = y * z + 7.57575757575757575758E-3
    y = y * z - 4.16666666666666666667E-3
    y = y * z + 3.96825396825396825397E-3
    y = y * z - 8.33333333333333333333E-3
    y = y * z + 8.33333333333333333333E-2
    y = tl.where(x < 1e17, z * y, 0.0)
    return res + tl.log(x) - 0.5 / x - y


@triton.jit
def _digamma(x):
    neg = x < 0
    pos = _digamma_pos(tl.where(neg, 1.0 - x, x))
    fr = x - _trunc(x)
    refl = pos - 3.141592653589793 / (tl.sin(3.141592653589793 * fr) / tl.cos(3.141592653589793 * fr))
    r = tl.where(neg, refl, pos)
    r = tl.where(neg & (tl.floor(x) == x), float("nan"), r)
    r = tl.where(x == 0, -1.0 / x, r)  # copysign(inf, -x), as ATen
    r = tl.where(x == float("inf"), x, r)
    return tl.where(x != x, x, r)


@triton.jit
def _trigamma(x):
    refl = x < 0.5
    s = _sin_pi(x)
    res = tl.where(refl, -(9.869604401089358 / (s * s)), 0.0)
    x = tl.where(refl, 1.0 - x, x)
    for _ in range(6):
        res += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    res += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x
    return tl.where(refl, -res, res)


@triton.jit
def _zeta_term(a, b, s, x, k, w, A):
    a = a * (x + k)
    b = b / w
    s = s + a * b / A
    k = k + 1.0
    a = a * (x + k)
    b = b / w
    return a, b, s, k + 1.0


@triton.jit
def _pow_signed(a, e):
    # a ** e for e an integer when a < 0 (zeta reaches negative q only with integer x)
    r = tl.exp(e * tl.log(tl.abs(a)))
    half = e * 0.5
    odd = (tl.floor(e) == e) & (tl.floor(half) != half)
    return tl.where((a < 0) & odd, -r, r)


@triton.jit
def _zeta(x, q):
    # Hurwitz zeta (Cephes zeta.c, as ATen): direct sum to a > 9, then Euler-Maclaurin
    s = _pow_signed(q, -x)
    a = q
    b = q * 0.0
    for i in range(40):
        go = (i < 9) | (a <= 9.0)
        a = tl.where(go, a + 1.0, a)
        b = tl.where(go, _pow_signed(a, -x), b)
        s = tl.where(go, s + b, s)
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    a = x * 0.0 + 1.0
    k = x * 0.0
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 12.0)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -720.0)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 30240.0)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -1209600.0)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 47900160.0)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -1.8924375803183791606e9)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 7.47242496e10)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -2.950130727918164224e12)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 1.1646782814350067249e14)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -4.5979787224074726105e15)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, 1.8152105401943546773e17)
    a, b, s, k = _zeta_term(a, b, s, x, k, w, -7.1661652561756670113e18)
    # Cephes' special cases, applied last-checked first so that its order wins:
    # x == 1 -> inf, then x < 1 -> nan, then a pole at q a non-positive integer.
    qint = tl.floor(q) == q
    s = tl.where((q <= 0) & (~qint) & (tl.floor(x) != x), float("nan"), s)
    s = tl.where((q <= 0) & qint, float("inf"), s)
    s = tl.where(x < 1.0, float("nan"), s)
    s = tl.where(x == 1.0, float("inf"), s)
    return s


@triton.jit
def _polygamma(n, x):
    # n >= 2: (-1)^(n+1) n! zeta(n+1, x)
    nb = n + x * 0.0  # as a block: the interpreter mixes scalar and block booleans badly
    half = nb * 0.5
    sign = tl.where(tl.floor(half) == half, -1.0, 1.0)
    return sign * tl.exp(_lgamma_pos(nb + 1.0)) * _zeta(nb + 1.0, x)


@triton.jit
def _signbit(x, CDT: tl.constexpr):
    if CDT == F64:
        return x.to(tl.int64, bitcast=True) < 0
    elif CDT == F32:
        return x.to(tl.int32, bitcast=True) < 0
    else:
        return x < 0


@triton.jit
def _nextafter(x, y, CDT: tl.constexpr):
    # step one ulp of the compute dtype (fp32 inputs compute in fp32 for this op)
    if CDT == F64:
        bits = x.to(tl.int64, bitcast=True)
        tiny = bits * 0 + 1
        up = (bits + 1).to(tl.float64, bitcast=True)
        down = (bits - 1).to(tl.float64, bitcast=True)
        sub = tiny.to(tl.float64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
        tiny = bits * 0 + 1
        up = (bits + 1).to(tl.float32, bitcast=True)
        down = (bits - 1).to(tl.float32, bitcast=True)
        sub = tiny.to(tl.float32, bitcast=True)
    away = (y > x) == (x > 0)  # moving away from zero: magnitude grows
    r = tl.where(away, up, down)
    r = tl.where(x == 0, tl.where(y > 0, sub, -sub), r)
    r = tl.where(x == y, y, r)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def _gcd(a, b):
    a = tl.abs(a)
    b = tl.abs(b)
    for _ in range(92):  # Euclid needs at most 92 steps for int64 (Fibonacci worst case)
        nz = a != 0
        c = a
        a = tl.where(nz, b % tl.where(nz, a, 1), a)
        b = tl.where(nz, c, b)
    return b


@triton.jit
def _softplus(x, beta, threshold):
    xb = x * beta
    return tl.where(xb > threshold, x, _log1p(tl.exp(xb)) / beta)


@triton.jit
def _apply_unary(x, OP: tl.constexpr):
    """Unary: f(x)."""
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
    else:
        tl.static_assert(False, "unknown unary op")


@triton.jit
def _apply_binary(x, y, p0, OP: tl.constexpr, CDT: tl.constexpr):
    """Binary arithmetic: f(x, y); p0 = the result's bit width for the shifts."""
    FL: tl.constexpr = (CDT == F32) or (CDT == F64)
    if OP == OP_ADD:
        return x + y
    elif OP == OP_SUB:
        return x - y
    elif OP == OP_MUL:
        return x * y
    elif OP == OP_DIV:
        return x / y
    elif OP == OP_DIV_TRUNC:
        if FL:
            return _trunc(_div_rn(x, y))
        else:
            return x // y  # C semantics (truncation) in Triton
    elif OP == OP_DIV_FLOOR:
        if FL:
            # mirrors ATen's div_floor_floating
            mod = _fmod_f(x, y)
            d = _div_rn(x - mod, y)
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
    elif OP == OP_LOGADDEXP:
        m = tl.where(x > y, x, y)
        r = m + _log1p(tl.exp(-tl.abs(x - y)))
        return tl.where((tl.abs(m) == float("inf")) & (x == y), x, r)
    elif OP == OP_LOGADDEXP2:
        m = tl.where(x > y, x, y)
        r = m + _log1p(tl.exp2(-tl.abs(x - y))) * 1.4426950408889634
        return tl.where((tl.abs(m) == float("inf")) & (x == y), x, r)
    elif OP == OP_HYPOT:
        return tl.sqrt(x * x + y * y)
    elif OP == OP_COPYSIGN:
        return tl.where(_signbit(y, CDT), -tl.abs(x), tl.abs(x))
    elif OP == OP_FMAX:
        if FL:
            return tl.where(x != x, y, tl.where((y != y) | (x > y), x, y))
        else:
            return tl.where(x > y, x, y)
    elif OP == OP_FMIN:
        if FL:
            return tl.where(x != x, y, tl.where((y != y) | (x < y), x, y))
        else:
            return tl.where(x < y, x, y)
    elif OP == OP_HEAVISIDE:
        return tl.where(x == 0, y, tl.where(x > 0, 1, 0).to(x.dtype))
    elif OP == OP_NEXTAFTER:
        return _nextafter(x, y, CDT)
    elif OP == OP_XLOGY:
        r = tl.where(x == 0, 0.0, x * tl.log(y))
        return tl.where(y != y, y, r)
    elif OP == OP_XLOG1PY:
        r = tl.where(x == 0, 0.0, x * _log1p(y))
        return tl.where(y != y, y, r)
    elif OP == OP_GCD:
        return _gcd(x, y)
    elif OP == OP_LCM:
        g = _gcd(x, y)
        return tl.where(g == 0, 0, tl.abs(x // tl.where(g == 0, 1, g) * y))
    elif OP == OP_SHL:
        # p0 = bit width of the result dtype; out-of-range shifts give 0 (as ATen)
        ok = (y >= 0) & (y < p0)
        return tl.where(ok, x << tl.where(ok, y, 0), 0)
    elif OP == OP_SHR:
        ok = (y >= 0) & (y < p0)
        return tl.where(ok, x >> tl.where(ok, y, 0), x >> (p0 - 1))
    elif OP == OP_ZETA:
        return _zeta(x, y)
    else:
        tl.static_assert(False, "unknown binary op")


@triton.jit
def _apply_comparison(x, y, OP: tl.constexpr):
    """Comparisons, logical and bitwise binaries: f(x, y)."""
    if OP == OP_EQ:
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
    else:
        tl.static_assert(False, "unknown comparison op")


@triton.jit
def _apply_ternary(x, y, z, w, OP: tl.constexpr, CDT: tl.constexpr):
    """Ternary / quaternary: f(x, y, z[, w]) (add/sub take alpha as z)."""
    FL: tl.constexpr = (CDT == F32) or (CDT == F64)
    if OP == OP_ADD_ALPHA:
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
        tl.static_assert(False, "unknown ternary op")


@triton.jit
def _apply_special(x, p0, p1, p2, OP: tl.constexpr, CDT: tl.constexpr):
    """Inverse trig / hyperbolic and special functions: f(x) (computed in fp64 for floating inputs)."""
    FL: tl.constexpr = (CDT == F32) or (CDT == F64)
    if OP == OP_ACOS:
        return _atan2(tl.sqrt((1.0 - x) * (1.0 + x)), x)
    elif OP == OP_ASIN:
        return _atan2(x, tl.sqrt((1.0 - x) * (1.0 + x)))
    elif OP == OP_ATAN:
        return _atan(x)
    elif OP == OP_ASINH:
        return _asinh(x)
    elif OP == OP_ACOSH:
        return _acosh(x)
    elif OP == OP_ATANH:
        return 0.5 * _log1p(2.0 * x / (1.0 - x))
    elif OP == OP_SINH:
        return _sinh(x)
    elif OP == OP_COSH:
        return _cosh(x)
    elif OP == OP_ERFC:
        return _erfc(x)
    elif OP == OP_ERFINV:
        return _erfinv(x)
    elif OP == OP_LGAMMA:
        return _lgamma(x)
    elif OP == OP_DIGAMMA:
        return _digamma(x)
    elif OP == OP_TRIGAMMA:
        return _trigamma(x)
    elif OP == OP_POLYGAMMA:
        return _polygamma(p0, x)
    elif OP == OP_FRAC:
        return x - _trunc(x)
    elif OP == OP_SINC:
        px = 3.141592653589793 * x
        return tl.where(x == 0, 1.0, tl.sin(px) / px)
    elif OP == OP_ANGLE:
        if FL:
            return tl.where(x != x, x, tl.where(x < 0, 3.141592653589793, 0.0))
        else:
            return tl.where(x < 0, 3.141592653589793, 0.0)
    elif OP == OP_ERFCX:
        return _erfcx(x)
    elif OP == OP_LOG_NDTR:
        return _log_ndtr(x)
    elif OP == OP_NDTRI:
        return _ndtri(x)
    elif OP == OP_ENTR:
        r = tl.where(x > 0, -x * tl.log(tl.where(x > 0, x, 1.0)), tl.where(x == 0, 0.0, float("-inf")))
        return tl.where(x != x, x, r)
    elif OP == OP_ISNAN:
        return x != x
    elif OP == OP_ISPOSINF:
        return x == float("inf")
    elif OP == OP_ISNEGINF:
        return x == float("-inf")
    elif OP == OP_SIGNBIT:
        return _signbit(x, CDT)
    elif OP == OP_NAN_TO_NUM:
        r = tl.where(x != x, p0, x)
        r = tl.where(x == float("inf"), p1, r)
        return tl.where(x == float("-inf"), p2, r)
    elif OP == OP_ROUND_DECIMALS:
        # as ATen: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d when d < 0
        return tl.where(p1 != 0, _round_even(x / p0) * p0, _round_even(x * p0) / p0)
    else:
        tl.static_assert(False, "unknown special op")


@triton.jit
def _apply_activation(x, p0, p1, p2, OP: tl.constexpr):
    """Activations: f(x), P0..P2 = the op's scalar parameters."""
    if OP == OP_ELU:
        # p0 = alpha * scale (negcoef), p1 = scale, p2 = input_scale
        return tl.where(x <= 0, _expm1(x * p2) * p0, x * p1)
    elif OP == OP_SOFTPLUS:
        return _softplus(x, p0, p1)
    elif OP == OP_MISH:
        return x * _tanh(_log1p(tl.exp(x)))
    elif OP == OP_THRESHOLD:
        return tl.where(x <= p0, p1, x)
    elif OP == OP_LEAKY_RELU:
        return tl.where(x > 0, x, x * p0)
    elif OP == OP_HARDSIGMOID:
        # min/max compile to fminf/fmaxf on GPUs, which drop NaN; aten keeps it
        return tl.minimum(tl.maximum(x + 3.0, 0.0, propagate_nan=tl.PropagateNan.ALL), 6.0,
                          propagate_nan=tl.PropagateNan.ALL) / 6.0
    elif OP == OP_HARDSWISH:
        return x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
    elif OP == OP_SOFTSHRINK:
        return tl.where(x > p0, x - p0, tl.where(x < -p0, x + p0, 0.0 * x))
    elif OP == OP_HARDSHRINK:
        return tl.where((x >= -p0) & (x <= p0), 0.0 * x, x)
    elif OP == OP_LOG_SIGMOID:
        return tl.minimum(x, 0.0) - _log1p(tl.exp(-tl.abs(x)))
    elif OP == OP_LOGIT:
        # p0 = eps, p1 = 1 when eps was given
        xc = tl.where(p1 != 0, tl.where(x < p0, p0, tl.where(x > 1.0 - p0, 1.0 - p0, x)), x)
        return tl.log(xc / (1.0 - xc))
    else:
        tl.static_assert(False, "unknown activation op")


@triton.jit
def _apply_activation_backward(x, y, p0, p1, p2, OP: tl.constexpr):
    """Activation backwards: f(grad = x, self or result = y), P0..P2 as forward."""
    if OP == OP_GELU_BACKWARD:
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
    elif OP == OP_ELU_BACKWARD:
        # x = grad, y = self; p0 = negcoef, p1 = poscoef, p2 = negiptcoef
        return tl.where(y <= 0, x * p2 * p0 * tl.exp(y * p2), x * p1)
    elif OP == OP_ELU_BACKWARD_RESULT:
        # y = the forward's result
        return tl.where(y <= 0, x * p2 * (y + p0), x * p1)
    elif OP == OP_HARDTANH_BACKWARD:
        return tl.where((y <= p0) | (y >= p1), 0.0 * x, x)
    elif OP == OP_SOFTPLUS_BACKWARD:
        zz = tl.exp(y * p0)
        return tl.where(y * p0 > p1, x, x * zz / (zz + 1.0))
    elif OP == OP_MISH_BACKWARD:
        sg = 1.0 / (1.0 + tl.exp(-y))
        tsp = _tanh(_log1p(tl.exp(y)))
        return x * (tsp + y * sg * (1.0 - tsp * tsp))
    elif OP == OP_LEAKY_RELU_BACKWARD:
        return tl.where(y > 0, x, x * p0)
    elif OP == OP_HARDSIGMOID_BACKWARD:
        return tl.where((y > -3.0) & (y < 3.0), x / 6.0, 0.0 * x)
    elif OP == OP_HARDSWISH_BACKWARD:
        return tl.where(y < -3.0, 0.0 * x, tl.where(y <= 3.0, x * (y / 3.0 + 0.5), x))
    elif OP == OP_SHRINK_BACKWARD:
        return tl.where((y >= -p0) & (y <= p0), 0.0 * x, x)
    elif OP == OP_LOG_SIGMOID_BACKWARD:
        neg = y < 0
        ez = tl.exp(-tl.abs(y))
        return x * (tl.where(neg, 1.0, 0.0) - tl.where(neg, 1.0, -1.0) * (ez / (1.0 + ez)))
    elif OP == OP_LOGIT_BACKWARD:
        d = x / (y * (1.0 - y))
        lo_hi = (y < p0) | (y > 1.0 - p0)
        return tl.where(p1 != 0, tl.where(lo_hi, 0.0 * x, d), tl.where((y < 0) | (y > 1), float("nan"), d))
    else:
        tl.static_assert(False, "unknown activation backward op")


@triton.jit
def _apply(x, y, z, w, p0, p1, p2, OP: tl.constexpr, CDT: tl.constexpr):
    """The pointwise op OP (an OP_* id) on the operands x, y, z, w in the compute dtype CDT;
    p0..p2 are the op's scalar parameters. OP is a constexpr: the group and then the op are
    chosen at compile time, the kernel holds only that op's code."""
    if OP < BINARY_OPS:
        return _apply_unary(x, OP)
    elif OP < COMPARISON_OPS:
        return _apply_binary(x, y, p0, OP, CDT)
    elif OP < TERNARY_OPS:
        return _apply_comparison(x, y, OP)
    elif OP < SPECIAL_OPS:
        return _apply_ternary(x, y, z, w, OP, CDT)
    elif OP < ACTIVATION_OPS:
        return _apply_special(x, p0, p1, p2, OP, CDT)
    elif OP < ACTIVATION_BACKWARD_OPS:
        return _apply_activation(x, p0, p1, p2, OP)
    else:
        return _apply_activation_backward(x, y, p0, p1, p2, OP)


@triton.jit
def _off6(i0, i1, i2, i3, i4, i5, s0, s1, s2, s3, s4, s5):
    return i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3 + i4 * s4 + i5 * s5


@triton.jit(do_not_specialize=['P0', 'P1', 'P2'])
def pointwise_kernel(out, a, b, c, d, N,
                     S0, S1, S2, S3, S4, S5,
                     o0, o1, o2, o3, o4, o5,
                     a0, a1, a2, a3, a4, a5,
                     b0, b1, b2, b3, b4, b5,
                     c0, c1, c2, c3, c4, c5,
                     d0, d1, d2, d3, d4, d5, P0, P1, P2,
                     OP: tl.constexpr, NIN: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                     BLOCK: tl.constexpr):
    """out[idx] = OP(a[idx], b[idx], c[idx], d[idx]) over a 6-d index space (sizes S*);
    every operand has its own element strides (0 for broadcast dims). P0..P2 are the
    op's scalar parameters, passed exactly as the int64 bit patterns of doubles."""
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
    p0 = _to_cdt(P0.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p1 = _to_cdt(P1.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p2 = _to_cdt(P2.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    res = _apply(x, y, z, w, p0, p1, p2, OP, CDT)
    tl.store(out + _off6(i0, i1, i2, i3, i4, i5, o0, o1, o2, o3, o4, o5), _to_odt(res, ODT), mask=mask)


@triton.jit
def _dense_operand(ptr, lin, mask, imm, KIND: tl.constexpr, OTHER: tl.constexpr, CDT: tl.constexpr):
    """One operand of pointwise_dense_kernel, by KIND: 0 a tensor laid out like the
    output, 1 a 0-dim tensor (one element, broadcast), 2/3 an immediate int/float
    (`imm`: the value, or for 3 a double's int64 bit pattern)."""
    if KIND == 0:
        v = _to_cdt(tl.load(ptr + lin, mask=mask, other=OTHER), CDT)
    elif KIND == 1:
        v = _to_cdt(tl.load(ptr + lin * 0, mask=mask, other=OTHER), CDT)
    elif KIND == 2:
        v = _to_cdt(tl.zeros_like(lin) + imm.to(tl.int64), CDT)
    else:
        v = _to_cdt((tl.zeros_like(lin) + imm.to(tl.int64)).to(tl.float64, bitcast=True), CDT)
    return v


@triton.jit(do_not_specialize=['V0', 'V1', 'V2', 'V3', 'P0', 'P1', 'P2'])
def pointwise_dense_kernel(out, a, b, c, d, N, V0, V1, V2, V3, P0, P1, P2,
                           OP: tl.constexpr, NIN: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                           KA: tl.constexpr, KB: tl.constexpr, KC: tl.constexpr, KD: tl.constexpr,
                           BLOCK: tl.constexpr):
    """pointwise_kernel's fast path: a contiguous output, every operand either laid out
    like it, a 0-dim tensor or an immediate scalar (K* and V*, see _dense_operand).
    Twelve launch arguments instead of forty: the host cost of a launch is per argument."""
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < N
    x = _dense_operand(a, lin, mask, V0, KA, 0, CDT)
    y = x
    z = x
    w = x
    if NIN >= 2:
        y = _dense_operand(b, lin, mask, V1, KB, 1, CDT)
    if NIN >= 3:
        z = _dense_operand(c, lin, mask, V2, KC, 1, CDT)
    if NIN >= 4:
        w = _dense_operand(d, lin, mask, V3, KD, 1, CDT)
    p0 = _to_cdt(P0.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p1 = _to_cdt(P1.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p2 = _to_cdt(P2.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    res = _apply(x, y, z, w, p0, p1, p2, OP, CDT)
    tl.store(out + lin, _to_odt(res, ODT), mask=mask)


# cat_kernel's inputs per launch (CUDA's batched cat copies up to 128 per launch through a
# parameter struct; eight pointers cover the usual two to four and keep the signature short).
CAT_INPUTS = 8


@triton.jit
def _cat_pick(i, k: tl.constexpr, x, w, c, src, width, col):
    """Input k's pointer, width and column when this program copies input k (i == k)."""
    if i == k:
        src = x
        width = w + tl.zeros([], tl.int64)
        col = c + tl.zeros([], tl.int64)
    return src, width, col


@triton.jit
def cat_kernel(out, x0, x1, x2, x3, x4, x5, x6, x7, w0, w1, w2, w3, w4, w5, w6, w7,
               c0, c1, c2, c3, c4, c5, c6, c7, ROWS, OUT_W, N: tl.constexpr, BLOCK: tl.constexpr):
    """cat of N contiguous inputs of the output's dtype in one launch: input i, seen as
    [ROWS, w_i], lands in columns [c_i, c_i + w_i) of the contiguous output seen as
    [ROWS, OUT_W]. Program (p, i) copies elements [p * BLOCK, (p + 1) * BLOCK) of input i."""
    i = tl.program_id(1)
    src, width, col = x0, w0 + tl.zeros([], tl.int64), c0 + tl.zeros([], tl.int64)
    if N > 1:
        src, width, col = _cat_pick(i, 1, x1, w1, c1, src, width, col)
    if N > 2:
        src, width, col = _cat_pick(i, 2, x2, w2, c2, src, width, col)
    if N > 3:
        src, width, col = _cat_pick(i, 3, x3, w3, c3, src, width, col)
    if N > 4:
        src, width, col = _cat_pick(i, 4, x4, w4, c4, src, width, col)
    if N > 5:
        src, width, col = _cat_pick(i, 5, x5, w5, c5, src, width, col)
    if N > 6:
        src, width, col = _cat_pick(i, 6, x6, w6, c6, src, width, col)
    if N > 7:
        src, width, col = _cat_pick(i, 7, x7, w7, c7, src, width, col)
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < ROWS * width
    row = lin // width
    v = tl.load(src + lin, mask=mask)
    tl.store(out + row * OUT_W + col + (lin - row * width), v, mask=mask)


@triton.jit(do_not_specialize=['bits'])
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
# The reductions reduce_kernel is specialised on (OP); the host names them by RED_ID key.
R_SUM = tl.constexpr(0)
R_PROD = tl.constexpr(1)
R_MAX = tl.constexpr(2)
R_MIN = tl.constexpr(3)
R_ARGMAX = tl.constexpr(4)
R_ARGMIN = tl.constexpr(5)
R_MEAN = tl.constexpr(6)
R_VAR = tl.constexpr(7)
R_ALL = tl.constexpr(8)
R_ANY = tl.constexpr(9)
R_NORM2 = tl.constexpr(10)
R_NORM1 = tl.constexpr(11)
R_NORMP = tl.constexpr(12)
R_NORM0 = tl.constexpr(13)
R_AMAX_ABS = tl.constexpr(14)
R_AMIN_ABS = tl.constexpr(15)
# reduction name -> id, for the host: "sum" -> R_SUM's value
RED_ID: dict[str, int] = {name[2:].lower(): value.value for name, value in list(globals().items())
                          if name.startswith("R_") and isinstance(value, tl.constexpr)}


@triton.jit
def reduce_leading_kernel(x, out, K, M, K_PER, K_TOTAL, MEAN: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                          BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr):
    """Sum over the leading dim of a contiguous (K, M) tensor read in place, in any dtype, summed
    in the compute dtype (a bias gradient: rows are tokens). Program (j, s) sums rows
    [s * K_PER, (s + 1) * K_PER) of columns [j * BLOCK_M, (j + 1) * BLOCK_M) into row s of out
    (M wide): each row's load is contiguous. MEAN divides by K_TOTAL."""
    cols = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cmask = cols < M
    start = tl.program_id(1).to(tl.int64) * K_PER
    acc = _to_cdt(tl.zeros([BLOCK_K, BLOCK_M], dtype=tl.int32), CDT)
    for k0 in range(0, K_PER, BLOCK_K):
        rows = start + k0 + tl.arange(0, BLOCK_K)
        m2 = (rows < K)[:, None] & cmask[None, :]
        v = tl.load(x + rows[:, None] * M + cols[None, :], mask=m2, other=0)
        acc += _to_cdt(v, CDT)
    res = tl.sum(acc, axis=0)
    if MEAN:
        res = res / K_TOTAL
    tl.store(out + tl.program_id(1).to(tl.int64) * M + cols, _to_odt(res, ODT), mask=cmask)


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
def softmax_kernel(x, out, M, K, LOG: tl.constexpr, ODT: tl.constexpr, BLOCK_K: tl.constexpr,
                   ONE_PASS: tl.constexpr):
    """Rows of a contiguous (M, K) buffer of the compute dtype (fp32/fp64). ONE_PASS (a row
    fits one block): the row is read once and kept in registers; else three passes."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    base = x + row * K
    if ONE_PASS:
        mk = cols0 < K
        v = tl.load(base + cols0, mask=mk, other=-float("inf"))
        m1 = tl.max(v, axis=0)
        e = tl.where(mk, tl.exp(v - m1), 0.0)
        tot1 = tl.sum(e, axis=0)
        if LOG:
            r1 = v - m1 - tl.log(tot1)
        else:
            r1 = e / tot1
        tl.store(out + row * K + cols0, _to_odt(r1, ODT), mask=mk)
    else:
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
def softmax_bwd_kernel(g, y, out, M, K, LOG: tl.constexpr, ODT: tl.constexpr, BLOCK_K: tl.constexpr,
                       ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    if ONE_PASS:
        mk1 = cols0 < K
        g1 = tl.load(g + row * K + cols0, mask=mk1, other=0)
        y1 = tl.load(y + row * K + cols0, mask=mk1, other=0)
        if LOG:
            r1 = g1 - tl.exp(y1) * tl.sum(g1, axis=0)
        else:
            r1 = y1 * (g1 - tl.sum(g1 * y1, axis=0))
        tl.store(out + row * K + cols0, _to_odt(r1, ODT), mask=mk1)
    else:
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
                      BLOCK_K: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    if ONE_PASS:  # the row in registers: one read of x
        mk1 = cols0 < K
        v1 = tl.load(x + row * K + cols0, mask=mk1, other=0)
        mean1 = tl.sum(v1, axis=0) / K
        d1 = tl.where(mk1, v1 - mean1, 0.0)
        rstd1 = 1.0 / tl.sqrt(tl.sum(d1 * d1, axis=0) / K + eps)
        r1 = d1 * rstd1
        if HAS_W:
            r1 = r1 * tl.load(w + cols0, mask=mk1, other=0)
        if HAS_B:
            r1 = r1 + tl.load(b + cols0, mask=mk1, other=0)
        tl.store(out + row * K + cols0, _to_odt(r1, ODT), mask=mk1)
        tl.store(mean_out + row, _to_odt(mean1, SDT))
        tl.store(rstd_out + row, _to_odt(rstd1, SDT))
    else:
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
                          BLOCK_K: tl.constexpr, ONE_PASS: tl.constexpr):
    """dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) per row (buffers in compute dtype)."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_K)
    mu = tl.load(mean + row)
    rs = tl.load(rstd + row)
    if ONE_PASS:
        mk1 = cols0 < K
        g1 = tl.load(g + row * K + cols0, mask=mk1, other=0)
        if HAS_W:
            g1 = g1 * tl.load(w + cols0, mask=mk1, other=0)
        xh1 = tl.where(mk1, (tl.load(x + row * K + cols0, mask=mk1, other=0) - mu) * rs, 0.0)
        a1 = tl.sum(g1, axis=0) / K
        c1 = tl.sum(g1 * xh1, axis=0) / K
        tl.store(dx + row * K + cols0, _to_odt(rs * (g1 - a1 - xh1 * c1), ODT), mask=mk1)
    else:
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


@triton.jit
def layer_norm_bwd_wb_kernel(g, x, mean, rstd, dw, db, M, K, ROWS, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                             F64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Column sums over the rows [ROWS * part, ROWS * (part + 1)), part = program_id(1):
    dw[part, c] = sum g * (x - mean) * rstd, db[part, c] = sum g, accumulated in float32 (float64
    for float64 buffers); one pass over g and x for both (CUDA's gamma/beta kernel)."""
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    cmask = cols < K
    part = tl.program_id(1).to(tl.int64)
    start = part * ROWS
    if F64:
        accw = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float64)
        accb = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float64)
    else:
        accw = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
        accb = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for r0 in range(0, ROWS, BLOCK_M):
        local = r0 + tl.arange(0, BLOCK_M)
        rows = start + local
        rmask = (rows < M) & (local < ROWS)
        m2 = rmask[:, None] & cmask[None, :]
        offsets = rows[:, None] * K + cols[None, :]
        gv = tl.load(g + offsets, mask=m2, other=0).to(accw.dtype)
        if HAS_W:
            xv = tl.load(x + offsets, mask=m2, other=0).to(accw.dtype)
            mu = tl.load(mean + rows, mask=rmask, other=0).to(accw.dtype)
            rs = tl.load(rstd + rows, mask=rmask, other=0).to(accw.dtype)
            accw += tl.where(m2, gv * (xv - mu[:, None]) * rs[:, None], 0.0)
        if HAS_B:
            accb += gv
    if HAS_W:
        tl.store(dw + part * K + cols, tl.sum(accw, axis=0).to(dw.dtype.element_ty), mask=cmask)
    if HAS_B:
        tl.store(db + part * K + cols, tl.sum(accb, axis=0).to(db.dtype.element_ty), mask=cmask)


# --------------------------------------------------------- fused RNN cells ---
# torch's CUDA kernels' arithmetic (aten/src/ATen/native/cuda/RNN.cu): one launch per cell
# step, in float32 (float64 for float64 tensors), over the batch x hidden elements; gate k of
# row b lies at columns [k * H, (k + 1) * H) of the gate matrices and the workspace.
@triton.jit
def _rnn_load(p, offs, m, F64: tl.constexpr):
    v = tl.load(p + offs, mask=m, other=0)
    if F64:
        return v.to(tl.float64)
    return v.to(tl.float32)


@triton.jit
def _rnn_elements(N, H, BLOCK: tl.constexpr):
    """This program's elements of the batch x H state: (offsets, mask, row, column)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row = offs // H
    return offs, offs < N, row, offs - row * H


@triton.jit
def _rnn_sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def lstm_cell_kernel(ig, hg, cx, bi, bh, hy, cy, ws, N, H, HAS_BI: tl.constexpr, HAS_BH: tl.constexpr,
                     F64: tl.constexpr, BLOCK: tl.constexpr):
    """cy = f * cx + i * g, hy = o * tanh(cy); ws = (i, f, g, o), activated."""
    offs, m, row, col = _rnn_elements(N, H, BLOCK)
    gate = row * 4 * H + col
    gi = _rnn_load(ig, gate, m, F64) + _rnn_load(hg, gate, m, F64)
    gf = _rnn_load(ig, gate + H, m, F64) + _rnn_load(hg, gate + H, m, F64)
    gg = _rnn_load(ig, gate + 2 * H, m, F64) + _rnn_load(hg, gate + 2 * H, m, F64)
    go = _rnn_load(ig, gate + 3 * H, m, F64) + _rnn_load(hg, gate + 3 * H, m, F64)
    if HAS_BI:
        gi += _rnn_load(bi, col, m, F64)
        gf += _rnn_load(bi, col + H, m, F64)
        gg += _rnn_load(bi, col + 2 * H, m, F64)
        go += _rnn_load(bi, col + 3 * H, m, F64)
    if HAS_BH:
        gi += _rnn_load(bh, col, m, F64)
        gf += _rnn_load(bh, col + H, m, F64)
        gg += _rnn_load(bh, col + 2 * H, m, F64)
        go += _rnn_load(bh, col + 3 * H, m, F64)
    i = _rnn_sigmoid(gi)
    f = _rnn_sigmoid(gf)
    g = _tanh(gg)
    o = _rnn_sigmoid(go)
    c = f * _rnn_load(cx, offs, m, F64) + i * g
    tl.store(cy + offs, c.to(cy.dtype.element_ty), mask=m)
    tl.store(hy + offs, (o * _tanh(c)).to(hy.dtype.element_ty), mask=m)
    tl.store(ws + gate, i.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + gate + H, f.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + gate + 2 * H, g.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + gate + 3 * H, o.to(ws.dtype.element_ty), mask=m)


@triton.jit
def lstm_cell_bwd_kernel(ghy, gcy, cx, cy, ws, grad_gates, grad_cx, N, H, HAS_GHY: tl.constexpr,
                         HAS_GCY: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """The gates' and cx's gradients of lstm_cell_kernel (an undefined output gradient is zero)."""
    offs, m, row, col = _rnn_elements(N, H, BLOCK)
    gate = row * 4 * H + col
    i = _rnn_load(ws, gate, m, F64)
    f = _rnn_load(ws, gate + H, m, F64)
    g = _rnn_load(ws, gate + 2 * H, m, F64)
    o = _rnn_load(ws, gate + 3 * H, m, F64)
    tanh_cy = _tanh(_rnn_load(cy, offs, m, F64))
    if HAS_GCY:
        grad_c = _rnn_load(gcy, offs, m, F64)
    else:
        grad_c = tanh_cy * 0.0
    grad_o = tanh_cy * 0.0
    if HAS_GHY:
        gh = _rnn_load(ghy, offs, m, F64)
        grad_c += gh * o * (1.0 - tanh_cy * tanh_cy)
        grad_o = gh * tanh_cy * o * (1.0 - o)
    x = _rnn_load(cx, offs, m, F64)
    tl.store(grad_gates + gate, (grad_c * g * i * (1.0 - i)).to(grad_gates.dtype.element_ty), mask=m)
    tl.store(grad_gates + gate + H, (grad_c * x * f * (1.0 - f)).to(grad_gates.dtype.element_ty), mask=m)
    tl.store(grad_gates + gate + 2 * H, (grad_c * i * (1.0 - g * g)).to(grad_gates.dtype.element_ty), mask=m)
    tl.store(grad_gates + gate + 3 * H, grad_o.to(grad_gates.dtype.element_ty), mask=m)
    tl.store(grad_cx + offs, (grad_c * f).to(grad_cx.dtype.element_ty), mask=m)


@triton.jit
def gru_cell_kernel(ig, hg, hx, bi, bh, hy, ws, N, H, HAS_BI: tl.constexpr, HAS_BH: tl.constexpr,
                    F64: tl.constexpr, BLOCK: tl.constexpr):
    """r, z = sigmoid(input + hidden gates), n = tanh(input n + r * hidden n), hy = n + z * (hx - n);
    ws = (r, z, n, hx, hidden n)."""
    offs, m, row, col = _rnn_elements(N, H, BLOCK)
    gate = row * 3 * H + col
    in_r = _rnn_load(ig, gate, m, F64)
    in_z = _rnn_load(ig, gate + H, m, F64)
    in_n = _rnn_load(ig, gate + 2 * H, m, F64)
    hid_r = _rnn_load(hg, gate, m, F64)
    hid_z = _rnn_load(hg, gate + H, m, F64)
    hid_n = _rnn_load(hg, gate + 2 * H, m, F64)
    if HAS_BI:
        in_r += _rnn_load(bi, col, m, F64)
        in_z += _rnn_load(bi, col + H, m, F64)
        in_n += _rnn_load(bi, col + 2 * H, m, F64)
    if HAS_BH:
        hid_r += _rnn_load(bh, col, m, F64)
        hid_z += _rnn_load(bh, col + H, m, F64)
        hid_n += _rnn_load(bh, col + 2 * H, m, F64)
    r = _rnn_sigmoid(in_r + hid_r)
    z = _rnn_sigmoid(in_z + hid_z)
    n = _tanh(in_n + r * hid_n)
    h = _rnn_load(hx, offs, m, F64)
    tl.store(hy + offs, (n + z * (h - n)).to(hy.dtype.element_ty), mask=m)
    slot = row * 5 * H + col
    tl.store(ws + slot, r.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + slot + H, z.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + slot + 2 * H, n.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + slot + 3 * H, h.to(ws.dtype.element_ty), mask=m)
    tl.store(ws + slot + 4 * H, hid_n.to(ws.dtype.element_ty), mask=m)


@triton.jit
def gru_cell_bwd_kernel(ghy, ws, grad_input, grad_hidden, grad_hx, N, H, F64: tl.constexpr, BLOCK: tl.constexpr):
    """The input gates', hidden gates' and hx's gradients of gru_cell_kernel."""
    offs, m, row, col = _rnn_elements(N, H, BLOCK)
    slot = row * 5 * H + col
    r = _rnn_load(ws, slot, m, F64)
    z = _rnn_load(ws, slot + H, m, F64)
    n = _rnn_load(ws, slot + 2 * H, m, F64)
    h = _rnn_load(ws, slot + 3 * H, m, F64)
    hid_n = _rnn_load(ws, slot + 4 * H, m, F64)
    gh = _rnn_load(ghy, offs, m, F64)
    grad_z = gh * (h - n) * z * (1.0 - z)
    grad_n = gh * (1.0 - z) * (1.0 - n * n)
    grad_r = grad_n * hid_n * r * (1.0 - r)
    gate = row * 3 * H + col
    ty = grad_input.dtype.element_ty
    tl.store(grad_input + gate, grad_r.to(ty), mask=m)
    tl.store(grad_input + gate + H, grad_z.to(ty), mask=m)
    tl.store(grad_input + gate + 2 * H, grad_n.to(ty), mask=m)
    tl.store(grad_hidden + gate, grad_r.to(ty), mask=m)
    tl.store(grad_hidden + gate + H, grad_z.to(ty), mask=m)
    tl.store(grad_hidden + gate + 2 * H, (grad_n * r).to(ty), mask=m)
    tl.store(grad_hx + offs, (gh * z).to(grad_hx.dtype.element_ty), mask=m)


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
    elif CDT == I64 or CDT == I32:
        acc = tl.zeros([BM, BN], dtype=tl.int64)
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
        elif CDT == I64 or CDT == I32:
            # tl.dot is floating-point only: integer products summed exactly in int64
            acc += tl.sum(av.to(tl.int64)[:, :, None] * bv.to(tl.int64)[None, :, :], axis=1)
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


# ------------------------------------------------------- creation kernels ---
@triton.jit(do_not_specialize=['start_bits', 'step_bits', 'end_bits'])
def range_kernel(out, N, stride, start_bits, step_bits, end_bits, HALF,
                 MODE: tl.constexpr, IS_FLOAT: tl.constexpr, CDT: tl.constexpr, ODT: tl.constexpr,
                 BLOCK: tl.constexpr):
    """out[i] for a 1-d strided `out`. MODE 0: arange (start + i*step, in fp64 / int64 as
    ATen's CPU accumulate type); 1: linspace (start + step*i below HALF, end - step*(N-1-i)
    above, in CDT); 2: logspace (10^.. of the linspace exponent; base passed as end_bits'
    companion: start/step/end are exponents, HALF as in linspace, base in step_bits' slot)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    if IS_FLOAT:
        start = start_bits.to(tl.int64).to(tl.float64, bitcast=True)
        step = step_bits.to(tl.int64).to(tl.float64, bitcast=True)
        end = end_bits.to(tl.int64).to(tl.float64, bitcast=True)
    else:
        start = start_bits.to(tl.int64)
        step = step_bits.to(tl.int64)
        end = end_bits.to(tl.int64)
    if MODE == 0:
        v = start + i * step
    else:
        fi = _to_cdt(i, CDT)
        st = _to_cdt(start, CDT)
        sp = _to_cdt(step, CDT)
        en = _to_cdt(end, CDT)
        v = tl.where(i < HALF, st + sp * fi, en - sp * _to_cdt(N - 1 - i, CDT))
    tl.store(out + i * stride, _to_odt(v, ODT), mask=mask)


@triton.jit(do_not_specialize=['base_bits'])
def pow_base_kernel(out, N, stride, base_bits, BLOCK: tl.constexpr, ODT: tl.constexpr):
    """out[i] = base ** out[i] in place (logspace), computed in fp64."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    base = base_bits.to(tl.int64).to(tl.float64, bitcast=True)
    e = tl.load(out + i * stride, mask=mask, other=0).to(tl.float64)
    tl.store(out + i * stride, _to_odt(_fpow(base + e * 0.0, e), ODT), mask=mask)


@triton.jit
def tri_kernel(x, out, B, R, C, sxb, sxr, sxc, sob, sor, soc, DIAG,
               LOWER: tl.constexpr, EYE: tl.constexpr, ODT: tl.constexpr,
               BR: tl.constexpr, BC: tl.constexpr):
    """tril/triu of a batch of matrices (keep col - row <= DIAG, or >= DIAG); EYE writes (row == col)."""
    b = tl.program_id(2).to(tl.int64)
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (r[:, None] < R) & (c[None, :] < C)
    d = c[None, :] - r[:, None]
    if EYE:
        v = tl.where(d == 0, 1, 0)
    else:
        xv = tl.load(x + b * sxb + r[:, None] * sxr + c[None, :] * sxc, mask=m, other=0)
        if LOWER:
            v = tl.where(d <= DIAG, xv, 0)
        else:
            v = tl.where(d >= DIAG, xv, 0)
    tl.store(out + b * sob + r[:, None] * sor + c[None, :] * soc, _to_odt(v, ODT), mask=m)


# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
