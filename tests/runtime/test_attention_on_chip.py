"""torch.nn.functional.scaled_dot_product_attention on a chip, through torch's public API with
CPU fallbacks forbidden: which kernel serves it (the chip's answer to `_fused_sdp_choice`, asked
by torch's composite through the runtime), and that forward and backward match the CPU.

The npu in CI: torch's overrideable fused attention on the Triton `attention` family
(triton_ops/_attention.py, under Triton's interpreter), the math decomposition for calls outside
it. TEST_CHIP=nvgpu runs the same tests on the GPU, where the spec gives `_fused_sdp_choice` and
memory-efficient attention vendor kernels: those tests check the vendor kernel served the call,
against native CUDA too, and that its dropout draws from the chip's generator
(scripts/nvgpu_device_run.sh stage `random`)."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_fl

CHIP = os.environ.get("TEST_CHIP", "npu")
if "TEST_CHIP" in os.environ:  # a chip beside a native accelerator is registered when asked for
    torch_fl.init(chips=[CHIP])
if CHIP == "npu":
    pytestmark = pytest.mark.usefixtures("npu_backend")
MATH, EFFICIENT, OVERRIDEABLE = 0, 2, 4   # torch's sdp::SDPBackend
VENDOR = CHIP == "nvgpu"   # the chip's spec gives scaled_dot_product_attention a vendor kernel
needs_vendor = pytest.mark.skipif(not VENDOR, reason=f"{CHIP} has no vendor attention kernel (Triton's serves it)")
needs_triton = pytest.mark.skipif(VENDOR, reason=f"{CHIP}'s attention is its vendor kernel")
FUSED_OP = "_scaled_dot_product_efficient_attention" if VENDOR else "_scaled_dot_product_fused_attention_overrideable"
FUSED_STEP = "vendor" if VENDOR else "triton"


def qkv(dtype, b=2, h=4, lq=40, lk=40, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=g).to(dtype) for n in (lq, lk, lk)]


def on_chip(tensors):
    return [t.to(CHIP).requires_grad_() for t in tensors]


def test_the_chip_answers_which_kernel_serves_attention():
    """torch's composite asks the chip, never the CPU (which would answer its own flash kernel,
    which no chip has): the chip's fused kernel, the math decomposition where it does not apply."""
    q, k, v = (t.to(CHIP) for t in qkv(torch.float32))
    expected = EFFICIENT if VENDOR else OVERRIDEABLE
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
    assert stats[FUSED_OP] == {FUSED_STEP: 1}, stats
    assert stats[FUSED_OP + "_backward"] == {FUSED_STEP: 1}, stats
    assert "bmm" not in stats and "_softmax" not in stats, stats  # no math decomposition


@needs_vendor
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


@needs_vendor
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


@pytest.fixture
def vendor_choice_calls():
    """A function giving the vendor choice kernel's calls since the last (types of the query it
    was given). nvgpu: its vendor kernel, counted by the chip's path counter. Elsewhere: a stand-in
    vendor kernel registered for the chip (torch.library, removed after the test) that answers
    torch's overrideable kernel, as a vendor answering its own fused kernel would."""
    if VENDOR:
        torch_fl.reset_fallback_stats()
        yield lambda: ["Tensor"] * torch_fl.fallback_stats().get("_fused_sdp_choice", {}).get("vendor", 0)
        return
    calls = []

    def choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
        calls.append(type(query).__name__)
        return OVERRIDEABLE

    library = torch.library.Library("aten", "IMPL")
    library.impl("_fused_sdp_choice", choice, "PrivateUse1")
    try:
        yield lambda: list(calls)
    finally:
        library._destroy()


