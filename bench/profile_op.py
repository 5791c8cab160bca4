"""Where the host time of one small op goes: cProfile over a loop of calls on a chip.

The ops are op_overhead.py's. For each, the loop runs once to warm up, then under
cProfile; the report lists the functions with the most own time per call, so a
regression in the Python path (the Triton route, its wrappers, Triton's launcher)
shows by name. Then the same loop under torch.profiler, on the chip and on `--native`:
the aten ops each call reaches, with their own (self) CPU time per call. A vendor kernel
shows as the chip's op (its wrapper's own time) around the native op it calls, so the
wrapper's cost is read off against the native device's row. A diagnostic, not a figure of
docs/benchmarks.md.

  python bench/profile_op.py --chip nvgpu --native cuda --calls 2000 --out bench/results/h200/profile-nvgpu.txt
"""
from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import op_overhead  # noqa: E402


def warm_up(op, state, device: str, calls: int) -> None:
    for _ in range(min(calls, 50)):
        op(state)
    _common.synchronize(device)


def profile(op, state, device: str, calls: int, top: int) -> tuple[float, str]:
    warm_up(op, state, device, calls)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        op(state)
    _common.synchronize(device)
    profiler.disable()
    us = (time.perf_counter() - start) / calls * 1e6
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return us, text.getvalue()


def aten_profile(op, state, device: str, calls: int, top: int) -> str:
    """torch.profiler's CPU view of `calls` calls: per aten op (or event), self and total
    microseconds per call and events per call, most self time first."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    warm_up(op, state, device, calls)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            op(state)
        _common.synchronize(device)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    lines = [f"{'event':56s} {'self us/call':>12s} {'total us/call':>13s} {'per call':>8s}"]
    lines += [f"{e.key[:56]:56s} {e.self_cpu_time_total / calls:12.2f} {e.cpu_time_total / calls:13.2f} "
              f"{e.count / calls:8.2f}" for e in events]
    return "\n".join(lines)


def launch_costs(calls: int) -> str:
    """Host time of one Triton launch of the dense pointwise kernel on a GPU: through
    Triton's JIT (argument binding on every call) and through torch_fl's launch cache."""
    import torch
    from torch_fl.triton_ops import _kernels as K
    from torch_fl.triton_ops import _launch

    kernel = K.pointwise_dense_kernel
    if not isinstance(kernel, _launch.FastKernel):
        return "launch costs: not measured (kernels are not compiled here)"
    a = torch.rand(256, device="cuda")
    out = torch.empty_like(a)
    args = (out, a, out, out, out, 256, 0, 0, 0, 0, 0, 0, 0)
    consts = dict(OP=K.OP_ID["relu"], NIN=1, CDT=0, ODT=0, KA=0, KB=0, KC=0, KD=0, BLOCK=1024)
    lines = []
    for label, launch in (("Triton JIT", kernel.fn[(1,)]), ("torch_fl launch cache", kernel[(1,)])):
        for _ in range(100):
            launch(*args, **consts)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            launch(*args, **consts)
        torch.cuda.synchronize()
        lines.append(f"launch of pointwise_dense_kernel via {label}: "
                     f"{(time.perf_counter() - start) / calls * 1e6:.1f} us")
    return "\n".join(lines)


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="nvgpu")
    p.add_argument("--native", help="a native device to profile the same ops on (torch.profiler), e.g. cuda")
    p.add_argument("--op", action="append", help="op name as in op_overhead.py (repeatable; default all)")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    if not _common.chip_available(args.chip):
        sys.exit(f"bench/profile_op.py: torch.{args.chip} is not available")
    ops = op_overhead._ops()
    unknown = [name for name in args.op or () if name not in ops]
    if unknown:
        sys.exit(f"bench/profile_op.py: unknown op(s) {unknown}; known: {sorted(ops)}")
    report = []
    if args.chip == "nvgpu":
        costs = launch_costs(args.calls)
        print(costs)
        report.append(f"=== {costs} ===\n")
    for name in args.op or ops:
        setup, op = ops[name]
        us, text = profile(op, setup(args.chip), args.chip, args.calls, args.top)
        report.append(f"=== {name} on {args.chip}: {us:.1f} us/call under cProfile ===\n{text}")
        print(f"{name:28s} {us:8.1f} us/call (profiled)")
        for device in (args.chip, *([args.native] if args.native else [])):
            table = aten_profile(op, setup(device), device, min(args.calls, 500), args.top)
            report.append(f"=== {name} on {device}: torch.profiler, aten ops a call ===\n{table}\n")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(report))
    else:
        print("\n".join(report))


if __name__ == "__main__":
    main()
