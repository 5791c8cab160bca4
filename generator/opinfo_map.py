"""How the generated suite checks each vendor op against the CPU.

Per aten op, the cases that reach it: an OpInfo from torch's op_db (its sample
inputs, run on the chip and on the CPU; `grad` compares gradients too, for
backward kernels), or an expression `f(device)` run with the same seed on both
devices (for in-place and random ops). An expression draws its operands on the CPU
and moves them to the device, so it compares equal inputs on any chip, also one
whose random ops draw numbers of their own (Philox); the random ops' own cases
draw on the device: a random vendor kernel is CPU-compatible by contract, so a
seeded chip draws what a seeded CPU draws. Each case also asserts that the
vendor kernel really ran.
"""
from __future__ import annotations

_QKV = "torch.randn(2, 3, 13, 8).to(d), torch.randn(2, 3, 19, 8).to(d), torch.randn(2, 3, 19, 8).to(d)"
_SDPA = f"lambda d: torch.nn.functional.scaled_dot_product_attention({_QKV})"
_SDPA_MASKED = f"lambda d: torch.nn.functional.scaled_dot_product_attention({_QKV}, attn_mask=torch.randn(13, 19).to(d))"
_SDPA_GRAD = ("lambda d: (lambda q, k, v: torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention("
              "q, k, v, is_causal=True), (q, k, v), torch.randn(2, 3, 13, 8).to(d)))"
              f"(*(t.requires_grad_() for t in ({_QKV})))")

