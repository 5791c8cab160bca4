"""Fused attention on a chip: the Triton `attention` family (what torch's overrideable fused
attention runs on a chip without a vendor attention kernel) against the native device's
memory-efficient attention, forward and forward + backward, on the shapes of real models.

The Triton kernels are called as the backend calls them (`triton_ops.kernel_for`), on the chip's
tensors (their Philox counters come from its generator); the native kernel on the same values
in native tensors. Each figure follows a check that both give the same answer. Times are per
call, host launch included, the device drained before and after a run of calls.

  python bench/attention.py --chip nvgpu --native cuda --out bench/results/h100/attention-nvgpu.json

--tune times candidate blocks of the float32 kernels (triton_ops/_attention.py, _BLOCKS)
and prints the fastest per kernel and head size: how that table was chosen.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

# name -> (batch, heads, sequence length, head size)
SHAPES = {
    "gpt2": ("GPT-2/BERT-base 8x12x512x64", (8, 12, 512, 64)),
    "llama": ("Llama-style 4x32x1024x128", (4, 32, 1024, 128)),
    "long": ("long 2x8x4096x64", (2, 8, 4096, 64)),
}
# Candidate float32 blocks by how float32 multiplies (_attention._float_dot), kernel and head
# size: mostly ones ptxas (sm_90) compiles without spilling more than a few hundred bytes, and
# a few larger ones (3xTF32 at head size 128 spills a little in every block tried).
FLOAT_CANDIDATES = {
    # Narrowed by the H100 run of 2026-12-07 (docs/nvgpu.md): the losers at head 64 dropped,
    # (64, 64, 8, 2) at head 128 needs more shared memory than the H100 has.
    "tf32x3": {
        "fwd": {64: [(128, 64, 8, 2), (128, 32, 8, 2)],
                128: [(128, 32, 8, 2), (128, 64, 8, 2)]},
        "dkdv": {64: [(32, 32, 4, 2), (64, 32, 8, 2)],
                 128: [(64, 32, 8, 2), (32, 32, 4, 2), (64, 32, 4, 2)]},
        "dq": {64: [(32, 64, 4, 2), (64, 32, 4, 2)],
               128: [(64, 32, 8, 2), (32, 32, 4, 2), (64, 32, 4, 2), (64, 64, 8, 2)]},
    },
    "ieee": {
        "fwd": {64: [(64, 32, 8, 2), (128, 16, 8, 2), (32, 32, 4, 2), (32, 64, 8, 2)],
                128: [(64, 32, 8, 2), (32, 32, 8, 2), (64, 16, 8, 2)]},
        "dkdv": {64: [(32, 32, 8, 2), (16, 64, 8, 2), (32, 16, 8, 2)],
                 128: [(16, 32, 8, 2), (32, 32, 8, 2), (32, 16, 8, 2)]},
        "dq": {64: [(64, 32, 8, 2), (32, 32, 8, 2), (128, 16, 8, 2)],
               128: [(32, 32, 8, 2), (64, 16, 8, 2), (16, 32, 8, 2)]},
    },
}


def per_call(fn, device: str, budget_s: float = 0.2) -> float:
    """Median seconds per call of `fn` over three runs of calls, each about `budget_s` long."""
    fn()
    once = max(_common.timed(fn, device), 1e-6)
    calls = max(3, min(200, int(budget_s / once)))
    runs = []
    for _ in range(3):
        _common.synchronize(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _common.synchronize(device)
        runs.append((time.perf_counter() - start) / calls)
    return _common.median(runs)


class Case:
    """One shape, dtype and mask: the Triton calls on the chip, the native calls, and a check."""

    def __init__(self, shape, dtype, causal: bool, chip: str, native: str):
        import torch

        from torch_fl import triton_ops

        self.fwd = triton_ops.kernel_for("_scaled_dot_product_fused_attention_overrideable")
        self.bwd = triton_ops.kernel_for("_scaled_dot_product_fused_attention_overrideable_backward")
        self.causal, self.chip, self.native = causal, chip, native
        g = torch.Generator().manual_seed(0)
        host = [torch.randn(shape, generator=g).to(dtype) for _ in range(4)]
        self.q, self.k, self.v, self.grad = (t.to(chip) for t in host)
        self.nq, self.nk, self.nv, self.ngrad = (t.to(native) for t in host)

    def triton_forward(self):
        return self.fwd(self.q, self.k, self.v, None, 0.0, self.causal, False)

    def triton_both(self):
        out, lse, _, _, mq, mk, seed, offset, _ = self.triton_forward()
        return self.bwd(self.grad, self.q, self.k, self.v, None, [True, True, True, False], out, lse, None, None,
                        mq, mk, 0.0, self.causal, seed, offset)

    def native_forward(self):
        import torch

        return torch.ops.aten._scaled_dot_product_efficient_attention(self.nq, self.nk, self.nv, None, True, 0.0,
                                                                      self.causal)

    def native_both(self):
        import torch

        out, lse, seed, offset = self.native_forward()
        return torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            self.ngrad, self.nq, self.nk, self.nv, None, out, lse, seed, offset, 0.0, [True, True, True, False],
            self.causal)

    def check(self) -> None:
        """The Triton kernels against the native one: output and the three gradients."""
        import torch

        low = self.q.dtype != torch.float32
        tol = dict(rtol=2e-2, atol=2e-2) if low else dict(rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(self.triton_forward()[0].cpu(), self.native_forward()[0].cpu(), **tol)
        for got, want in zip(self.triton_both()[:3], self.native_both()[:3]):
            torch.testing.assert_close(got.cpu(), want.cpu(), **tol)

    def times(self) -> dict:
        return {"triton_fwd_ms": per_call(self.triton_forward, self.chip) * 1e3,
                "triton_fwd_bwd_ms": per_call(self.triton_both, self.chip) * 1e3,
                "native_fwd_ms": per_call(self.native_forward, self.native) * 1e3,
                "native_fwd_bwd_ms": per_call(self.native_both, self.native) * 1e3}


def tune(chip: str, native: str) -> dict:
    """Per float32 kernel and head size, each candidate's time (causal and full summed), the
    fastest kept in the table for the kernels tuned after it."""
    import torch

    from triton.runtime.errors import OutOfResources

    from torch_fl.triton_ops import _attention

    mode = _attention._float_dot()
    best = {"float32 products": mode}
    for head in (64, 128):
        shape = (8, 12, 512, head) if head == 64 else (4, 16, 1024, head)
        cases = [Case(shape, torch.float32, causal, chip, native) for causal in (False, True)]
        for kernel, candidates in FLOAT_CANDIDATES[mode].items():
            timings = {}
            for blocks in candidates[head]:
                _attention._BLOCKS[mode][kernel][head] = blocks
                run = "triton_forward" if kernel == "fwd" else "triton_both"
                try:
                    timings[blocks] = sum(per_call(getattr(c, run), chip, 0.1) for c in cases) * 1e3
                except OutOfResources as e:   # more shared memory or registers than the chip has
                    print(f"# {kernel} head {head} {blocks}: {e}", file=sys.stderr)
                    continue
                print(f"# {kernel} head {head} {blocks}: {timings[blocks]:.3f} ms", file=sys.stderr)
            fastest = min(timings, key=timings.get)
            _attention._BLOCKS[mode][kernel][head] = fastest
            best[f"{kernel} head {head}"] = {"fastest": str(fastest), "ms": {str(b): t for b, t in timings.items()}}
    for c in cases:
        c.check()   # the tuned table still gives the right answer
    return best


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="nvgpu")
    p.add_argument("--native", default="cuda")
    p.add_argument("--tune", action="store_true", help="time the float32 kernels' candidate blocks first")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    args = p.parse_args(argv)
    import torch

    if not _common.chip_available(args.chip):
        sys.exit(f"bench/attention.py: chip {args.chip} is not available")
    from torch_fl.triton_ops import _attention

    record = {"chip": args.chip, "native": args.native, "shapes": args.shapes,
              "float32_products": _attention._float_dot(), "results": {}}
    if args.tune:
        record["tuning"] = tune(args.chip, args.native)
    rows = []
    for name, shape in (SHAPES[key] for key in args.shapes):
        for dtype in (torch.float32, torch.bfloat16):
            for causal in (False, True):
                case = Case(shape, dtype, causal, args.chip, args.native)
                case.check()
                t = case.times()
                key = f"{name} {str(dtype).removeprefix('torch.')}{' causal' if causal else ''}"
                record["results"][key] = t
                rows.append([key, t["triton_fwd_ms"], t["native_fwd_ms"], t["triton_fwd_bwd_ms"],
                             t["native_fwd_bwd_ms"], t["triton_fwd_bwd_ms"] / t["native_fwd_bwd_ms"]])
                del case
    _common.emit("attention", record, rows,
                 ["case", "triton fwd ms", "native fwd ms", "triton fwd+bwd ms", "native fwd+bwd ms", "ratio"],
                 args.out)


if __name__ == "__main__":
    main()
