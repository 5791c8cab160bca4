"""Utilization and memory per device, and picking the least loaded one.

    for s in torch_fl.monitor.DeviceMonitor().sample(): print(s.device, s.utilization, s.memory_used)
    device = torch_fl.monitor.DynamicDeviceSelector().select()     # e.g. device("npu", 1)

Sources: a generated chip reports through its backend (`torch.<chip>.mem_get_info`, the
driver's free/total, and `memory_stats`, this process's allocator); its driver has no
utilization counter, so `utilization` is None there. A native chip (CUDA, ROCm) is read from
the vendor tool its spec names (`native.monitor`: the command, run without a shell, and the
parser for its output: `nvidia-smi --query-gpu=... --format=csv`, `rocm-smi ... --json`; both
GPUs are `cuda:N` to torch). The parsers take the tools' text, so they are tested on recorded
outputs (tests/data/monitor/).
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

import torch

__all__ = ["DeviceMonitor", "DeviceStats", "DynamicDeviceSelector", "parse_nvidia_smi", "parse_rocm_smi"]

MiB = 1 << 20


@dataclass(frozen=True)
class DeviceStats:
    device: str                     # as torch names it: "npu:0", "cuda:1"
    name: str | None
    utilization: float | None       # percent of time busy, None when the source cannot tell
    memory_used: int | None         # bytes in use on the device (all processes)
    memory_total: int | None        # bytes
    source: str                     # "torch_fl_npu", "nvidia-smi", "rocm-smi"
    memory_allocated: int | None = None  # bytes held by this process's allocator, when known
    memory_percent: float | None = None  # when the tool gives a share but no byte counts

    @property
    def memory_fraction(self) -> float | None:
        if self.memory_used is not None and self.memory_total:
            return self.memory_used / self.memory_total
        return None if self.memory_percent is None else self.memory_percent / 100

    @property
    def load(self) -> float:
        """0..1 for ranking: the larger of utilization and memory share (unknown counts as 0)."""
        parts = [self.utilization / 100 if self.utilization is not None else 0.0, self.memory_fraction or 0.0]
        return max(parts)

    def as_dict(self) -> dict:
        return asdict(self) | {"memory_fraction": self.memory_fraction}


def _number(text: str) -> float | None:
    """"37 %", "21709 MiB", "37", "[N/A]", "[Not Supported]" -> 37.0, 21709.0, 37.0, None, None."""
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in ("N/A", "NA"):
        return None
    return float(text.split()[0])


def _visible(env_var: str) -> list[int] | None:
    """The physical indices torch sees as 0, 1, ... (None: all, in order)."""
    value = os.environ.get(env_var)
    if value is None or not value.strip():
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:  # UUIDs or MIG names: keep the tool's order
        return None


def _renumber(stats: list[DeviceStats], physical: list[int], visible: list[int] | None) -> list[DeviceStats]:
    if visible is None:
        return stats
    position = {p: i for i, p in enumerate(visible)}
    return [DeviceStats(**(asdict(s) | {"device": f"{s.device.split(':')[0]}:{position[p]}"}))
            for s, p in zip(stats, physical) if p in position]


def parse_nvidia_smi(text: str, visible: list[int] | None = None, device_type: str = "cuda") -> list[DeviceStats]:
    """Rows of `nvidia-smi --query-gpu=index,name,...,memory.total --format=csv[,noheader][,nounits]`.

    With a header the columns are found by name (units in brackets are MiB); without one they
    must be in the order of specs/cuda.yaml's command. `visible`: CUDA_VISIBLE_DEVICES as indices;
    devices are named `device_type:N`.
    """
    rows = [row for row in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if row]
    if not rows:
        return []
    columns = ["index", "name", "uuid", "utilization.gpu", "utilization.memory", "memory.used", "memory.total"]
    if rows[0][0].strip() == "index":
        columns = [cell.split("[")[0].strip() for cell in rows[0]]
        rows = rows[1:]
    stats, physical = [], []
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"nvidia-smi row has {len(row)} fields, expected {len(columns)} ({columns}): {row}")
        cell = dict(zip(columns, (c.strip() for c in row)))
        used, total = _number(cell.get("memory.used", "")), _number(cell.get("memory.total", ""))
        index = int(cell["index"])
        physical.append(index)
        stats.append(DeviceStats(
            device=f"{device_type}:{index}", name=cell.get("name"), utilization=_number(cell.get("utilization.gpu", "")),
            memory_used=None if used is None else int(used * MiB),
            memory_total=None if total is None else int(total * MiB), source="nvidia-smi"))
    return _renumber(stats, physical, visible)


_ROCM_MEMORY_PERCENT = ("GPU Memory Allocated (VRAM%)", "GPU memory use (%)", "GPU Memory use (%)")


def parse_rocm_smi(text: str, visible: list[int] | None = None, device_type: str = "cuda") -> list[DeviceStats]:
    """`rocm-smi --showuse --showmemuse [--showmeminfo vram] --json`: {"card0": {...}, ...}.

    ROCm releases name the memory share differently (all of _ROCM_MEMORY_PERCENT are read);
    byte counts come from --showmeminfo vram. `visible`: HIP_VISIBLE_DEVICES as indices.
    """
    data = json.loads(text)
    stats, physical = [], []
    for card, fields in sorted(data.items(), key=lambda item: int(item[0][4:]) if item[0][4:].isdigit() else -1):
        if not card.startswith("card") or not card[4:].isdigit():
            continue  # "system" and similar sections
        index = int(card[4:])
        percent = next((_number(str(fields[k])) for k in _ROCM_MEMORY_PERCENT if k in fields), None)
        used = _number(str(fields.get("VRAM Total Used Memory (B)", "")))
        total = _number(str(fields.get("VRAM Total Memory (B)", "")))
        physical.append(index)
        stats.append(DeviceStats(
            device=f"{device_type}:{index}", name=fields.get("Card series") or fields.get("Card Series"),
            utilization=_number(str(fields.get("GPU use (%)", ""))),
            memory_used=None if used is None else int(used), memory_total=None if total is None else int(total),
            source="rocm-smi", memory_percent=percent))
    return _renumber(stats, physical, visible)


# native.monitor.parser -> the function reading that tool's output
PARSERS = {"nvidia-smi-csv": parse_nvidia_smi, "rocm-smi-json": parse_rocm_smi}

# native.monitor.parser -> (the one program it reads, the options it may be run with: "=" takes
# `--opt=value`, " " the following arguments as values, "" none). Read-only queries only: the
# generator refuses any other command in a spec (torchfl_gen/checks/native.py, the same table,
# kept equal by a test), and this refuses it again at run time, where the generated spec module
# is what is read.
MONITOR_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "nvidia-smi-csv": ("nvidia-smi", {"--query-gpu": "=", "--format": "=", "--id": "=", "-i": " "}),
    "rocm-smi-json": ("rocm-smi", {"--showuse": "", "--showmemuse": "", "--showmeminfo": " ", "--json": "",
                                   "-d": " ", "--device": " "}),
}


def command_problem(parser: str, command) -> str | None:
    """Why ``command`` is not a monitor command for ``parser`` (None: it is)."""
    if parser not in MONITOR_TOOLS:
        return f"native.monitor.parser {parser!r} is not one this torch_fl reads ({', '.join(PARSERS)})"
    program, options = MONITOR_TOOLS[parser]
    if not command or not all(isinstance(a, str) for a in command) or command[0] != program:
        return f"the monitor command must run {program} (the tool parser {parser} reads), not {list(command)!r}"
    values_allowed = False
    for arg in command[1:]:
        if arg.startswith("-"):
            option, eq, _ = arg.partition("=")
            kind = options.get(option)
            if kind is None or (kind == "=") != bool(eq):
                return f"{program} may not be run with {arg!r} (options: {', '.join(options)})"
            values_allowed = kind == " "
        elif not values_allowed:
            return f"{program} argument {arg!r} follows no option that takes a value"
    return None


def _run_tool(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout


class DeviceMonitor:
    """Samples every device of the installed backends (generated chips and native GPUs).

    `native`: the native chip whose tool to read ("cuda", "hip": its spec's `native.monitor`), or
    "none"; by default the native chip this torch build drives, when its tool is on PATH.
    `run(command) -> stdout` runs the tool (tests pass recorded outputs).
    """

    def __init__(self, *, native: str | None = None, run: Callable[[list[str]], str] | None = None,
                 generated: Iterable[str] | None = None):
        self.run = run or _run_tool
        self._facts = self._native_facts(native)
        self.native = self._facts.name if self._facts is not None else "none"
        self._generated = list(generated) if generated is not None else None

    @staticmethod
    def _native_facts(native: str | None):
        from .chips import chip_facts, native_chips, torch_build

        if native == "none":
            return None
        if native is None:
            for name, spec in native_chips().items():
                if spec.TORCH_BUILD == torch_build() and spec.MONITOR_COMMAND and shutil.which(spec.MONITOR_COMMAND[0]):
                    return DeviceMonitor._checked(chip_facts(name))
            return None
        facts = chip_facts(native)
        if facts is None or facts.kind != "native" or not facts.monitor_command:
            with_monitor = sorted(n for n, s in native_chips().items() if s.MONITOR_COMMAND)
            raise ValueError(f"native must be 'none' or a native chip with a monitor tool, not {native!r} "
                             f"(installed: {with_monitor or 'none'}; torchfl-gen build specs/<chip>.yaml)")
        return DeviceMonitor._checked(facts)

    @staticmethod
    def _checked(facts):
        """The chip's facts, if its monitor command is the parser's tool with read-only options;
        the generator checked the spec, this checks the installed spec module it came to be."""
        problem = command_problem(facts.monitor_parser, list(facts.monitor_command))
        if problem is not None:
            raise ValueError(f"{facts.spec_source}: {problem}; not run")
        return facts

    def _generated_chips(self) -> list[str]:
        if self._generated is not None:
            return self._generated
        from ._api import init

        return [name for name, info in init(check_autograd=False).items() if info.kind == "generated" and info.available]

    def sample(self) -> list[DeviceStats]:
        stats = []
        for chip in self._generated_chips():
            stats.extend(self._sample_generated(chip))
        facts = self._facts
        if facts is not None:
            visible = _visible(facts.visible_devices_env) if facts.visible_devices_env else None
            parse = PARSERS[facts.monitor_parser]
            stats.extend(parse(self.run(list(facts.monitor_command)), visible, facts.device_type))
        return stats

    @staticmethod
    def _sample_generated(chip: str) -> list[DeviceStats]:
        module = getattr(torch, chip)
        out = []
        for index in range(module.device_count()):
            free, total = module.mem_get_info(index)
            allocated = module.memory_stats(index).get("allocated_bytes.all.current", 0)
            out.append(DeviceStats(device=f"{chip}:{index}", name=module.get_device_name(index), utilization=None,
                                   memory_used=int(total - free), memory_total=int(total),
                                   source=f"torch.{chip}", memory_allocated=int(allocated)))
        return out


class DynamicDeviceSelector:
    """Picks the least loaded device (see DeviceStats.load); ties go to the lowest index."""

    def __init__(self, monitor: DeviceMonitor | None = None, *, device_type: str | None = None,
                 min_free_bytes: int = 0):
        self.monitor = monitor or DeviceMonitor()
        self.device_type = device_type
        self.min_free_bytes = min_free_bytes

    def candidates(self) -> list[DeviceStats]:
        stats = self.monitor.sample()
        if self.device_type is not None:
            stats = [s for s in stats if s.device.split(":")[0] == self.device_type]
        if self.min_free_bytes:
            stats = [s for s in stats if s.memory_total is None or s.memory_used is None
                     or s.memory_total - s.memory_used >= self.min_free_bytes]
        return sorted(stats, key=lambda s: (s.load, s.memory_fraction or 0.0, int(s.device.split(":")[1])))

    def select(self) -> torch.device:
        ranked = self.candidates()
        if not ranked:
            wanted = f" of type '{self.device_type}'" if self.device_type else ""
            room = f" with {self.min_free_bytes} bytes free" if self.min_free_bytes else ""
            raise RuntimeError(f"no device{wanted}{room} to select (DeviceMonitor saw none)")
        return torch.device(ranked[0].device)