# aten op -> tuple of ("opinfo", name, mode) or ("expr", python lambda source)
CASES: dict[str, tuple[tuple[str, ...], ...]] = {
    "add.Tensor": (("opinfo", "add", "op"),),
    "add_.Tensor": (("expr", "lambda d: torch.randn(6, 5).to(d).add_(torch.randn(5).to(d), alpha=0.5)"),),
    "sub.Tensor": (("opinfo", "sub", "op"),),
    "sub_.Tensor": (("expr", "lambda d: torch.randn(6, 5).to(d).sub_(torch.randn(6, 1).to(d), alpha=2)"),),
    "mul.Tensor": (("opinfo", "mul", "op"),),
    "mul_.Tensor": (("expr", "lambda d: torch.randn(3, 4).to(d).mul_(torch.randn(3, 4).to(d))"),),
    "div.Tensor": (("opinfo", "div", "op"),),
    "div_.Tensor": (("expr", "lambda d: torch.randn(3, 4).to(d).div_(torch.rand(4).to(d) + 0.5)"),),
    "add.out": (("expr", "lambda d: torch.add(torch.randn(4, 3).to(d), torch.randn(3).to(d), alpha=3, out=torch.empty(2, device=d))"),),
    "sub.out": (("expr", "lambda d: torch.sub(torch.randn(4, 3).to(d), 1.5, out=torch.empty(4, 3, device=d))"),),
    "mul.out": (("expr", "lambda d: torch.mul(torch.randn(3, 4).to(d), 0.9, out=torch.empty(0, device=d))"),
                ("expr", "lambda d: torch.mul(torch.randn(5).to(d), torch.randn(5).to(d), out=torch.empty(5, dtype=torch.float64, device=d))")),
    "div.out": (("expr", "lambda d: torch.div(torch.randn(4, 3).to(d), torch.rand(3).to(d) + 1, out=torch.empty(4, 3, device=d))"),),
    "relu": (("opinfo", "nn.functional.relu", "op"),),
    "relu_": (("expr", "lambda d: torch.randn(7, 3).to(d).relu_()"),),
    "threshold_backward": (("opinfo", "nn.functional.relu", "grad"),),
    "mm": (("opinfo", "mm", "op"),),
    "addmm": (("opinfo", "addmm", "op"),),
    "bmm": (("opinfo", "bmm", "op"),),
    "baddbmm": (("opinfo", "baddbmm", "op"),),
    # The out= forms: into an empty `out` (resized) and into a transposed one of the right shape.
    "mm.out": (("expr", "lambda d: torch.mm(torch.randn(5, 3).to(d), torch.randn(3, 4).to(d), out=torch.empty(0, device=d))"),
               ("expr", "lambda d: torch.mm(torch.randn(5, 3).to(d), torch.randn(3, 4).to(d), out=torch.empty(4, 5, device=d).t())")),
    "addmm.out": (("expr", "lambda d: torch.addmm(torch.randn(4).to(d), torch.randn(5, 3).to(d), torch.randn(3, 4).to(d), beta=0.5, alpha=2, out=torch.empty(0, device=d))"),),
    "bmm.out": (("expr", "lambda d: torch.bmm(torch.randn(2, 5, 3).to(d), torch.randn(2, 3, 4).to(d), out=torch.empty(0, device=d))"),),
    "baddbmm.out": (("expr", "lambda d: torch.baddbmm(torch.randn(2, 5, 4).to(d), torch.randn(2, 5, 3).to(d), torch.randn(2, 3, 4).to(d), beta=0.5, alpha=2, out=torch.empty(0, device=d))"),),
    "addmm_": (("expr", "lambda d: torch.randn(5, 4).to(d).addmm_(torch.randn(5, 3).to(d), torch.randn(3, 4).to(d), beta=0.5, alpha=2)"),),
    "baddbmm_": (("expr", "lambda d: torch.randn(2, 5, 4).to(d).baddbmm_(torch.randn(2, 5, 3).to(d), torch.randn(2, 3, 4).to(d), beta=0.5, alpha=2)"),),
    "index_select": (("opinfo", "index_select", "op"),),
    "embedding_dense_backward": (("opinfo", "nn.functional.embedding", "grad"),),
    "_softmax": (("opinfo", "softmax", "op"),),
    "_softmax_backward_data": (("opinfo", "softmax", "grad"),),
    "convolution": (("opinfo", "nn.functional.conv2d", "op"),),
    "convolution_backward": (("opinfo", "nn.functional.conv2d", "grad"),),
    "max_pool2d_with_indices": (("opinfo", "nn.functional.max_pool2d", "op"),),
    "max_pool2d_with_indices_backward": (("opinfo", "nn.functional.max_pool2d", "grad"),),
    "_adaptive_avg_pool2d": (("opinfo", "nn.functional.adaptive_avg_pool2d", "op"),),
    "_adaptive_avg_pool2d_backward": (("opinfo", "nn.functional.adaptive_avg_pool2d", "grad"),),
    "native_batch_norm": (("opinfo", "nn.functional.batch_norm", "op"),),
    "native_batch_norm_backward": (("opinfo", "nn.functional.batch_norm", "grad"),),
    "_log_softmax": (("opinfo", "log_softmax", "op"),),
    "_log_softmax_backward_data": (("opinfo", "log_softmax", "grad"),),
    "nll_loss_forward": (("opinfo", "nn.functional.nll_loss", "op"),),
    "nll_loss_backward": (("opinfo", "nn.functional.nll_loss", "grad"),),
    "sum.dim_IntList": (("opinfo", "sum", "op"),),
    "mean.dim": (("opinfo", "mean", "op"),),
    "fill_.Scalar": (("expr", "lambda d: torch.empty(4, 6, device=d).fill_(2.5)"),
                     ("expr", "lambda d: torch.empty(3, 3, dtype=torch.int64, device=d).fill_(7)")),
    "zero_": (("expr", "lambda d: torch.randn(5, 5).to(d).zero_()"),),
    "copy_": (("expr", "lambda d: torch.randn(4, 6).to(d).t().contiguous()"),
              ("expr", "lambda d: torch.randn(4, 6).to(d).to(torch.float64)")),
    "cat": (("opinfo", "cat", "op"),),
    "normal_": (("expr", "lambda d: torch.randn(100, device=d)"),
                ("expr", "lambda d: torch.empty(3, 40, device=d).normal_(2.0, 0.5)")),
    "uniform_": (("expr", "lambda d: torch.rand(64, 3, device=d)"),),
    "random_": (("expr", "lambda d: torch.empty(50, dtype=torch.int64, device=d).random_()"),),
    "random_.from": (("expr", "lambda d: torch.randint(3, 10, (40,), device=d)"),),
    "random_.to": (("expr", "lambda d: torch.empty(30, device=d).random_(5)"),),
    "randperm.generator_out": (("expr", "lambda d: torch.randperm(30, device=d)"),),
    # Fused attention, through scaled_dot_product_attention as a model calls it: torch's composite
    # asks the chip which kernel serves the call (the vendor's `_fused_sdp_choice`), then runs it.
    # Unequal query and key lengths (13, 19), an additive mask, a causal backward.
    "_fused_sdp_choice": (("expr", _SDPA),),
    "_scaled_dot_product_efficient_attention": (("expr", _SDPA), ("expr", _SDPA_MASKED)),
    "_scaled_dot_product_efficient_attention_backward": (("expr", _SDPA_GRAD),),
}


def opinfo_names_for(op: str) -> tuple[tuple[str, ...], ...]:
    """The check cases for a vendor op; empty when the generator knows none."""
    return CASES.get(op, ())
