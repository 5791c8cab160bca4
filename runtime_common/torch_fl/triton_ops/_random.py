"""The `random` family's kernels: the in-place samplers (uniform_, normal_, bernoulli_,
exponential_, geometric_, log_normal_, cauchy_, random_), native_dropout, and what torch builds
on them (normal of tensor means and deviations, bernoulli.out, multinomial, randperm), drawn on
the chip.

Numbers come from Philox4x32-10, counter-based as CUDA's generator: element i of a call uses
counter (offset + i) under key `seed`, and each call reserves its elements' counters from the
chip generator (`_C._philox_engine_inputs`: seed and offset, advanced under the generator's
lock), so a seeded chip repeats its draws and `get_rng_state`/`set_rng_state` replay them.
The numbers differ from the CPU's (mt19937), as CUDA's do.

Parameters outside an op's domain (p outside [0, 1], std < 0, from > to, ...) and dtypes the
kernels do not draw in are declined: the next step of the chain (the CPU) raises ATen's own
error or draws them.
"""
from __future__ import annotations

import importlib
import math

import torch
import triton
import triton.language as tl

from . import Unsupported, _launch
from ._common import BLOCK, FLOATS, copy_into, dtype_code, empty, grid1, resize_out, scalar_bits
from ._kernels import F64, _to_odt
from ._launch import RECORDER

# What each call draws (the kernel's MODE).
UNIFORM, NORMAL, BERNOULLI, BERNOULLI_TENSOR, EXPONENTIAL, GEOMETRIC, LOG_NORMAL, CAUCHY, RANDOM, DROPOUT = range(10)
TWO_PI = 6.283185307179586
INV_2_32 = 2.3283064365386963e-10    # 2^-32
INV_2_53 = 1.1102230246251565e-16    # 2^-53


