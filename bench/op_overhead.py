"""Per-op host overhead: a loop of small ops on a generated chip against a native device.

Each op runs on tiny tensors (the device has almost nothing to do), many times in a
row, the device drained once at the end: time per call is the cost of dispatch,
the backend's wrapper, its path (vendor kernel, Triton launch, copy) and the launch.

  python bench/op_overhead.py --pair nvgpu:cuda --pair npu:cpu --out bench/results/op_overhead.json
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

# name -> (setup(device) -> state, op(state))
def _ops():
    import torch

    def tensors(device):
        return (torch.rand(16, 16, device=device), torch.rand(16, 16, device=device))

    return {
        "add (a + b)": (tensors, lambda s: s[0] + s[1]),
        "mul by scalar (a * 2)": (tensors, lambda s: s[0] * 2.0),
        "add_ with alpha (SGD step)": (tensors, lambda s: s[0].add_(s[1], alpha=-1e-3)),
        "relu": (tensors, lambda s: torch.relu(s[0])),
        "sum": (tensors, lambda s: s[0].sum()),
        "mm 16x16": (tensors, lambda s: torch.mm(s[0], s[1])),
        "copy_ (same device)": (tensors, lambda s: s[1].copy_(s[0])),
        "empty (allocator)": (lambda d: d, lambda d: torch.empty(256, device=d)),
        # a row per family the Triton route launches from C++ (programs), and the random family
        "sum over the last dim": (tensors, lambda s: s[0].sum(-1)),
        "softmax": (tensors, lambda s: torch.softmax(s[0], -1)),
        "layer_norm": (_layer_norm_state, lambda s: torch.nn.functional.layer_norm(s[0], (16,), s[1], s[2])),
        "native_layer_norm_backward": (_layer_norm_state, lambda s: torch.ops.aten.native_layer_norm_backward(
            s[0], s[0], [16], s[3], s[4], s[1], s[2], [True, True, True])),
        "cat of two": (tensors, lambda s: torch.cat([s[0], s[1]])),
        "index_select (embedding)": (_index_state, lambda s: torch.index_select(s[0], 0, s[1])),
        "embedding_dense_backward": (_index_state, lambda s: torch.ops.aten.embedding_dense_backward(
            s[2], s[1], 16, -1, False)),
        "masked_fill": (_mask_state, lambda s: s[0].masked_fill(s[1], -1.0)),
        "zero_": (tensors, lambda s: s[1].zero_()),
        "arange": (lambda d: d, lambda d: torch.arange(256, device=d)),
        "dropout (random)": (tensors, lambda s: torch.nn.functional.dropout(s[0], 0.1, training=True)),
        "to bfloat16 (autocast's _to_copy)": (tensors, lambda s: s[0].to(torch.bfloat16)),
        # attention: the chip's fused kernel where its spec has one, else the math decomposition
        "scaled_dot_product_attention (causal)": (
            lambda d: [torch.rand(1, 2, 16, 16, device=d) for _ in range(3)],
            lambda s: torch.nn.functional.scaled_dot_product_attention(*s, is_causal=True)),
        # one foreach call over 64 parameters, as SGD makes it (per call, not per tensor)
        "_foreach_add_ of 64 tensors": (lambda d: ([torch.rand(16, 16, device=d) for _ in range(64)],
                                                   [torch.rand(16, 16, device=d) for _ in range(64)]),
                                        lambda s: torch._foreach_add_(s[0], s[1], alpha=-1e-3)),
        # one fused AdamW step over 64 parameters (AdamW(fused=True): the whole update in one call)
        "_fused_adamw_ of 64 tensors": (_fused_adamw_state, lambda s: torch._fused_adamw_(
            *s, lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)),
    }


def _fused_adamw_state(device):
    import torch

    lists = [[torch.rand(16, 16, device=device) for _ in range(64)] for _ in range(4)]
    return (*lists, [], [torch.tensor(1.0, device=device) for _ in range(64)])


def _layer_norm_state(device):
    import torch

    x, w, b = torch.rand(16, 16, device=device), torch.rand(16, device=device), torch.rand(16, device=device)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [16], w, b, 1e-5)
    return x, w, b, mean, rstd


def _index_state(device):
    import torch

    table = torch.rand(64, 16, device=device)
    indices = torch.randint(0, 16, (16,), device="cpu").to(device)
    return table, indices, torch.rand(16, 16, device=device)


def _mask_state(device):
    import torch

    x = torch.rand(16, 16, device=device)
    return x, (torch.rand(16, 16) > 0.5).to(device)


def per_call_us(op, state, device: str, calls: int, repeats: int) -> float:
    for _ in range(min(calls, 50)):  # warm-up: compiles, caches
        op(state)
    _common.synchronize(device)
    best = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            op(state)
        _common.synchronize(device)
        best.append((time.perf_counter() - start) / calls * 1e6)
    return _common.median(best)


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--pair", action="append", default=None,
                   help="CHIP:NATIVE, e.g. nvgpu:cuda or npu:cpu (repeatable)")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    import torch

    pairs = [tuple(x.split(":")) for x in (args.pair or ["nvgpu:cuda", "npu:cpu"])]
    results, rows = {}, []
    for chip, native in pairs:
        if not _common.chip_available(chip):
            print(f"# skipping {chip}:{native}: torch.{chip} is not available", file=sys.stderr)
            continue
        if native == "cuda" and not torch.cuda.is_available():
            print(f"# skipping {chip}:{native}: no CUDA device", file=sys.stderr)
            continue
        pair = results.setdefault(f"{chip}:{native}", {})
        for name, (setup, op) in _ops().items():
            times = {}
            before = _common.fast_calls(chip)
            for device in (chip, native):  # interleaved per op
                times[device] = per_call_us(op, setup(device), device, args.calls, args.repeats)
            ratio = times[chip] / times[native]
            pair[name] = {"chip_us": times[chip], "native_us": times[native], "ratio": ratio}
            # which chip ops the row's calls reached, and how many were launched from C++
            after = _common.fast_calls(chip)
            reached = {o: (r - before.get(o, (0, 0))[0], p - before.get(o, (0, 0))[1]) for o, (r, p) in after.items()}
            pair[name]["triton_calls"] = {o: {"replayed": r, "to_python": p} for o, (r, p) in reached.items() if r or p}
            rows.append([f"{chip} vs {native}", name, times[chip], times[native], ratio])
    if not results:
        sys.exit("bench/op_overhead.py: no pair could run (no generated backend installed?)")
    routes = {chip: _common.triton_route(chip) for chip, _ in pairs if f"{chip}:{_}" in results}
    _common.emit("op_overhead", {"calls": args.calls, "repeats": args.repeats, "results": results,
                                 "target_ratio": 1.1, "triton_route": routes}, rows,
                 ["pair", "op", "chip us/call", "native us/call", "ratio"], args.out)


if __name__ == "__main__":
    main()
