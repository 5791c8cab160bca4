"""torch.nn.functional.scaled_dot_product_attention on a chip, through torch's public API with
CPU fallbacks forbidden: which kernel serves it (the chip's answer to `_fused_sdp_choice`, asked
by torch's composite through the runtime), and that forward and backward match the CPU.

The npu (no fused attention: the math decomposition on its own kernels) in CI. TEST_CHIP=nvgpu
runs the same tests on the GPU, where the spec gives `_fused_sdp_choice` and memory-efficient
attention vendor kernels: those tests check the fused kernel served the call, against native
CUDA too, and that its dropout draws from the chip's generator (scripts/nvgpu_device_run.sh
stage `random`)."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import torch_fl

CHIP = os.environ.get("TEST_CHIP", "npu")
if "TEST_CHIP" in os.environ:  # a chip beside a native accelerator is registered when asked for
    torch_fl.init(chips=[CHIP])
if CHIP == "npu":
    pytestmark = pytest.mark.usefixtures("npu_backend")
MATH, EFFICIENT = 0, 2   # torch's sdp::SDPBackend
FUSED = CHIP == "nvgpu"   # the chip's spec gives scaled_dot_product_attention a fused kernel
needs_fused = pytest.mark.skipif(not FUSED, reason=f"{CHIP} has no fused attention kernel (the math decomposition)")


def qkv(dtype, b=2, h=4, lq=40, lk=40, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=g).to(dtype) for n in (lq, lk, lk)]


def on_chip(tensors):
    return [t.to(CHIP).requires_grad_() for t in tensors]


def test_the_chip_answers_which_kernel_serves_attention():
    """torch's composite asks the chip, never the CPU: the math decomposition for a chip without
    a fused kernel (the CPU would answer its own flash kernel, which no chip has)."""
    q, k, v = (t.to(CHIP) for t in qkv(torch.float32))
    expected = EFFICIENT if FUSED else MATH
    assert torch.ops.aten._fused_sdp_choice(q, k, v) == expected
    assert torch.ops.aten._fused_sdp_choice(q, k, v, is_causal=True, dropout_p=0.1) == expected
    # float64 has no fused kernel on CUDA either
    q64, k64, v64 = (t.to(CHIP) for t in qkv(torch.float64))
    assert torch.ops.aten._fused_sdp_choice(q64, k64, v64) == MATH


CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "bool mask": {"attn_mask": "bool"},
    "additive mask": {"attn_mask": "float"},
    "scale": {"scale": 0.3},
    "cross (lq != lk)": {"lk": 24},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_attention_forward_and_backward_match_the_cpu(case, dtype):
    options = dict(CASES[case])
    lk = options.pop("lk", 40)
    q, k, v = qkv(dtype, lk=lk)
    mask = options.pop("attn_mask", None)
    if mask is not None:
        g = torch.Generator().manual_seed(1)
        mask = (torch.rand(40, lk, generator=g) > 0.3) if mask == "bool" else torch.randn(40, lk, generator=g).to(dtype)
        options["attn_mask"] = mask
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*ref, **{**options, "attn_mask": mask if mask is None or mask.dtype ==
                                                          torch.bool else mask.double()})
    grad = torch.randn(expected.shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    expected.backward(grad.double())
    torch_fl.reset_fallback_stats()
    chip = on_chip((q, k, v))
    with torch_fl.strict_fallback():
        out = F.scaled_dot_product_attention(*chip, **{**options, **({"attn_mask": mask.to(CHIP)} if mask is not None
                                                                      else {})})
        out.backward(grad.to(CHIP))
    tol = dict(rtol=3e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.cpu().double(), expected.detach(), **tol)
    for got, want in zip(chip, ref):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, **tol)
    stats = torch_fl.fallback_stats()
    if FUSED:
        assert stats["_scaled_dot_product_efficient_attention"] == {"vendor": 1}, stats
        assert stats["_scaled_dot_product_efficient_attention_backward"] == {"vendor": 1}, stats
    else:
        assert "_scaled_dot_product_efficient_attention" not in stats and "bmm" in stats, stats


@needs_fused
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_attention_matches_native_cudas_kernel(dtype):
    """The same kernel on the same memory: the chip's output equals native CUDA's memory-efficient
    attention bitwise, its gradients closely (the kernel's backward is not deterministic). CUDA's
    ops are called directly: a native backward in a process using the chip is refused."""
    q, k, v = qkv(dtype, lq=128, lk=128, d=64)
    ts = on_chip((q, k, v))
    out = F.scaled_dot_product_attention(*ts, is_causal=True)
    out.backward(torch.ones_like(out))
    cq, ck, cv = (t.to("cuda") for t in (q, k, v))
    want, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(cq, ck, cv, None, True, 0.0, True)
    grads = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
        torch.ones_like(want), cq, ck, cv, None, want, lse, seed, offset, 0.0, [True, True, True, False], True)
    assert torch.equal(out.detach().cpu(), want.cpu())
    for t, g in zip(ts, grads[:3]):
        torch.testing.assert_close(t.grad.cpu().float(), g.cpu().float(), rtol=1e-2, atol=1e-2)


@needs_fused
def test_fused_attention_dropout_draws_from_the_chip_generator():
    """Attention dropout on the chip: the same chip seed gives the same output (and gradients,
    up to the order of the backward's sums), another gives another; CUDA's own generator is left where it was; the chip's offset moves on
    (two calls draw different masks); about 1 - p of the probability mass is kept."""
    q, k, v = qkv(torch.float32, lq=64, lk=64, d=32)

    def run(seed):
        torch.nvgpu.manual_seed(seed)
        ts = on_chip((q, k, v))
        out = F.scaled_dot_product_attention(*ts, dropout_p=0.3)
        again = F.scaled_dot_product_attention(*ts, dropout_p=0.3)
        (out.sum() + again.sum()).backward()
        return [out.detach().cpu(), again.detach().cpu()] + [t.grad.cpu() for t in ts]

    cuda_state = torch.cuda.get_rng_state()
    first, second, other = run(7), run(7), run(8)
    assert torch.equal(torch.cuda.get_rng_state(), cuda_state)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    for a, b in zip(first[2:], second[2:]):   # the same masks; the kernel's backward sums in any order
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[0], first[1])
    # With v = 1 everywhere, each output is the kept probability mass scaled by 1 / (1 - p).
    ones = torch.ones(2, 4, 256, 32, device=CHIP)
    kept = F.scaled_dot_product_attention(ones, ones, ones, dropout_p=0.3).mean().item()
    assert abs(kept - 1.0) < 0.02
