"""Shared helpers of the benchmarks: timing, the environment record, JSON + table output."""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=Path, help="also write the JSON record to this file")
    return p


def environment() -> dict:
    import torch

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": __import__("os").cpu_count(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    return env


NATIVE_TYPES = ("cpu", "cuda", "meta", "mps", "xpu")


def ask_for_chip(device: str) -> None:
    """Registers the generated chip a device string names ("nvgpu", "npu:1"); a native device
    type is left alone. Beside a native accelerator `import torch` leaves chips unregistered
    until asked (torch_fl.coexistence)."""
    kind = device.split(":", 1)[0]
    if kind not in NATIVE_TYPES:
        import torch_fl

        torch_fl.init(chips=[kind])


def chip_available(name: str) -> bool:
    """Whether `torch.<name>` exists and has a device (a generated backend is installed). Naming a
    chip asks for it: beside a native accelerator `import torch` leaves chips unregistered until
    asked (torch_fl.coexistence)."""
    import torch

    if not hasattr(torch, name):
        try:
            ask_for_chip(name)
        except Exception:  # noqa: BLE001 - not installed: reported below as absent
            print(f"# torch_fl has no chip {name}: {sys.exc_info()[1]}", file=sys.stderr)
    module = getattr(torch, name, None)
    try:
        return bool(module is not None and module.is_available())
    except Exception:  # noqa: BLE001 - a broken backend counts as absent, with its reason printed
        print(f"# torch.{name} is not usable: {sys.exc_info()[1]}", file=sys.stderr)
        return False


def triton_route(chip: str) -> dict:
    """How the chip's Triton ops ran so far in this process: the backend's status line and
    the pointwise calls replayed from C++ against those sent to the Python kernel
    (torch_fl._triton_fast; TORCH_FL_TRITON_CPP_LAUNCH=0 turns the replay off)."""
    import importlib

    try:
        backend = importlib.import_module(f"torch_fl_{chip}")
    except ImportError:
        return {}
    stats = backend._C._fast_triton_stats() if hasattr(backend._C, "_fast_triton_stats") else {}
    route = {"status": getattr(backend, "triton_status", None),
             "replayed_in_cpp": sum(s["replayed"] for s in stats.values()),
             "to_python": sum(s["to_python"] for s in stats.values())}
    if hasattr(backend._C, "_fast_program_voids"):
        # per op, why some keys' programs are never replayed (their calls take Python)
        route["program_voids"] = backend._C._fast_program_voids()
    return route


def fast_calls(chip: str) -> dict[str, tuple[int, int]]:
    """Per op, (calls replayed from C++, calls sent to the Python kernel) so far in this process."""
    import importlib

    try:
        backend = importlib.import_module(f"torch_fl_{chip}")
    except ImportError:
        return {}
    if not hasattr(backend._C, "_fast_triton_stats"):
        return {}
    return {op: (s["replayed"], s["to_python"]) for op, s in backend._C._fast_triton_stats().items()}


def synchronize(device: str) -> None:
    import torch

    kind = device.split(":")[0]
    if kind != "cpu":
        getattr(torch, kind).synchronize()


def timed(fn: Callable[[], object], device: str) -> float:
    """Seconds of one call of `fn`, the device drained before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def emit(name: str, record: dict, rows: Iterable[Sequence[object]], header: Sequence[str],
         out: Path | None) -> None:
    """One JSON line (the record), then a human table of `rows`."""
    record = {"benchmark": name, "environment": environment(), **record}
    line = json.dumps(record, sort_keys=True)
    print(line)
    rows = [[_cell(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
