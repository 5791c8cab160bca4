"""ResNet-50 training step (torchvision's), a generated chip against a native device.

Both models start from the same weights; steps alternate between the two devices in
blocks within one run (a worker process per device, see `run`), so clock and thermal
drift hit both alike. Reported: the
median step time of each and their ratio (chip / native), per precision.

  python bench/resnet50.py --chip nvgpu --native cuda --batch 64 --out bench/results/resnet50.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402


def make_step(model, device: str, batch: int, precision: str, channels_last: bool):
    import torch

    images = torch.randn(batch, 3, 224, 224, device=device)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    kind = device.split(":")[0]

    def step():
        optimizer.zero_grad(set_to_none=True)
        if precision == "bf16":
            with torch.autocast(kind, dtype=torch.bfloat16):
                loss = loss_fn(model(images), labels)
        else:
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return step


def worker(args) -> None:
    """One device's side: build the model, warm up, then time blocks of steps on request."""
    import json

    import torch
    import torchvision

    _common.ask_for_chip(args.worker)
    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(args.worker)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    step = make_step(model, args.worker, args.batch, args.precision[0], args.channels_last)
    for _ in range(args.warmup):  # cuDNN autotuning, Triton compiles, allocator caches
        _common.timed(step, args.worker)
    _explain(step, args.worker, chip=args.explain)
    # How its Triton ops ran in warm-up (replayed from C++ or in Python), for the record.
    facts = {**_host_share(step, args.worker), "triton_route": _common.triton_route(args.worker)}
    print("ready " + json.dumps(facts), flush=True)
    for line in sys.stdin:
        count = int(line)
        times = [_common.timed(step, args.worker) for _ in range(count)]
        print(json.dumps(times), flush=True)


def _host_share(step, device: str, steps: int = 5) -> dict:
    """Median host time of a step (until its last op is queued) against its whole time
    (until the device is done): a step whose host time nears its whole time is host-bound."""
    import time

    host, whole = [], []
    for _ in range(steps):
        _common.synchronize(device)
        start = time.perf_counter()
        step()
        queued = time.perf_counter()
        _common.synchronize(device)
        host.append(queued - start)
        whole.append(time.perf_counter() - start)
    return {"host_ms": _common.median(host) * 1e3, "step_ms": _common.median(whole) * 1e3}


def _explain(step, device: str, chip: bool) -> None:
    """Where a step's time goes, on stderr: the ops with the most host time (torch.profiler,
    both devices, to compare), and for the chip the calls per path of one step and, on a
    CUDA GPU, its kernels by GPU time."""
    import importlib

    import torch

    if chip:
        backend = importlib.import_module(f"torch_fl_{device}")._C
        backend.reset_fallback_stats()
        _common.timed(step, device)
        paths: dict[str, int] = {}
        for op, by_path in backend.fallback_stats().items():
            for path, calls in by_path.items():
                paths[path] = paths.get(path, 0) + calls
        print(f"# {device}: calls per path in one step: {paths}", file=sys.stderr)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _common.timed(step, device)
    print(f"# {device}: host time by op (one step)", file=sys.stderr)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), file=sys.stderr)
    if chip and torch.cuda.is_available():  # the chip's kernels run on a CUDA GPU (nvgpu)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            _common.timed(step, device)
        print(f"# {device}: GPU time by kernel (one step)", file=sys.stderr)
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=15), file=sys.stderr)


def run(args) -> dict:
    """Two worker processes, one per device, alternating blocks of timed steps.

    Not one process: once a PrivateUse1 backend is registered, torch's autograd engine
    takes PrivateUse1 as *the* accelerator, and native CUDA backward fails
    (pytorch/pytorch#161129; torch_fl.coexistence refuses it with a clear error). The native
    worker runs with TORCH_FL_CHIPS=none (no chip registered, as in a process without the
    chip); the chip worker asks for its chip by name."""
    import json
    import os
    import subprocess

    results, rows = {}, []
    for precision in args.precision:
        workers = {}
        for device in (args.chip, args.native):
            env = dict(os.environ)
            if device == args.native:
                env["TORCH_FL_CHIPS"] = "none"
            cmd = [sys.executable, __file__, "--worker", device, "--precision", precision, "--batch", str(args.batch),
                   "--warmup", str(args.warmup)] + (["--channels-last"] if args.channels_last else []) \
                + (["--explain"] if device == args.chip else [])
            workers[device] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        try:
            share = {}
            for device, proc in workers.items():
                word, _, facts = proc.stdout.readline().strip().partition(" ")
                if word != "ready":
                    raise SystemExit(f"bench/resnet50.py: the {device} worker failed (its error is above)")
                share[device] = json.loads(facts)
            times = {d: [] for d in workers}
            for _ in range(args.blocks):
                for device, proc in workers.items():
                    proc.stdin.write(f"{args.steps}\n")
                    proc.stdin.flush()
                    times[device] += json.loads(proc.stdout.readline())
        finally:
            for proc in workers.values():
                proc.stdin.close()
                proc.wait()
        med = {d: _common.median(t) for d, t in times.items()}
        ratio = med[args.chip] / med[args.native]
        # The ratio of each block's medians: its spread shows how steady the machine was.
        per_block = [_common.median(times[args.chip][b * args.steps:(b + 1) * args.steps])
                     / _common.median(times[args.native][b * args.steps:(b + 1) * args.steps])
                     for b in range(args.blocks)]
        results[precision] = {"median_step_s": med, "ratio": ratio, "steps_per_device": len(times[args.chip]),
                              "target_ratio": 1.02, "block_ratios": per_block,
                              "host_ms": {d: share[d]["host_ms"] for d in share},  # queueing a step (_host_share)
                              "triton_route": share[args.chip]["triton_route"],
                              }
        rows.append([precision, med[args.chip] * 1e3, med[args.native] * 1e3, ratio, "yes" if ratio <= 1.02 else "no",
                     share[args.chip]["host_ms"], share[args.native]["host_ms"]])
    record = {"chip": args.chip, "native": args.native, "batch": args.batch, "blocks": args.blocks,
              "steps_per_block": args.steps, "channels_last": args.channels_last, "results": results}
    _common.emit("resnet50_train_step", record, rows,
                 ["precision", f"{args.chip} ms", f"{args.native} ms", "ratio", "<= 1.02",
                  f"{args.chip} host ms", f"{args.native} host ms"], args.out)
    return record


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="nvgpu")
    p.add_argument("--native", default="cuda")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--blocks", type=int, default=4, help="alternations between the two devices")
    p.add_argument("--steps", type=int, default=5, help="timed steps per block and device")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--explain", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if not _common.chip_available(args.chip):
        sys.exit(f"bench/resnet50.py: torch.{args.chip} is not available (build specs/{args.chip}.yaml first)")
    run(args)


if __name__ == "__main__":
    main()