def test_the_vendors_choice_is_asked_from_the_backend_key_except_in_a_trace(vendor_choice_calls):
    """torch's composite asks the runtime which kernel serves a call; the runtime asks the
    vendor's `_fused_sdp_choice` kernel from the chip's backend key, not as a dispatched op (which
    cost 2 us of host time a call on the GPU), under autocast too (the op has no autocast
    kernel). A fake-tensor trace keeps the whole dispatch: the vendor's kernel never sees a fake
    tensor (it reads data pointers). There torch's meta kernel answers math for the vendor, and
    the runtime gives the call the chip's Triton kernel instead: the graph holds a fused kernel."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (t.to(CHIP) for t in qkv(torch.float32, lq=64, lk=64, d=32))

    def dispatched_choices(run):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
        events = [e.name for e in prof.events()]
        assert f"aten::{FUSED_OP}" in events, sorted(set(events))
        return events.count("aten::_fused_sdp_choice")

    assert dispatched_choices(lambda: F.scaled_dot_product_attention(q, k, v)) == 0
    assert vendor_choice_calls() == ["Tensor"]
    with torch.autocast(CHIP, dtype=torch.bfloat16):
        assert dispatched_choices(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)) == 0
    assert vendor_choice_calls() == ["Tensor"] * 2
    graph = make_fx(lambda a, b, c: F.scaled_dot_product_attention(a, b, c), tracing_mode="fake")(q, k, v)
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert any("_scaled_dot_product_fused_attention_overrideable" in t for t in targets), targets
    assert not any("bmm" in t or "softmax" in t for t in targets), targets
    assert vendor_choice_calls() == ["Tensor"] * 2


def _cpu_reference(q, k, v, grad, **options):
    """Output and gradients of the math decomposition in float64 on the CPU."""
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    mask = options.get("attn_mask")
    if mask is not None and mask.dtype != torch.bool:
        options["attn_mask"] = mask.detach().double().requires_grad_(mask.requires_grad)
    out = F.scaled_dot_product_attention(*ref, **options)
    out.backward(grad.double())
    return out.detach(), [t.grad for t in ref], options.get("attn_mask")


@needs_triton
def test_attention_outside_the_fused_kernel_takes_the_math_decomposition():
    """Head sizes over the Triton kernels' 256 are answered math, and give the CPU's results
    (CUDA's memory-efficient kernel, the vendor's, takes them)."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 8, 264, generator=g) for _ in range(3))
    chip = on_chip((q, k, v))
    assert torch.ops.aten._fused_sdp_choice(*chip) == MATH
    torch_fl.reset_fallback_stats()
    with torch_fl.strict_fallback():
        out = F.scaled_dot_product_attention(*chip)
        out.sum().backward()
    assert FUSED_OP not in torch_fl.fallback_stats()
    want, grads, _ = _cpu_reference(q, k, v, torch.ones(1, 2, 8, 264))
    torch.testing.assert_close(out.detach().cpu().double(), want, rtol=1e-5, atol=1e-5)
    for t, w in zip(chip, grads):
        torch.testing.assert_close(t.grad.cpu().double(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_grouped_query_attention_matches_the_cpu(causal):
    """Llama-style grouped-query heads (enable_gqa, 6 query heads on 2 key/value heads): on the
    Triton kernel, key and value shared by their group without being repeated (their gradients
    summed over the group). On a chip with a vendor kernel too: the vendor's has equal heads
    only, so its choice is math (the op `_fused_sdp_choice` is the vendor's own kernel), and the
    runtime's answer to torch's composite is the Triton kernel instead."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 6, 24, 16, generator=g)
    k, v = torch.randn(2, 2, 20, 16, generator=g), torch.randn(2, 2, 20, 8, generator=g)
    grad = torch.randn(2, 6, 24, 8, generator=g)
    chip = on_chip((q, k, v))
    assert torch.ops.aten._fused_sdp_choice(*chip, is_causal=causal, enable_gqa=True) == (MATH if VENDOR else
                                                                                        OVERRIDEABLE)
    torch_fl.reset_fallback_stats()
    with torch_fl.strict_fallback():
        out = F.scaled_dot_product_attention(*chip, is_causal=causal, enable_gqa=True)
        out.backward(grad.to(CHIP))
    stats = torch_fl.fallback_stats()
    triton_op = "_scaled_dot_product_fused_attention_overrideable"
    assert stats[triton_op] == {"triton": 1} and stats[triton_op + "_backward"] == {"triton": 1}, stats
    want, grads, _ = _cpu_reference(q, k, v, grad, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(out.detach().cpu().double(), want, rtol=1e-5, atol=1e-5)
    for t, w in zip(chip, grads):
        torch.testing.assert_close(t.grad.cpu().double(), w, rtol=1e-5, atol=1e-5)


@needs_triton
def test_torchs_backend_switches_apply_on_the_chip():
    """sdpa_kernel(MATH) takes the decomposition; a call no enabled backend can take is refused
    by name (float64 with only the fused kernel enabled), never run silently another way."""
    q, k, v = (t.to(CHIP) for t in qkv(torch.float32))
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch.ops.aten._fused_sdp_choice(q, k, v) == MATH
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]):
        assert torch.ops.aten._fused_sdp_choice(q, k, v) == OVERRIDEABLE
        q64, k64, v64 = (t.to(CHIP) for t in qkv(torch.float64))
        with pytest.raises(RuntimeError, match=f"scaled_dot_product_attention on {CHIP}:0: no backend left.*dtypes"):
            F.scaled_dot_product_attention(q64, k64, v64)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_fused_attention_on_projection_layouts_and_odd_sizes(dtype):
    """Query, key and value as a transformer makes them (heads split from [batch, length,
    heads * size] by a transpose: strided views), head sizes that are not powers of two, a value
    head size of its own, lengths that end mid-block, a fully masked row (zeros, as the math
    path's safe softmax) and a broadcast additive mask that requires grad (its gradient summed
    over the dims it broadcasts). The output is laid out as torch's meta function lays it out."""
    g = torch.Generator().manual_seed(4)
    b, h, lq, lk, e, ev = 2, 3, 37, 45, 20, 12
    x = torch.randn(b, lq, h * e, generator=g).to(dtype)
    kv = torch.randn(b, lk, h * (e + ev), generator=g).to(dtype)
    mask = torch.randn(1, h, lq, lk, generator=g).to(dtype)
    mask[0, :, 5] = float("-inf")
    grad = torch.randn(b, h, lq, ev, generator=g).to(dtype)

    def split(xc, kvc):
        q = xc.view(b, lq, h, e).transpose(1, 2)
        k, v = kvc.split([h * e, h * ev], dim=-1)
        return q, k.view(b, lk, h, e).transpose(1, 2), v.view(b, lk, h, ev).transpose(1, 2)

    xc, kvc = x.to(CHIP).requires_grad_(), kv.to(CHIP).requires_grad_()
    mc = mask.to(CHIP).requires_grad_()
    q, k, v = split(xc, kvc)
    torch_fl.reset_fallback_stats()
    with torch_fl.strict_fallback():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mc, scale=0.4)
        out.backward(grad.to(CHIP))
    assert torch_fl.fallback_stats()[FUSED_OP] == {"triton": 1}
    meta = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        *(t.detach().to("meta") for t in (q, k, v)), mc.detach().to("meta"), scale=0.4)[0]
    assert out.stride() == meta.stride()
    ref_x, ref_kv = x.double().requires_grad_(), kv.double().requires_grad_()
    ref_mask = mask.double().requires_grad_()
    want = F.scaled_dot_product_attention(*split(ref_x, ref_kv), attn_mask=ref_mask, scale=0.4)
    want.backward(grad.double())
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else dict(rtol=1e-4, atol=1e-4)
    assert torch.all(out.detach()[:, :, 5].cpu() == 0)
    torch.testing.assert_close(out.detach().cpu().double(), want.detach(), **tol)
    for got, ref in ((xc, ref_x), (kvc, ref_kv), (mc, ref_mask)):
        torch.testing.assert_close(got.grad.cpu().double(), ref.grad, **tol)


