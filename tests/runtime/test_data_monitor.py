"""DeviceLoader (batches to the device), DeviceMonitor parsers on recorded outputs, the selector."""
from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import torch_fl
from torch_fl.data import DeviceLoader, to_device
from torch_fl.monitor import (DeviceMonitor, DeviceStats, DynamicDeviceSelector, command_problem, parse_nvidia_smi,
                              parse_rocm_smi)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "monitor"
MiB = 1 << 20
Pair = collections.namedtuple("Pair", "image label")


class Records(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": torch.full((2,), float(i)), "meta": {"id": i, "tag": f"r{i}"}, "pair": Pair(torch.tensor(i), i)}


def test_device_loader_moves_nested_batches_and_keeps_other_leaves():
    torch_fl.init()
    loader = DeviceLoader(DataLoader(Records(), batch_size=2), "npu")
    assert len(loader) == 3
    seen = []
    for batch in loader:
        assert batch["x"].device.type == "npu" and batch["meta"]["id"].device.type == "npu"
        assert isinstance(batch["pair"], Pair) and batch["pair"].image.device.type == "npu"
        assert isinstance(batch["meta"]["tag"], list)  # strings pass through
        seen.extend(batch["x"][:, 0].cpu().tolist())
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_device_loader_copies_asynchronously_from_pinned_memory(monkeypatch):
    copies = []
    original = torch.Tensor.to

    def spy(self, *args, **kwargs):
        copies.append((self.is_pinned(), kwargs.get("non_blocking", False)))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    data = TensorDataset(torch.arange(12.0).view(6, 2), torch.arange(6))
    batches = list(DeviceLoader(DataLoader(data, batch_size=4), "npu"))
    assert copies and all(copies) and len(copies) == 4  # 2 batches x 2 tensors, pinned, non_blocking
    assert [b[1].cpu().tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]


def test_device_loader_prefetches_one_batch_ahead_and_stops_cleanly():
    produced = []

    def batches():
        for i in range(4):
            produced.append(i)
            yield torch.full((3,), float(i))

    loader = iter(DeviceLoader(batches(), "npu"))
    first = next(loader)
    assert first.device.type == "npu" and produced == [0, 1]  # batch 1 is on its way already
    loader.close()  # leaving early waits for the queued copy before its host buffer is freed
    assert first.cpu().tolist() == [0.0, 0.0, 0.0]
    assert to_device((torch.ones(1), 3), "npu")[0].device.type == "npu"


def test_nvidia_smi_recorded_outputs():
    busy = parse_nvidia_smi((DATA / "nvidia-smi-h200-busy.csv").read_text())
    assert busy == [DeviceStats("cuda:0", "NVIDIA H200", 100.0, 21709 * MiB, 143771 * MiB, "nvidia-smi")]
    idle = parse_nvidia_smi((DATA / "nvidia-smi-h200-idle.csv").read_text())
    bare = parse_nvidia_smi((DATA / "nvidia-smi-h200-idle-nounits.csv").read_text())
    assert idle == bare and idle[0].utilization == 0.0 and idle[0].memory_used == 0
    assert busy[0].load == 1.0 and idle[0].load == 0.0


def test_nvidia_smi_missing_values_and_visible_devices():
    text = ("index, name, uuid, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB]\n"
            "0, A, GPU-a, [N/A], [N/A], 10 MiB, 100 MiB\n1, B, GPU-b, 50 %, 3 %, 90 MiB, 100 MiB\n")
    stats = parse_nvidia_smi(text, visible=[1])
    assert [(s.device, s.name, s.utilization) for s in stats] == [("cuda:0", "B", 50.0)]
    assert parse_nvidia_smi(text)[0].utilization is None
    with pytest.raises(ValueError, match="3 fields, expected 7"):
        parse_nvidia_smi("0, A, GPU-a\n")


def test_rocm_smi_outputs_of_two_releases():
    new = parse_rocm_smi((DATA / "rocm-smi-mi300x-rocm6.json").read_text())
    assert [(s.device, s.utilization, s.memory_used, s.memory_total, s.memory_percent) for s in new] == [
        ("cuda:0", 87.0, 84387127296, 205822885888, 41.0), ("cuda:1", 3.0, 295063552, 205822885888, 0.0)]
    old = parse_rocm_smi((DATA / "rocm-smi-mi250-rocm5.json").read_text(), visible=[1])
    assert [(s.device, s.utilization, s.memory_fraction) for s in old] == [("cuda:0", 100.0, 0.64)]


def _spec_command(path):
    """The monitor command as the spec file writes it (generator side, not torch_fl's copy)."""
    from torchfl_gen.spec import load_spec

    return list(load_spec(path).monitor.command)


def test_monitor_runs_the_vendor_tool_and_samples_the_generated_chip(native_packages):
    commands = []

    def recorded(command):
        commands.append(command)
        return (DATA / "nvidia-smi-h200-busy.csv").read_text()

    held = torch.empty(3 * MiB, dtype=torch.uint8, device="npu:1")
    stats = {s.device: s for s in DeviceMonitor(native="cuda", run=recorded).sample()}
    assert commands == [_spec_command("specs/cuda.yaml")]
    assert set(stats) == {"npu:0", "npu:1", "cuda:0"}
    npu1 = stats["npu:1"]
    assert npu1.source == "torch.npu" and npu1.utilization is None
    assert npu1.memory_allocated >= 3 * MiB and npu1.memory_used >= 3 * MiB
    free, total = torch.npu.mem_get_info(1)
    assert npu1.memory_total == total and npu1.memory_used == total - free
    del held


def test_selector_picks_the_least_loaded_device(native_packages):
    def recorded(command):
        assert command == _spec_command("specs/hip.yaml")
        return (DATA / "rocm-smi-mi300x-rocm6.json").read_text()

    monitor = DeviceMonitor(native="hip", run=recorded, generated=[])
    assert DynamicDeviceSelector(monitor).select() == torch.device("cuda", 1)
    busy_npu0 = torch.empty(64 * MiB, dtype=torch.uint8, device="npu:0")
    npu = DynamicDeviceSelector(DeviceMonitor(native="none"), device_type="npu")
    assert npu.select() == torch.device("npu", 1)
    with pytest.raises(RuntimeError, match="no device of type 'npu' with"):
        DynamicDeviceSelector(DeviceMonitor(native="none"), device_type="npu", min_free_bytes=1 << 50).select()
    del busy_npu0


def test_the_monitor_refuses_a_command_outside_its_parsers_query():
    """Defence in depth: the generator refuses such a spec (tests/generator/test_spec_refusals.py);
    DeviceMonitor reads the installed spec module and refuses it again, before running anything."""
    from types import SimpleNamespace

    facts = SimpleNamespace(monitor_parser="nvidia-smi-csv", monitor_command=("sh", "-c", "id"),
                            spec_source="specs/cuda.yaml")
    with pytest.raises(ValueError, match="must run nvidia-smi .* not run"):
        DeviceMonitor._checked(facts)
    assert "may not be run with '-r'" in command_problem("nvidia-smi-csv", ["nvidia-smi", "-r"])
    assert "may not be run with '--setfan'" in command_problem("rocm-smi-json", ["rocm-smi", "--setfan", "255"])
    assert "not one this torch_fl reads" in command_problem("evil", ["nvidia-smi"])
    # The generated spec modules of the real native chips pass.
    for chip in ("cuda", "hip"):
        path = ROOT / "generated" / chip / f"torch_fl_{chip}" / "spec.py"
        module_spec = importlib.util.spec_from_file_location(f"_spec_{chip}", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        assert command_problem(module.MONITOR_PARSER, list(module.MONITOR_COMMAND)) is None, chip
