"""all_reduce bus bandwidth over message sizes: the chip's collective library against gloo staging.

N ranks (separate processes, each on `<chip>:0` of its own simulated devices) all_reduce float32
tensors on the chip, two ways in the same run:

  library  dist.init_process_group(backend=<the spec's backend>): the runtime's c10d backend over
           the vendor's collective library (npuccl over libsimnpu_ccl for the npu)
  staging  torch_fl.distributed.StagedProcessGroup on the same store: device->host copy, gloo
           over TCP loopback, host->device copy (what every collective did before the library)

Per size and path: warm-up, then `--iters` iterations, each one started together on every rank
(a host barrier), timed from the call to the device drained after the wait; an iteration's time
is the slowest rank's, the figure the median of the iterations. Staging's three steps (to host,
gloo, back to the device) are also timed one by one, in a loop of their own. The result is checked (the sum of
every rank's values) after the first and the last iteration, so a fast wrong path cannot win.
Bus bandwidth = bytes * 2 * (n - 1) / n / time, as nccl-tests define it; with one rank (the
H200 lends one GPU) the algorithm bandwidth, bytes / time.

  python bench/collectives.py --chip npu --ranks 2 --out bench/results/cpu-host/collectives.json
"""
from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

DEFAULT_SIZES = ["4K", "64K", "1M", "16M", "64M"]
PATHS = ("library", "staging")
TARGET_RATIO, TARGET_SIZE = 5.0, 64 << 20  # library >= 5x staging at 64 MiB (issue 21)


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    n = int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    if n <= 0 or n % 4:
        raise ValueError(f"{text!r}: a message size is a positive multiple of 4 bytes (float32)")
    return n


def label(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def bus_bandwidth_GBps(nbytes: int, ranks: int, seconds: float) -> float:
    """nccl-tests' bus bandwidth; with one rank (nothing crosses a link) its algorithm bandwidth,
    bytes / time, which still compares the two paths' costs on one device."""
    if ranks == 1:
        return nbytes / seconds / 1e9
    return nbytes * 2 * (ranks - 1) / ranks / seconds / 1e9


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, chip: str, sizes: list, warmup: int, iters: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch_fl.distributed import StagedProcessGroup

    timeout = datetime.timedelta(seconds=300)
    _common.ask_for_chip(chip)  # a rank process: beside a native accelerator, chips register when asked
    device = torch.device(chip, 0)
    getattr(torch, chip).set_device(device)
    backend = dist.Backend.default_device_backend_map[chip]   # the spec's (npuccl for the npu)
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timeout)
    store = dist.PrefixStore("staged", dist.distributed_c10d._get_default_store())
    staged = StagedProcessGroup(store, rank, world, timeout, f"{backend}-staged")
    host = staged.gloo   # host barriers and the gather of timings, off both measured paths

    def barrier():
        host.barrier().wait()

    def slowest(times: list) -> list:   # per iteration, the slowest rank's time
        t = torch.tensor(times, dtype=torch.float64)
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.MAX
        host.allreduce([t], opts).wait()
        return t.tolist()

    def library(t):
        dist.all_reduce(t)

    def staging(t):
        staged.allreduce([t], dist.AllreduceOptions()).wait()

    expected = world * (world + 1) / 2   # rank r contributes r + 1
    results = {}
    for nbytes in sizes:
        t = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
        for name, op in (("library", library), ("staging", staging)):
            times = []
            for i in range(warmup + iters):
                t.fill_(rank + 1)
                _common.synchronize(chip)
                barrier()
                start = time.perf_counter()
                op(t)
                _common.synchronize(chip)
                elapsed = time.perf_counter() - start
                if i >= warmup:
                    times.append(elapsed)
                if i in (0, warmup + iters - 1):
                    got = t.cpu()
                    if not bool((got == expected).all()):
                        bad = got[got != expected]
                        raise AssertionError(f"{name} all_reduce of {label(nbytes)} on rank {rank}: "
                                             f"{bad.numel()} of {got.numel()} elements wrong "
                                             f"(e.g. {bad[0].item()}, expected {expected})")
            results.setdefault(nbytes, {})[name] = slowest(times)
        # where staging's time goes: its three steps timed one by one (the slowest rank's, per step)
        phases = {"to_host": [], "gloo": [], "to_device": []}
        for i in range(warmup + iters):
            t.fill_(rank + 1)
            _common.synchronize(chip)
            barrier()
            marks = [time.perf_counter()]
            (h,) = staged._buffers.staged([t])   # the staging path's own to-host step (its reused buffer)
            marks.append(time.perf_counter())
            host.allreduce([h], dist.AllreduceOptions()).wait()
            marks.append(time.perf_counter())
            t.copy_(h)
            _common.synchronize(chip)
            marks.append(time.perf_counter())
            if i >= warmup:
                for k, (a, b) in zip(phases, zip(marks, marks[1:])):
                    phases[k].append(b - a)
        results[nbytes]["staging_steps"] = {k: slowest(v) for k, v in phases.items()}
        del t
    barrier()
    if rank == 0:
        Path(out).write_text(json.dumps({"backend": backend, "times": {str(k): v for k, v in results.items()}}))
    dist.destroy_process_group()


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="npu")
    p.add_argument("--ranks", type=int, default=2, help="processes (1 for a one-GPU machine, 2, 4)")
    p.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES,
                   help="message sizes in bytes, suffix K/M/G allowed (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args(argv)
    if args.ranks < 1:
        p.error("--ranks: at least 1")
    try:
        sizes = [parse_size(s) for s in args.sizes]
    except (ValueError, IndexError) as e:
        p.error(f"--sizes: {e}")
    if not _common.chip_available(args.chip):
        sys.exit(f"bench/collectives.py: torch.{args.chip} is not available (no generated backend installed?)")
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")   # ranks share the host's cores
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rank0.json"
        mp.spawn(_worker, args=(args.ranks, free_port(), args.chip, sizes, args.warmup, args.iters, str(out)),
                 nprocs=args.ranks, join=True)
        raw = json.loads(out.read_text())

    results, rows = {}, []
    for nbytes in sizes:
        times = raw["times"][str(nbytes)]
        v = {"bytes": nbytes}
        for path in PATHS:
            med = _common.median(times[path])
            v[path] = {"median_s": med, "min_s": min(times[path]), "max_s": max(times[path]),
                       "busbw_GBps": bus_bandwidth_GBps(nbytes, args.ranks, med)}
        v["ratio"] = v["library"]["busbw_GBps"] / v["staging"]["busbw_GBps"]
        v["staging_steps_median_s"] = {k: _common.median(t) for k, t in times["staging_steps"].items()}
        results[label(nbytes)] = v
        rows.append([label(nbytes), v["library"]["median_s"] * 1e3, v["library"]["busbw_GBps"],
                     v["staging"]["median_s"] * 1e3, v["staging"]["busbw_GBps"], v["ratio"]])
    simccl = {k: v for k, v in os.environ.items() if k.startswith("SIMCCL_")}
    _common.emit("collectives_all_reduce",
                 {"chip": args.chip, "backend": raw["backend"], "ranks": args.ranks, "dtype": "float32",
                  "bandwidth": "bus" if args.ranks > 1 else "algorithm (one rank)", "warmup": args.warmup, "iters": args.iters, "env": simccl, "results": results,
                  "target": {"ratio": TARGET_RATIO, "size": label(TARGET_SIZE)}},
                 rows, ["size", "library ms", "library GB/s", "staging ms", "staging GB/s", "ratio"], args.out)


if __name__ == "__main__":
    main()
