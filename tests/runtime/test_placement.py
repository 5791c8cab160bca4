"""DevicePlacementPolicy: a model split over cpu and npu trains like the unsplit one."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

import torch_fl
from torch_fl.placement import DevicePlacementPolicy

from e2e_helpers import ROOT


def test_split_example_trains_like_the_unsplit_model(tmp_path):
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "examples/split_placement.py", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(out.read_text())
    assert run["devices"] == ["cpu", "npu"]
    devices = run["parameter_devices"]
    assert devices["0.weight"] == "npu:0" and devices["2.1.body.0.weight"] == "npu:0"
    assert devices["2.1.body.2.weight"] == "cpu" and devices["3.weight"] == "cpu"
    reference, split = run["reference"], run["split"]
    assert split["losses"][-1] < split["losses"][0]
    assert len(split["losses"]) == len(reference["losses"]) == 3 * 256 // 32
    for a, b in zip(split["losses"], reference["losses"]):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b))
    for name, values in reference["weights"].items():
        for a, b in zip(split["weights"][name], values):
            assert abs(a - b) <= 1e-5 + 1.3e-6 * abs(b), name


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.register_buffer("offset", torch.ones(3))

    def forward(self, x, *, shift):
        return self.inner(x) + x + shift + self.offset  # the block's own compute, on its device


def test_plan_inherits_last_rule_wins_and_transfers_kwargs():
    torch_fl.init()
    model = nn.Sequential(nn.Linear(3, 3), Block())
    policy = DevicePlacementPolicy({"1*": "npu", "1.inner": "cpu"})
    policy.apply(model)
    plan = {name: str(device) for name, device in policy.placement.items()}
    assert plan == {"": "cpu", "0": "cpu", "1": "npu", "1.inner": "cpu"}
    assert model[1].offset.device.type == "npu" and model[1].inner.weight.device.type == "cpu"
    x = torch.randn(2, 3)  # on the cpu; Block's hook moves args and kwargs to the npu
    out = model[1](model[0](x), shift=torch.zeros(3))
    assert out.device.type == "npu"  # a Sequential's child keeps its output; the chain's end moves it


def test_root_output_comes_back_and_remove_undoes_transfers():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    policy = DevicePlacementPolicy({"2": "npu"})
    policy.apply(model)
    assert model(torch.randn(5, 3)).device.type == "cpu"
    policy.remove()
    with pytest.raises(RuntimeError, match="device"):
        model(torch.randn(5, 3))


def test_a_rule_matching_nothing_is_named():
    with pytest.raises(ValueError, match=r"\['encoder\*'\] match no module of Sequential"):
        DevicePlacementPolicy({"encoder*": "npu"}).apply(nn.Sequential(nn.Linear(2, 2)))