@needs_triton
def test_fused_attention_dropout_draws_the_same_mask_forward_and_backward():
    """Dropout from the chip generator's Philox counters: the mask a call drew, read from a
    call with the identity as values under the same seed, gives the math path's output and
    gradients (torch's math kernel takes an explicit dropout mask); a seed repeats its masks,
    another draws others, the CPU generator is untouched, about 1 - p of the mass is kept."""
    p = 0.25
    q, k = qkv(torch.float32, lq=32, lk=32, d=16)[:2]
    v = torch.randn(2, 4, 32, 24, generator=torch.Generator().manual_seed(5))
    eye = torch.eye(32).expand(2, 4, 32, 32).contiguous()
    grad = torch.randn(2, 4, 32, 24, generator=torch.Generator().manual_seed(6))
    cpu_state = torch.get_rng_state()
    chip_module = getattr(torch, CHIP)

    def kept_mask(seed):
        chip_module.manual_seed(seed)
        scaled = F.scaled_dot_product_attention(q.to(CHIP), k.to(CHIP), eye.to(CHIP), dropout_p=p)
        return scaled.cpu() != 0

    mask = kept_mask(11)
    assert torch.equal(mask, kept_mask(11)) and not torch.equal(mask, kept_mask(12))
    assert abs(mask.double().mean().item() - (1 - p)) < 0.03
    chip_module.manual_seed(11)
    chip = on_chip((q, k, v))
    with torch_fl.strict_fallback():
        out = F.scaled_dot_product_attention(*chip, dropout_p=p)
        out.backward(grad.to(CHIP))
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    want = torch.ops.aten._scaled_dot_product_attention_math(*ref, dropout_p=p, dropout_mask=mask)[0]
    want.backward(grad.double())
    torch.testing.assert_close(out.detach().cpu().double(), want.detach(), rtol=1e-4, atol=1e-4)
    for t, r in zip(chip, ref):
        torch.testing.assert_close(t.grad.cpu().double(), r.grad, rtol=1e-4, atol=1e-4)
    assert torch.equal(torch.get_rng_state(), cpu_state)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
