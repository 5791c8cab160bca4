"""The `attention` family: torch's overrideable fused attention
(`_scaled_dot_product_fused_attention_overrideable` and its backward), the kernel
`torch.nn.functional.scaled_dot_product_attention` runs on a chip with no vendor attention
(csrc/src/attention_choice.cpp answers it where the call fits).

Without it a chip runs SDPA's math decomposition: the whole [batch, heads, queries, keys]
score matrix written, masked, soft-maxed, dropped out and read again, several times a layer.
Here one launch computes a block of queries against every key block, FlashAttention-2's
online softmax in float32 registers: the scores never reach memory. The backward recomputes
them from the saved log-sum-exp: one launch for the key and value gradients (a program per
key block, no atomics), one for the query gradients, and a row-sum launch before them.
Grouped-query heads (fewer key and value heads, `enable_gqa`) share their key and value head
without repeating it; its gradient sums over the group in the key block's program.

Semantics are the math path's: `is_causal` masks keys after each query (top-left aligned, as
`ones(L, S).tril()`), an additive mask is added to the scaled scores (torch turns a boolean
one into 0/-inf before the call), a fully masked row gives zeros (as `_safe_softmax`). Dropout
keeps each probability with 1 - p from the chip generator's Philox counters, as the `random`
family draws: element (b, h, i, j) uses counter offset + ((b * H + h) * L + i) * S + j, and the
forward stores the seed and offset it used in `philox_seed` / `philox_offset` (chip tensors) for
the backward to draw the same mask. Half types multiply in their own dtype with float32
accumulation (float32 products under the interpreter, whose half arithmetic is not exact);
float32 as CUDA's own fused attention does where the target has tensor cores (three TF32
products, within about 1e-6 of full float32: `_float_dot`), else in full float32; never TF32.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported, _launch
from ._common import cdiv, copy_into, dtype_code, empty, next_power_of_2, reduce_dims
from ._kernels import _to_odt
from ._random import philox_seed_offset

LOG2E = 1.4426950408889634
# The largest head size the blocks hold (csrc/src/attention_choice.cpp asks no more of them).
MAX_HEAD_SIZE = 256
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _dot(a, b, DOT: tl.constexpr):
    """a @ b accumulated in float32: with DOT "low", half operands as they are (a float32
    `a`, a block of probabilities or their gradients, rounded to b's dtype first); else float32
    products at input precision DOT ("ieee", "tf32x3": _launch_plan)."""
    if DOT == "low":
        return tl.dot(a.to(b.dtype), b)
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=DOT)


@triton.jit
def _tile(base, rows, rows_ok, row_stride, cols, cols_ok, col_stride):
    """The [rows, cols] tile of a strided matrix at `base`, zero where a row or column is out."""
    return tl.load(base + rows[:, None] * row_stride + cols[None, :] * col_stride,
                   mask=rows_ok[:, None] & cols_ok[None, :], other=0.0)


@triton.jit
def _kept(seed, offset, rows, cols, S, keep):
    """Dropout's keep mask of scores (rows, cols) of one (batch, head): rows is bh * L + i."""
    counter = offset + rows * S + cols
    c0 = (counter & 0xFFFFFFFF).to(tl.uint32)
    c1 = ((counter >> 32) & 0xFFFFFFFF).to(tl.uint32)
    r0, r1, r2, r3 = tl.philox(seed, c0, c1, c0 * 0, c0 * 0)
    return (r0 >> 8).to(tl.float32) * (1.0 / 16777216.0) < keep


@triton.jit
def _query_block(H, L, BLOCK_M: tl.constexpr):
    """This program's block of queries of one (batch, head): the block's index, bh (batch * H +
    head), batch, head, the query indices (and as int64, for addresses) and which are in range."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    return pid_m, bh, bh // H, bh % H, offs_m, offs_m.to(tl.int64), offs_m < L


@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "offset"])
def attention_fwd_kernel(Q, K, V, BIAS, O, LSE, SEED_OUT, OFFSET_OUT, H, GROUP, L, S, E, EV,
                         sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                         sbb, sbh, sbm, sbn, sob, soh, som, sod,
                         qk_scale, keep, drop_scale, seed_lo, seed_hi, offset,
                         HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, DOT: tl.constexpr,
                         ODT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                         BLOCK_DV: tl.constexpr):
    """One block of queries of one (batch, head) against its keys: O and the log-sum-exp of
    each row (natural log; +inf for a fully masked row). qk_scale: the softmax scale times
    log2(e) (the kernel works in base 2). GROUP query heads share a key and value head (grouped
    query attention; 1: one each)."""
    pid_m, bh, b, h, offs_m, rows, m_ok = _query_block(H, L, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = _tile(Q + b * sqb + h * sqh, rows, m_ok, sqm, offs_d, offs_d < E, sqd)
    k_base = K + b * skb + (h // GROUP) * skh
    v_base = V + b * svb + (h // GROUP) * svh
    bias_base = BIAS + b * sbb + h * sbh + rows[:, None] * sbm
    seed = (seed_hi.to(tl.uint64) << 32) | seed_lo.to(tl.uint64)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum(S, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < S
        cols = offs_n.to(tl.int64)
        kt = _tile(k_base, offs_d, offs_d < E, skd, cols, n_ok, skn)
        s = _dot(q, kt, DOT) * qk_scale
        valid = m_ok[:, None] & n_ok[None, :]
        if HAS_BIAS:
            s += tl.load(bias_base + cols[None, :] * sbn, mask=valid, other=0.0).to(tl.float32) * 1.4426950408889634
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        if DROPOUT:
            p = tl.where(_kept(seed, offset, bh * L + rows[:, None], cols[None, :], S, keep), p * drop_scale, 0.0)
        v = _tile(v_base, cols, n_ok, svn, offs_dv, offs_dv < EV, svd)
        acc = acc * alpha[:, None] + _dot(p, v, DOT)
        m_i = m_new
    filled = l_i > 0.0
    o = acc / tl.where(filled, l_i, 1.0)[:, None]
    tl.store(O + b * sob + h * soh + rows[:, None] * som + offs_dv[None, :] * sod, _to_odt(o, ODT),
             mask=m_ok[:, None] & (offs_dv[None, :] < EV))
    lse = tl.where(filled, (m_i + tl.log2(tl.where(filled, l_i, 1.0))) * 0.6931471805599453, float("inf"))
    tl.store(LSE + bh * L + rows, lse, mask=m_ok)
    if (pid_m == 0) & (bh == 0):
        tl.store(SEED_OUT, seed.to(tl.int64, bitcast=True))
        tl.store(OFFSET_OUT, offset.to(tl.int64))


@triton.jit
def attention_bwd_delta_kernel(O, DO, DELTA, H, L, EV, sob, soh, som, sod, sgb, sgh, sgm, sgd,
                               BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr):
    """DELTA[bh, i] = sum_d O[i, d] * dO[i, d] (float32): the softmax backward's row term."""
    _, bh, b, h, _, rows, m_ok = _query_block(H, L, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    o = _tile(O + b * sob + h * soh, rows, m_ok, som, offs_dv, offs_dv < EV, sod)
    g = _tile(DO + b * sgb + h * sgh, rows, m_ok, sgm, offs_dv, offs_dv < EV, sgd)
    tl.store(DELTA + bh * L + rows, tl.sum(o.to(tl.float32) * g.to(tl.float32), 1), mask=m_ok)


@triton.jit
def attention_bwd_dkdv_kernel(Q, K, V, BIAS, DO, LSE, DELTA, DK, DV, SEED, OFFSET, H, GROUP, L, S, E, EV,
                              sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                              sbb, sbh, sbm, sbn, sgb, sgh, sgm, sgd,
                              sdkb, sdkh, sdkn, sdkd, sdvb, sdvh, sdvn, sdvd,
                              qk_scale, sm_scale, keep, drop_scale,
                              HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, DOT: tl.constexpr,
                              KDT: tl.constexpr, VDT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    """dK and dV of one block of keys of one (batch, key head), over every query of the GROUP
    query heads sharing it that sees them; the scores are recomputed transposed ([keys, queries])."""
    pid_n = tl.program_id(0)
    bkh = tl.program_id(1).to(tl.int64)
    b = bkh // (H // GROUP)
    kh = bkh % (H // GROUP)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    n_ok = offs_n < S
    cols = offs_n.to(tl.int64)
    k = _tile(K + b * skb + kh * skh, cols, n_ok, skn, offs_d, offs_d < E, skd)
    v = _tile(V + b * svb + kh * svh, cols, n_ok, svn, offs_dv, offs_dv < EV, svd)
    seed = tl.load(SEED).to(tl.uint64, bitcast=True)
    offset = tl.load(OFFSET)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    begin = 0
    if CAUSAL:
        begin = (pid_n * BLOCK_N) // BLOCK_M * BLOCK_M
    for member in range(0, GROUP):
        h = kh * GROUP + member
        bh = b * H + h
        for start in range(begin, L, BLOCK_M):
            offs_m = start + tl.arange(0, BLOCK_M)
            m_ok = offs_m < L
            rows = offs_m.to(tl.int64)
            q = _tile(Q + b * sqb + h * sqh, rows, m_ok, sqm, offs_d, offs_d < E, sqd)
            g = _tile(DO + b * sgb + h * sgh, rows, m_ok, sgm, offs_dv, offs_dv < EV, sgd)
            st = _dot(k, tl.trans(q), DOT) * qk_scale
            valid = n_ok[:, None] & m_ok[None, :]
            if HAS_BIAS:
                st += tl.load(BIAS + b * sbb + h * sbh + rows[None, :] * sbm + cols[:, None] * sbn, mask=valid,
                              other=0.0).to(tl.float32) * 1.4426950408889634
            if CAUSAL:
                valid = valid & (offs_n[:, None] <= offs_m[None, :])
            lse = tl.load(LSE + bh * L + rows, mask=m_ok, other=float("inf")) * 1.4426950408889634
            pt = tl.where(valid, tl.exp2(st - lse[None, :]), 0.0)
            dpt = _dot(v, tl.trans(g), DOT)
            if DROPOUT:
                kept = _kept(seed, offset, bh * L + rows[None, :], cols[:, None], S, keep)
                pdt = tl.where(kept, pt * drop_scale, 0.0)
                dpt = tl.where(kept, dpt * drop_scale, 0.0)
            else:
                pdt = pt
            dv += _dot(pdt, g, DOT)
            delta = tl.load(DELTA + bh * L + rows, mask=m_ok, other=0.0)
            dst = pt * (dpt - delta[None, :])
            dk += _dot(dst, q, DOT)
    tl.store(DK + b * sdkb + kh * sdkh + cols[:, None] * sdkn + offs_d[None, :] * sdkd, _to_odt(dk * sm_scale, KDT),
             mask=n_ok[:, None] & (offs_d[None, :] < E))
    tl.store(DV + b * sdvb + kh * sdvh + cols[:, None] * sdvn + offs_dv[None, :] * sdvd, _to_odt(dv, VDT),
             mask=n_ok[:, None] & (offs_dv[None, :] < EV))


@triton.jit
def attention_bwd_dq_kernel(Q, K, V, BIAS, DO, LSE, DELTA, DQ, DS, SEED, OFFSET, H, GROUP, L, S, E, EV,
                            sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                            sbb, sbh, sbm, sbn, sgb, sgh, sgm, sgd, sdqb, sdqh, sdqm, sdqd,
                            qk_scale, sm_scale, keep, drop_scale,
                            HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, DOT: tl.constexpr,
                            WRITE_DS: tl.constexpr, QDT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    """dQ of one block of queries of one (batch, head); with WRITE_DS also the scores'
    gradient (the additive mask's, before broadcasting) into DS, contiguous [B, H, L, S]
    float32, every element written."""
    pid_m, bh, b, h, offs_m, rows, m_ok = _query_block(H, L, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = _tile(Q + b * sqb + h * sqh, rows, m_ok, sqm, offs_d, offs_d < E, sqd)
    g = _tile(DO + b * sgb + h * sgh, rows, m_ok, sgm, offs_dv, offs_dv < EV, sgd)
    lse = tl.load(LSE + bh * L + rows, mask=m_ok, other=float("inf")) * 1.4426950408889634
    delta = tl.load(DELTA + bh * L + rows, mask=m_ok, other=0.0)
    seed = tl.load(SEED).to(tl.uint64, bitcast=True)
    offset = tl.load(OFFSET)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = S
    if CAUSAL and not WRITE_DS:
        end = tl.minimum(S, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < S
        cols = offs_n.to(tl.int64)
        k = _tile(K + b * skb + (h // GROUP) * skh, cols, n_ok, skn, offs_d, offs_d < E, skd)
        vt = _tile(V + b * svb + (h // GROUP) * svh, offs_dv, offs_dv < EV, svd, cols, n_ok, svn)
        s = _dot(q, tl.trans(k), DOT) * qk_scale
        valid = m_ok[:, None] & n_ok[None, :]
        if HAS_BIAS:
            s += tl.load(BIAS + b * sbb + h * sbh + rows[:, None] * sbm + cols[None, :] * sbn, mask=valid,
                         other=0.0).to(tl.float32) * 1.4426950408889634
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(valid, tl.exp2(s - lse[:, None]), 0.0)
        dp = _dot(g, vt, DOT)
        if DROPOUT:
            dp = tl.where(_kept(seed, offset, bh * L + rows[:, None], cols[None, :], S, keep), dp * drop_scale, 0.0)
        ds = p * (dp - delta[:, None])
        if WRITE_DS:
            tl.store(DS + (bh * L + rows[:, None]) * S + cols[None, :], ds, mask=m_ok[:, None] & n_ok[None, :])
        dq += _dot(ds, k, DOT)
    tl.store(DQ + b * sdqb + h * sdqh + rows[:, None] * sdqm + offs_d[None, :] * sdqd, _to_odt(dq * sm_scale, QDT),
             mask=m_ok[:, None] & (offs_d[None, :] < E))


# ------------------------------------------------------------------ launching --
# Each kernel's (BLOCK_M, BLOCK_N, num_warps, num_stages) by how it multiplies (DOT) and the
# largest head size it takes (query or value, padded): a GPU program's register tiles. No entry
# spills much to local memory (ptxas for sm_90: under 1 KB of stack a thread with a mask and
# dropout); a badly spilling block runs several times slower (float32 causal attention took
# 8.5 ms where full took 2.8 ms, ptxas having kept 32 registers and 8 KB of stack a thread).
# The float32 (tf32x3) entries are the fastest of bench/attention.py --tune on the H100
# (2026-12-07: docs/nvgpu.md). Tensor-core products ("low", "tf32x3") keep their operands in shared
# memory; FMA products ("ieee") hold a row and a column per product in registers, so their
# blocks are smaller, and 3xTF32 at head size 256 spills whatever the block (so "ieee" there).
# bench/attention.py times them against CUDA's kernel (--tune: the float32 candidates).
# The interpreter runs the "low" blocks as NumPy arrays, no wider than the sequences.
_BLOCKS = {
    "low": {"fwd": {64: (128, 64, 8, 3), 128: (128, 32, 8, 3), 256: (64, 32, 8, 3)},
            "dkdv": {64: (64, 64, 8, 3), 128: (64, 32, 8, 3), 256: (32, 32, 8, 3)},
            "dq": {64: (64, 64, 4, 3), 128: (64, 32, 4, 3), 256: (32, 32, 8, 3)}},
    "tf32x3": {"fwd": {64: (128, 64, 8, 2), 128: (128, 32, 8, 2)},
               "dkdv": {64: (32, 32, 4, 2), 128: (32, 32, 4, 2)},
               "dq": {64: (32, 64, 4, 2), 128: (32, 32, 4, 2)}},
    "ieee": {"fwd": {64: (64, 32, 8, 2), 128: (64, 32, 8, 2), 256: (32, 32, 8, 2)},
             "dkdv": {64: (32, 32, 8, 2), 128: (16, 32, 8, 2), 256: (16, 16, 8, 2)},
             "dq": {64: (64, 32, 8, 2), 128: (32, 32, 8, 2), 256: (32, 16, 8, 2)}},
}
_DELTA_ELEMENTS = 4096  # the row-sum launch: rows times value head size per program


@functools.lru_cache(maxsize=None)
def _float_dot() -> str:
    """float32 products: three TF32 products on tensor cores (big*big + big*small + small*big, each
    operand split in its TF32 part and the rest) where the target has them (NVIDIA sm_80 on), as
    CUDA's own memory-efficient attention computes float32 (CUTLASS's OpMultiplyAddFastF32,
    within about 1e-6 of full float32); else FMA in full float32. Never plain TF32."""
    target = triton.runtime.driver.active.get_current_target()
    return "tf32x3" if target.backend == "cuda" and int(target.arch) >= 80 else "ieee"


def _launch_plan(kernel: str, dtype, head: int, length: int, keys: int) -> tuple[str, int, int, dict]:
    """(DOT, BLOCK_M, BLOCK_N, launch options) of `kernel` for heads of up to `head` elements.
    Half types multiply as they are; float32 as _float_dot says where that way has blocks for
    the head size, else in full float32 by FMA. The interpreter multiplies in float32 (its half
    arithmetic is not exact) in the "low" blocks, no wider than the sequences (its cost is per
    program)."""
    interpreting = _launch.interpreting()
    if interpreting:
        dot, table = "ieee", _BLOCKS["low"][kernel]
    else:
        dot = "low" if dtype != torch.float32 else _float_dot()
        if head > max(_BLOCKS[dot][kernel]):
            dot = "ieee"
        table = _BLOCKS[dot][kernel]
    bm, bn, warps, stages = table[min(size for size in table if size >= head)]
    if interpreting:
        bm, bn = min(bm, max(16, next_power_of_2(length))), min(bn, max(16, next_power_of_2(keys)))
    return dot, bm, bn, {"num_warps": warps, "num_stages": stages}


def _four_d(query, key, value):
    """The operands as 4-d (a 3-d call, [heads, length, head size], is one batch), after the
    checks csrc/src/attention_choice.cpp makes before it answers this kernel. Fewer key and
    value heads than query heads (a divisor) are grouped-query attention, as
    `enable_gqa=True` asks: torch's composite passes them unrepeated."""
    if not (query.dim() == key.dim() == value.dim() and query.dim() in (3, 4)):
        raise Unsupported("fused attention of operands other than all 3-d or all 4-d")
    if query.dim() == 3:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    if query.dtype not in _DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        raise Unsupported("fused attention outside one of float32, float16, bfloat16")
    (b, h, _, e), (kb, kh, s, ke), (vb, vh, vs, ev) = query.shape, key.shape, value.shape
    if (kb, vb, vh) != (b, b, kh) or kh == 0 or h % kh or vs != s or ke != e or not (
            0 < e <= MAX_HEAD_SIZE and 0 < ev <= MAX_HEAD_SIZE):
        raise Unsupported("fused attention of unequal batches, lengths or head sizes, query heads not a multiple "
                          f"of key heads, or heads over {MAX_HEAD_SIZE}")
    return query, key, value


def _bias4(attn_bias, shape):
    """The additive mask as a 4-d view broadcast to the scores' shape (stride 0 where it
    broadcasts), or None."""
    if attn_bias is None:
        return None
    if attn_bias.dim() > 4 or not attn_bias.is_floating_point():
        raise Unsupported("an attention mask that is not a floating tensor of at most 4 dims")
    return attn_bias.view((1,) * (4 - attn_bias.dim()) + tuple(attn_bias.shape)).expand(shape)


def _matching_layout(query, shape):
    """The output, laid out as the query (torch's meta function for this op does the same):
    [batch, length, heads, head size] in memory for the usual transposed projections."""
    if tuple(query.shape) == tuple(shape):
        return torch.empty_like(query)
    order = sorted(range(query.dim()), key=lambda d: query.stride(d), reverse=True)
    strides = [0] * query.dim()
    stride = 1
    for d in reversed(order):
        strides[d] = stride
        stride *= shape[d]
    return torch.empty_strided(shape, strides, dtype=query.dtype, device=query.device)


def _scale(scale, e) -> float:
    return 1.0 / math.sqrt(e) if scale is None else float(scale)


def _dropout(dropout_p):
    """(DROPOUT, keep, drop_scale) of a dropout probability."""
    p = float(dropout_p)
    if not 0.0 <= p <= 1.0:
        raise Unsupported("an attention dropout outside [0, 1]")
    keep = 1.0 - p
    return p > 0.0, keep, (1.0 / keep if keep > 0.0 else 0.0)


def fused_attention(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                    scale=None):
    if return_debug_mask:
        raise Unsupported("fused attention's debug mask")
    q, k, v = _four_d(query, key, value)
    b, h, length, e = q.shape
    keys, ev = k.shape[2], v.shape[3]
    bias = _bias4(attn_bias, (b, h, length, keys))
    shape = list(query.shape[:-1]) + [ev]
    out = _matching_layout(query, shape)
    o = out if query.dim() == 4 else out.unsqueeze(0)
    lse = empty((b, h, length), torch.float32, q.device)
    seed_out = empty((), torch.int64, q.device)
    offset_out = empty((), torch.int64, q.device)
    dropout, keep, drop_scale = _dropout(dropout_p)
    # Counters reserved on every call (none without dropout): the C++ replay of a recorded call
    # reserves them again, from the same generator.
    seed, offset = philox_seed_offset(None, q.device, b * h * length * keys if dropout else 0)
    if b * h and length:
        dot, bm, bn, options = _launch_plan("fwd", q.dtype, max(e, ev), length, keys)
        bd, bdv = max(next_power_of_2(e), 16), max(next_power_of_2(ev), 16)
        bb = bias if bias is not None else q
        attention_fwd_kernel[(cdiv(length, bm), b * h)](
            q, k, v, bb, o, lse, seed_out, offset_out, h, h // k.shape[1], length, keys, e, ev, *q.stride(),
            *k.stride(), *v.stride(),
            *bb.stride(), *o.stride(), _scale(scale, e) * LOG2E, keep, drop_scale, seed & 0xFFFFFFFF, seed >> 32,
            offset, HAS_BIAS=bias is not None, CAUSAL=bool(is_causal), DROPOUT=dropout, DOT=dot,
            ODT=dtype_code(q.dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, **options)
    return out, lse, None, None, length, keys, seed_out, offset_out, None


def fused_attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                             cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *,
                             scale=None):
    q, k, v = _four_d(query, key, value)
    b, h, length, e = q.shape
    keys, ev = k.shape[2], v.shape[3]
    bias = _bias4(attn_bias, (b, h, length, keys))
    grads = [torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)]
    dq, dk, dv = (t if query.dim() == 4 else t.unsqueeze(0) for t in grads)
    g = grad_out if query.dim() == 4 else grad_out.unsqueeze(0)
    o = out if query.dim() == 4 else out.unsqueeze(0)
    want_bias = bias is not None and bool(grad_input_mask[3])
    ds = empty((b, h, length, keys), torch.float32, q.device) if want_bias else None
    dropout, keep, drop_scale = _dropout(dropout_p)
    bd, bdv = max(next_power_of_2(e), 16), max(next_power_of_2(ev), 16)
    sm_scale = _scale(scale, e)
    bb = bias if bias is not None else q
    flags = dict(HAS_BIAS=bias is not None, CAUSAL=bool(is_causal), DROPOUT=dropout)
    common = (h, h // k.shape[1], length, keys, e, ev, *q.stride(), *k.stride(), *v.stride(), *bb.stride(),
              *g.stride())
    if b * h and length:
        delta = empty((b, h, length), torch.float32, q.device)
        rows = _DELTA_ELEMENTS // bdv
        attention_bwd_delta_kernel[(cdiv(length, rows), b * h)](
            o, g, delta, h, length, ev, *o.stride(), *g.stride(), BLOCK_M=rows, BLOCK_DV=bdv)
    else:
        delta = logsumexp  # never read: no queries
    if b * h and keys:
        dot, bm, bn, options = _launch_plan("dkdv", q.dtype, max(e, ev), length, keys)
        attention_bwd_dkdv_kernel[(cdiv(keys, bn), b * k.shape[1])](
            q, k, v, bb, g, logsumexp, delta, dk, dv, philox_seed, philox_offset, *common, *dk.stride(), *dv.stride(),
            sm_scale * LOG2E, sm_scale, keep, drop_scale, **flags, DOT=dot, KDT=dtype_code(k.dtype),
            VDT=dtype_code(v.dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, **options)
    if b * h and length:
        dot, bm, bn, options = _launch_plan("dq", q.dtype, max(e, ev), length, keys)
        attention_bwd_dq_kernel[(cdiv(length, bm), b * h)](
            q, k, v, bb, g, logsumexp, delta, dq, ds if ds is not None else delta, philox_seed, philox_offset,
            *common, *dq.stride(), sm_scale * LOG2E, sm_scale, keep, drop_scale, **flags, DOT=dot, WRITE_DS=want_bias,
            QDT=dtype_code(q.dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, **options)
    grad_bias = _bias_grad(ds, attn_bias) if want_bias else None
    return grads[0], grads[1], grads[2], grad_bias


def _bias_grad(ds, attn_bias):
    """The additive mask's gradient: the scores' gradient summed over the dims it broadcasts."""
    full = ds.shape
    shape4 = (1,) * (4 - attn_bias.dim()) + tuple(attn_bias.shape)
    dims = [d for d in range(4) if shape4[d] == 1 and full[d] != 1]
    if dims:
        summed = reduce_dims(ds, dims, True, "sum", torch.float32, attn_bias.dtype)
    else:
        summed = copy_into(empty(full, attn_bias.dtype, ds.device), ds)
    return summed.view(attn_bias.shape)


KERNELS: dict[str, Callable] = {
    "_scaled_dot_product_fused_attention_overrideable": fused_attention,
    "_scaled_dot_product_fused_attention_overrideable_backward": fused_attention_backward,
}


_launch.install(globals())