@triton.jit
def _uniform01(r0, r1, DIGITS: tl.constexpr):
    """A uniform number in [0, 1) of DIGITS random bits (53: fp64's mantissa, from two words),
    in fp64: a multiple of 2^-DIGITS, so a dtype of DIGITS mantissa bits holds it exactly."""
    if DIGITS == 53:
        hi = (r0 >> 5).to(tl.float64)
        lo = (r1 >> 6).to(tl.float64)
        return (hi * 67108864.0 + lo) * 1.1102230246251565e-16
    else:
        return (r0 >> (32 - DIGITS)).to(tl.float64) * (1.0 / (1 << DIGITS))


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "offset", "a_bits", "b_bits"])
def random_kernel(out, aux, src, N, seed_lo, seed_hi, offset, a_bits, b_bits,
                  MODE: tl.constexpr, ODT: tl.constexpr, DIGITS: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] for contiguous `out` of N elements; `src` (p, or dropout's input) and `aux`
    (dropout's mask) are contiguous too. a/b: the op's two parameters as fp64 bit patterns
    (RANDOM: `from` and the range size as int64 / uint64 bit patterns). DIGITS: the random
    bits of each uniform number (the output's mantissa for uniform_, as ATen draws)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < N
    counter = offset + i
    c0 = (counter & 0xFFFFFFFF).to(tl.uint32)
    c1 = ((counter >> 32) & 0xFFFFFFFF).to(tl.uint32)
    seed = (seed_hi.to(tl.uint64) << 32) | seed_lo.to(tl.uint64)
    r0, r1, r2, r3 = tl.philox(seed, c0, c1, c0 * 0, c0 * 0)
    a = a_bits.to(tl.int64).to(tl.float64, bitcast=True)
    b = b_bits.to(tl.int64).to(tl.float64, bitcast=True)
    u = _uniform01(r0, r1, DIGITS)
    if MODE == 0:    # UNIFORM on [a, b)
        v = a + (b - a) * u
        v = tl.where(v >= b, a, v)   # a rounding up to b: [a, b) as ATen keeps it
    elif MODE == 1 or MODE == 6:   # NORMAL / LOG_NORMAL: Box-Muller on two uniforms
        u1 = 1.0 - u   # (0, 1]
        u2 = _uniform01(r2, r3, DIGITS)
        z = tl.sqrt(-2.0 * tl.log(u1)) * tl.cos(6.283185307179586 * u2)
        v = a + b * z
        if MODE == 6:
            v = tl.exp(v)
    elif MODE == 2:   # BERNOULLI with probability a
        v = tl.where(u < a, 1.0, 0.0)
    elif MODE == 3:   # BERNOULLI_TENSOR: probability src[i]
        p = tl.load(src + i, mask=mask, other=0.0).to(tl.float64)
        v = tl.where(u < p, 1.0, 0.0)
    elif MODE == 4:   # EXPONENTIAL with rate a
        v = -tl.log(1.0 - u) / a
    elif MODE == 5:   # GEOMETRIC with success probability a: trials up to the first success
        v = tl.ceil(tl.log(1.0 - u) / tl.log(1.0 - a))
        v = tl.maximum(v, 1.0)
    elif MODE == 7:   # CAUCHY: median a, scale b
        v = a + b * tl.sin(3.141592653589793 * (u - 0.5)) / tl.cos(3.141592653589793 * (u - 0.5))
    elif MODE == 8:   # RANDOM: from a (int64) plus 64 random bits modulo the range b (uint64)
        lo = a_bits.to(tl.int64)
        span = b_bits.to(tl.int64).to(tl.uint64, bitcast=True)
        bits = (r1.to(tl.uint64) << 32) | r0.to(tl.uint64)
        v = lo + (bits % span).to(tl.int64, bitcast=True)
    else:             # DROPOUT: keep with probability a, scale b
        x = tl.load(src + i, mask=mask, other=0.0)
        keep = u < a
        if DIGITS == 53:
            v = tl.where(keep, x.to(tl.float64) * b, 0.0)
        else:
            v = tl.where(keep, x.to(tl.float32) * b.to(tl.float32), 0.0)
        tl.store(aux + i, keep, mask=mask)
    tl.store(out + i, _to_odt(v, ODT), mask=mask)


# ------------------------------------------------------------------ the generator --
_ENGINES: dict[str, object] = {}


def philox_seed_offset(generator, device: torch.device, increment: int) -> tuple[int, int]:
    """(seed, offset) for `increment` counters of `generator` (default: the device's), from the
    chip's `_C._philox_engine_inputs`; a device without one (no chip generator) is declined."""
    if device.type not in _ENGINES:
        try:
            _ENGINES[device.type] = importlib.import_module(f"torch_fl_{device.type}._C")._philox_engine_inputs
        except (ImportError, AttributeError):
            _ENGINES[device.type] = None
    engine = _ENGINES[device.type]
    if engine is None:
        raise Unsupported(f"no chip generator for {device.type} tensors")
    seed, offset = engine(generator, -1 if device.index is None else device.index, increment)
    if RECORDER.rng is not None:  # a call recorded for its C++ replay, which reserves them again
        RECORDER.rng(generator, device, increment, seed, offset)
    return seed, offset


# -------------------------------------------------------------------- launching --
def _bits(value: float) -> int:
    return scalar_bits(float(value), torch.float64)[0]


def _digits(dtype, mode) -> int:
    if dtype == torch.float64:
        return 53
    return _MANTISSA_DIGITS.get(dtype, 24) if mode == UNIFORM else 24


def _draw(self, mode, a_bits, b_bits, generator, src=None, aux=None):
    """Fills `self` in place by `mode`; a non-contiguous `self` is filled through a buffer."""
    n = self.numel()
    if n == 0:
        return self
    code = dtype_code(self.dtype)
    target = self if self.is_contiguous() else empty(self.shape, self.dtype, self.device)
    seed, offset = philox_seed_offset(generator, self.device, n)
    random_kernel[grid1(n)](target, aux if aux is not None else target, src if src is not None else target, n,
                            seed & 0xFFFFFFFF, seed >> 32, offset, a_bits, b_bits,
                            MODE=mode, ODT=code, DIGITS=_digits(self.dtype, mode), BLOCK=BLOCK)
    if target is not self:
        copy_into(self, target)
    return self


def _floating(self, op):
    if self.dtype not in FLOATS:
        raise Unsupported(f"{op} draws floating tensors only ({self.dtype}: the next step raises or draws it)")


def _finite(*values):
    return all(math.isfinite(float(v)) for v in values)


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    _floating(self, "uniform_")
    if not (_finite(from_, to) and from_ <= to):
        raise Unsupported("uniform_ bounds outside [from <= to], finite")
    return _draw(self, UNIFORM, _bits(from_), _bits(to), generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    _floating(self, "normal_")
    if not (std >= 0.0):
        raise Unsupported("normal_ needs std >= 0")
    return _draw(self, NORMAL, _bits(mean), _bits(std), generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    _floating(self, "log_normal_")
    if not (std > 0.0):
        raise Unsupported("log_normal_ needs std > 0")
    return _draw(self, LOG_NORMAL, _bits(mean), _bits(std), generator)


def exponential_(self, lambd=1.0, *, generator=None):
    _floating(self, "exponential_")
    if not (lambd > 0.0):
        raise Unsupported("exponential_ needs lambda > 0")
    return _draw(self, EXPONENTIAL, _bits(lambd), 0, generator)


def geometric_(self, p, *, generator=None):
    if self.dtype == torch.bool:
        raise Unsupported("geometric_ of bool")
    if not (0.0 < p < 1.0):
        raise Unsupported("geometric_ needs 0 < p < 1")
    return _draw(self, GEOMETRIC, _bits(p), 0, generator)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    _floating(self, "cauchy_")
    if not (sigma > 0.0):
        raise Unsupported("cauchy_ needs sigma > 0")
    return _draw(self, CAUCHY, _bits(median), _bits(sigma), generator)


def bernoulli__float(self, p=0.5, *, generator=None):
    if not (0.0 <= p <= 1.0):
        raise Unsupported("bernoulli_ needs 0 <= p <= 1")
    return _draw(self, BERNOULLI, _bits(p), 0, generator)


def bernoulli__Tensor(self, p, *, generator=None):
    if p.device != self.device or not p.dtype.is_floating_point or p.dtype not in FLOATS:
        raise Unsupported("bernoulli_ with a p tensor on another device or of a non-floating dtype")
    probability = empty(self.shape, torch.float64, self.device)
    copy_into(probability, p)   # broadcast to self, in fp64 (the CPU's ranges check is on values)
    return _draw(self, BERNOULLI_TENSOR, 0, 0, generator, src=probability)


# random_: integers drawn uniformly from [from, to); floating tensors get integers their
# mantissa holds exactly, as ATen's.
_MANTISSA_DIGITS = {torch.float32: 24, torch.float64: 53, torch.float16: 11, torch.bfloat16: 8}


def _full_range(dtype) -> tuple[int, int]:
    """[low, high) of random_() and of random_.from with to=None."""
    if dtype == torch.bool:
        return 0, 2
    if dtype in _MANTISSA_DIGITS:
        return 0, (1 << _MANTISSA_DIGITS[dtype]) + 1
    return 0, torch.iinfo(dtype).max + 1


def _random_range(self, low: int, high: int, generator):
    dtype_code(self.dtype)
    span = high - low
    if span <= 0 or span >= 1 << 64 or not (-(1 << 63) <= low < 1 << 63):
        raise Unsupported("random_ range outside the kernel's 64 bits")
    return _draw(self, RANDOM, low, span - (1 << 64) if span >= 1 << 63 else span, generator)


def random_(self, *, generator=None):
    return _random_range(self, *_full_range(self.dtype), generator)


def random__to(self, to, *, generator=None):
    if to <= 0:
        raise Unsupported("random_ needs to > 0")
    return _random_range(self, 0, int(to), generator)


def random__from(self, from_, to=None, *, generator=None):
    high = _full_range(self.dtype)[1] if to is None else int(to)
    if int(from_) >= high:
        raise Unsupported("random_ needs from < to")
    return _random_range(self, int(from_), high, generator)


def native_dropout(input, p, train):
    """(output, mask) of dropout: each element kept with probability 1 - p and scaled by
    1 / (1 - p), as ATen's (train=False or None: the input unchanged, every element kept)."""
    if input.dtype not in FLOATS:
        raise Unsupported("native_dropout of a non-floating tensor")
    if train is False:
        return input.clone(), torch.ones(input.shape, dtype=torch.bool, device=input.device)
    if not (0.0 <= p <= 1.0):
        raise Unsupported("native_dropout needs 0 <= p <= 1")
    x = input if input.is_contiguous() else input.contiguous()
    out = empty(x.shape, x.dtype, x.device)
    mask = empty(x.shape, torch.bool, x.device)
    keep = 1.0 - p
    _draw(out, DROPOUT, _bits(keep), _bits(0.0 if keep == 0 else 1.0 / keep), None, src=x, aux=mask)
    return out, mask


# ----------------------------------------------------- built on the samplers --
# These compose the samplers above with chip ops (dispatched again: vendor or Triton kernels),
# as ATen's own implementations of them do.
def _standard_normal_into(out, shape, dtype, device, generator):
    target = empty(shape, dtype, device) if out is None else resize_out(out, shape)
    if target.dtype not in FLOATS:
        raise Unsupported("normal into a non-floating tensor")
    return _draw(target, NORMAL, _bits(0.0), _bits(1.0), generator)


def _normal(mean, std, generator, out):
    """mean + std * z, z standard normal of the broadcast shape (ATen: normal_(0, std) + mean)."""
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    device = tensors[0].device
    if any(t.device != device or t.dtype not in FLOATS for t in tensors):
        raise Unsupported("normal of tensors on several devices or of non-floating dtypes")
    if isinstance(std, torch.Tensor):
        if std.numel() and bool((std < 0).any()):    # ATen's check, a sync as on CUDA
            raise Unsupported("normal needs every std >= 0")
    elif not std >= 0.0:
        raise Unsupported("normal needs std >= 0")
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    dtype = torch.result_type(mean, std) if len(tensors) == 2 else tensors[0].dtype
    z = _standard_normal_into(out, shape, dtype if out is None else out.dtype, device, generator)
    return z.mul_(std).add_(mean)


def normal_Tensor_float(mean, std=1.0, *, generator=None):
    return _normal(mean, std, generator, None)


def normal_Tensor_float_out(mean, std=1.0, *, generator=None, out):
    return _normal(mean, std, generator, out)


def normal_float_Tensor(mean, std, *, generator=None):
    return _normal(mean, std, generator, None)


def normal_float_Tensor_out(mean, std, *, generator=None, out):
    return _normal(mean, std, generator, out)


def normal_Tensor_Tensor(mean, std, *, generator=None):
    return _normal(mean, std, generator, None)


def normal_Tensor_Tensor_out(mean, std, *, generator=None, out):
    return _normal(mean, std, generator, out)


def bernoulli_out(self, *, generator=None, out):
    resize_out(out, self.shape)
    return bernoulli__Tensor(out, self, generator=generator)


def _multinomial(self, num_samples, replacement, generator):
    """Rows of category indices drawn by the weights in `self` (1-d or 2-d): with replacement by
    inverting each row's cumulative weights, without by the largest weight / Exp(1) keys (ATen's
    own method). Invalid weights are declined: ATen's checks raise on the next step."""
    if self.dim() not in (1, 2) or self.dtype not in FLOATS or self.shape[-1] == 0 or num_samples <= 0:
        raise Unsupported("multinomial outside 1-d/2-d floating weights and a positive sample count")
    rows = self if self.dim() == 2 else self.unsqueeze(0)
    w = rows.to(torch.float64) if rows.dtype != torch.float64 else rows
    positive = (w > 0).sum(-1)
    bad = ((w < 0) | ~torch.isfinite(w)).any() | (positive == 0).any()
    if not replacement:
        bad = bad | (positive < num_samples).any()
    if bool(bad):
        raise Unsupported("multinomial weights ATen refuses (negative, non-finite, all zero, too few)")
    if replacement:
        cdf = torch.cumsum(w, -1)
        u = _draw(empty((w.shape[0], num_samples), torch.float64, w.device), UNIFORM, _bits(0.0), _bits(1.0),
                  generator)
        # u scaled by the row's total (not the cdf normalised): every u stays below the last
        # cumulative weight, and a category of weight zero is never chosen.
        picked = torch.searchsorted(cdf.contiguous(), (u * cdf[:, -1:]).contiguous(), right=True)
    else:
        keys = _draw(empty(w.shape, torch.float64, w.device), EXPONENTIAL, _bits(1.0), 0, generator)
        picked = torch.topk(w / keys, num_samples, dim=-1).indices
    return picked if self.dim() == 2 else picked.squeeze(0)


def multinomial(self, num_samples, replacement=False, *, generator=None):
    return _multinomial(self, num_samples, replacement, generator)


def multinomial_out(self, num_samples, replacement=False, *, generator=None, out):
    picked = _multinomial(self, num_samples, replacement, generator)
    resize_out(out, picked.shape)
    return copy_into(out, picked)


def randperm_generator_out(n, *, generator=None, out):
    """A uniform permutation of 0..n-1: the order of n random 63-bit keys."""
    limit = {torch.float16: 2049, torch.bfloat16: 257, torch.float32: 1 << 24, torch.float64: 1 << 53}
    if out.dtype in limit:
        fits = n <= limit[out.dtype]
    elif out.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        fits = n == 0 or n - 1 <= torch.iinfo(out.dtype).max
    else:
        fits = False
    if n < 0 or not fits:
        raise Unsupported("randperm of a size its out= dtype cannot hold")
    resize_out(out, (n,))
    if n == 0:
        return out
    keys = _random_range(empty((n,), torch.int64, out.device), 0, 1 << 63, generator)
    return copy_into(out, torch.sort(keys, stable=True).indices)


KERNELS = {
    "uniform_": uniform_, "normal_": normal_, "log_normal_": log_normal_, "exponential_": exponential_,
    "geometric_": geometric_, "cauchy_": cauchy_, "bernoulli_.float": bernoulli__float,
    "bernoulli_.Tensor": bernoulli__Tensor, "random_": random_, "random_.to": random__to,
    "random_.from": random__from, "native_dropout": native_dropout,
    "normal.Tensor_float": normal_Tensor_float, "normal.Tensor_float_out": normal_Tensor_float_out,
    "normal.float_Tensor": normal_float_Tensor, "normal.float_Tensor_out": normal_float_Tensor_out,
    "normal.Tensor_Tensor": normal_Tensor_Tensor, "normal.Tensor_Tensor_out": normal_Tensor_Tensor_out,
    "bernoulli.out": bernoulli_out, "multinomial": multinomial, "multinomial.out": multinomial_out,
    "randperm.generator_out": randperm_generator_out,
}


_launch.install(globals())
