"""Where one training step's host time goes, on one device: zero_grad and forward, backward,
the optimizer step, and the whole step drained; then the ops with the most self CPU time
(torch.profiler) over a few steps.

bench/models.py gives the chip-against-native ratio of a whole step; this says which part
of the step makes it. Run it once per device, each in its own process (a chip beside a native
GPU holds torch's accelerator slot):

  python bench/step_parts.py --device nvgpu --model gpt2 --compile default
  python bench/step_parts.py --device cuda --model gpt2 --compile default

The parts are host time, taken without draining the device between them, as a training loop
runs: a part that waits for the device (a blocking copy) shows as its own time.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402
import models  # noqa: E402

PARTS = ("forward", "backward", "optimizer", "step")


def measure(device: str, name: str, size: str, compile_mode: str, steps: int, warmup: int, rows: int) -> dict:
    import torch

    _common.ask_for_chip(device)
    spec = models.REGISTRY[name]
    torch.manual_seed(models.SEED)
    model, batch = spec.build(size)
    model = model.to(device)
    inputs = {key: value.to(device) for key, value in batch(torch.Generator().manual_seed(models.SEED)).items()}
    if compile_mode == "aot_eager":
        model = torch.compile(model, backend="aot_eager")
    elif compile_mode != "none":
        model = torch.compile(model, mode=compile_mode)
    optimizer = models.make_optimizer("adamw", model.parameters())

    def step() -> tuple[float, ...]:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = spec.loss(model, inputs)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        optimizer.step()
        stepped = time.perf_counter()
        _common.synchronize(device)
        return forward - start, backward - forward, stepped - backward, time.perf_counter() - start

    for _ in range(warmup):   # compiles, autotuning, the optimizer's state
        step()
    timings = [step() for _ in range(steps)]
    parts = {part: statistics.median(column) * 1e3 for part, column in zip(PARTS, zip(*timings))}

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    top = sorted(prof.key_averages(), key=lambda event: -event.self_cpu_time_total)[:rows]
    return {"device": device, "model": name, "size": size, "compile": compile_mode, "optimizer": "adamw",
            "steps": steps, "parts_ms": parts,
            "top_ops": [{"name": e.key, "self_cpu_us_per_step": e.self_cpu_time_total / 3, "calls_per_step": e.count / 3}
                        for e in top]}


def main(argv=None) -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--device", required=True, help="one device: a chip (nvgpu, npu) or a native one (cuda, cpu)")
    p.add_argument("--model", choices=list(models.REGISTRY), default="gpt2")
    p.add_argument("--size", choices=models.SIZES, default="small")
    p.add_argument("--compile", choices=("none", "default", "max-autotune-no-cudagraphs", "aot_eager"), default="none")
    p.add_argument("--steps", type=int, default=10, help="timed steps (the medians)")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--rows", type=int, default=15, help="ops listed by self CPU time")
    args = p.parse_args(argv)
    missing = models.missing_package(models.REGISTRY[args.model])
    if missing:
        raise SystemExit(f"bench/step_parts.py: {args.model} needs {missing}")
    record = measure(args.device, args.model, args.size, args.compile, args.steps, args.warmup, args.rows)
    rows = [[part, record["parts_ms"][part], "", ""] for part in PARTS]
    rows += [["", "", op["name"], op["self_cpu_us_per_step"]] for op in record["top_ops"]]
    _common.emit("step_parts", record, rows, ["part", "host ms", "op", "self CPU us/step"], args.out)


if __name__ == "__main__":
    main()