def test_triton_attention_kernels_called_directly(dtype):
    """The Triton family's kernels through the ops themselves, on every chip (nvgpu too, where
    torch's choice takes the vendor kernel but the overrideable op is Triton's): forward and
    backward, causal, against float64 on the CPU; called three times, the second with the same
    values bitwise equal to the first (on nvgpu a C++ replay of the recorded program, the third
    with new values replayed too)."""
    b, h, lq, lk, e = (2, 4, 200, 150, 64) if VENDOR else (1, 2, 40, 33, 16)
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    backward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)

    def call(seed):
        g = torch.Generator().manual_seed(seed)
        q, k, v, grad = (torch.randn(shape, generator=g).to(dtype) for shape in
                         ((b, h, lq, e), (b, h, lk, e), (b, h, lk, e), (b, h, lq, e)))
        chip = [t.to(CHIP) for t in (q, k, v)]
        out, lse, _, _, max_q, max_k, seed_t, offset_t, _ = op(*chip, is_causal=True)
        grads = backward(grad.to(CHIP), *chip, None, [True, True, True, False], out, lse, None, None, max_q, max_k,
                         0.0, True, seed_t, offset_t)
        assert (max_q, max_k) == (lq, lk) and grads[3] is None
        return (q, k, v, grad), [out.cpu(), lse.cpu()] + [t.cpu() for t in grads[:3]]

    before = _fast_stats()
    (q, k, v, grad), first = call(0)
    _, again = call(0)
    inputs, newer = call(1)
    for a, c in zip(first, again):
        assert torch.equal(a, c)
    for (q, k, v, grad), got in (((q, k, v, grad), first), (inputs, newer)):
        ref = [t.double().requires_grad_() for t in (q, k, v)]
        want = F.scaled_dot_product_attention(*ref, is_causal=True)
        want.backward(grad.double())
        torch.testing.assert_close(got[0].double(), want.detach(), **tol)
        for t, r in zip(got[2:], ref):
            torch.testing.assert_close(t.double(), r.grad, **tol)
    if VENDOR:  # compiled: both ops' later calls replayed from C++
        after = _fast_stats()
        for name in ("_scaled_dot_product_fused_attention_overrideable",
                     "_scaled_dot_product_fused_attention_overrideable_backward"):
            assert after[name]["replayed"] - before.get(name, {}).get("replayed", 0) >= 2, (after.get(name),)


def _fast_stats():
    if not VENDOR:
        return {}
    import importlib
    return importlib.import_module(f"torch_fl_{CHIP}._C")._fast_triton_stats()
