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

On a device that runs on a CUDA GPU (cuda, nvgpu) the profile also records the GPU: its busy
time a step (kernels, copies, fills), the kernels taking most of it, and the CUDA runtime and
driver calls taking most host time. A GPU-bound step whose host share is near 1 is told apart
from one that waits for the device: the first shows the launch calls themselves slow (the
launch queue full), the second a synchronizing call (cudaStreamSynchronize, cudaFree, a
blocking cudaMemcpy).
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

    on_gpu = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    before = _common.fast_calls(device)
    with profile(activities=activities) as prof:
        for _ in range(PROFILED_STEPS):
            step()
    after = _common.fast_calls(device)
    events = prof.key_averages()
    host_events = [e for e in events if not _on_gpu(e) and not _driver_call(e.key)]
    top = sorted(host_events, key=lambda event: -event.self_cpu_time_total)[:rows]
    record = {"device": device, "model": name, "size": size, "compile": compile_mode, "optimizer": "adamw",
              "steps": steps, "parts_ms": parts,
              "top_ops": [_per_step(e.key, e.count, e.self_cpu_time_total, "self_cpu_us_per_step") for e in top]}
    # Triton-routed calls the chip sent to Python (a key its C++ launch had not recorded):
    # each costs tens of microseconds, where a replay costs a few.
    record["triton_to_python_per_step"] = {
        op: (to_python - before.get(op, (0, 0))[1]) / PROFILED_STEPS
        for op, (_, to_python) in sorted(after.items()) if to_python > before.get(op, (0, 0))[1]}
    if on_gpu:
        record["gpu"] = gpu_view(events, rows)
    return record


PROFILED_STEPS = 3


def _on_gpu(event) -> bool:
    import torch

    return getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA


def _driver_call(name: str) -> bool:
    """A CUDA runtime (cudaLaunchKernel) or driver (cuLaunchKernel) API call, as the profiler
    names them."""
    return (name.startswith("cuda") and name[4:5].isupper()) or (name.startswith("cu") and name[2:3].isupper())


def _per_step(name: str, count: int, total_us: float, key: str) -> dict:
    return {"name": name, key: total_us / PROFILED_STEPS, "calls_per_step": count / PROFILED_STEPS}


def gpu_view(events, rows: int) -> dict:
    """The GPU's side of the profiled steps: busy time a step, the kernels (and copies) taking
    most of it, and the runtime and driver calls taking most host time."""
    work = [e for e in events if _on_gpu(e)]
    calls = [e for e in events if not _on_gpu(e) and _driver_call(e.key)]
    busy = sum(e.self_device_time_total for e in work)
    return {
        "busy_ms_per_step": busy / PROFILED_STEPS / 1e3,
        "launches_per_step": sum(e.count for e in work) / PROFILED_STEPS,
        "top_kernels": [_per_step(e.key, e.count, e.self_device_time_total, "gpu_us_per_step")
                        for e in sorted(work, key=lambda e: -e.self_device_time_total)[:rows]],
        "top_driver_calls": [_per_step(e.key, e.count, e.self_cpu_time_total, "host_us_per_step")
                             for e in sorted(calls, key=lambda e: -e.self_cpu_time_total)[:rows]],
    }


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
    if "gpu" in record:
        gpu = record["gpu"]
        rows += [["GPU busy", gpu["busy_ms_per_step"], f"{gpu['launches_per_step']:.0f} kernels and copies", ""]]
        rows += [["", "", f"GPU: {k['name'][:80]}", k["gpu_us_per_step"]] for k in gpu["top_kernels"]]
        rows += [["", "", f"host: {c['name']} x{c['calls_per_step']:.0f}", c["host_us_per_step"]]
                 for c in gpu["top_driver_calls"]]
    _common.emit("step_parts", record, rows, ["part", "host ms", "op", "us/step"], args.out)


if __name__ == "__main__":
    main()
