"""Triton kernels of the GradScaler ops (see torch_fl.amp); imported only when they run."""
import triton
import triton.language as tl

from .triton_ops import _kernels as K


@triton.jit
def unscale_kernel(g_ptr, n, inv_scale_ptr, found_inf_ptr, ODT: tl.constexpr, CDT: tl.constexpr,
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = K._to_cdt(tl.load(g_ptr + offs, mask=mask, other=0), CDT)
    inv_scale = K._to_cdt(tl.load(inv_scale_ptr + tl.arange(0, 1)), CDT)
    bad = (g != g) | (tl.abs(g) == float("inf"))
    # CUDA unscales every element, finite or not; found_inf only ever becomes 1.
    tl.store(g_ptr + offs, K._to_odt(g * inv_scale, ODT), mask=mask)
    nbad = tl.sum(tl.where(mask & bad, 1, 0), axis=0)
    one = tl.arange(0, 1)
    tl.store(found_inf_ptr + one, tl.full([1], 1.0, tl.float32), mask=(one * 0 + nbad) > 0)


@triton.jit
def update_scale_kernel(scale_ptr, tracker_ptr, found_inf_ptr, factors_ptr, growth_interval):
    one = tl.arange(0, 1)
    scale = tl.load(scale_ptr + one)
    tracker = tl.load(tracker_ptr + one)
    found_inf = tl.load(found_inf_ptr + one)
    growth = tl.load(factors_ptr + one)
    backoff = tl.load(factors_ptr + 1 + one)
    successful = tracker + 1
    grow = successful == growth_interval
    # float scale times double factor, rounded to float: CUDA's arithmetic
    grown = (scale.to(tl.float64) * growth).to(tl.float32)
    grown_finite = (grown == grown) & (tl.abs(grown) != float("inf"))
    backed_off = (scale.to(tl.float64) * backoff).to(tl.float32)
    inf = found_inf != 0
    new_scale = tl.where(inf, backed_off, tl.where(grow & grown_finite, grown, scale))
    new_tracker = tl.where(inf | grow, 0, successful)
    tl.store(scale_ptr + one, new_scale)
    tl.store(tracker_ptr + one, new_tracker.to(tl.int32))
