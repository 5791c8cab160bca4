"""torch.distributed on the npu chip: the spec's backend, staged through gloo; DDP with torchrun."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_fl
from e2e_helpers import ROOT, free_port


def test_backend_registered_for_the_chip():
    assert dist.Backend.backend_capability["npuccl"] == ["npu"]
    assert dist.Backend.default_device_backend_map["npu"] == "npuccl"
    assert dist.Backend.NPUCCL == "npuccl"


def test_backend_config_from_the_spec(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29533")
    config = torch_fl.distributed.get_backend_config("npu:0")
    assert config["backend"] == "npuccl"
    assert config["init_method"] == "tcp://127.0.0.1:29533"
    assert "is_high_priority_stream" not in config["options"]
    assert set(config["options"]) == {"timeout"}
    assert torch_fl.distributed.get_backend_config("cpu")["backend"] == "gloo"


def test_backend_config_drops_unsupported_options_with_a_warning(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29533")
    with pytest.warns(UserWarning, match=r"npuccl backend does not support is_high_priority_stream "
                                         r"\(specs/npu.yaml: distributed.unsupported_options\)"):
        config = torch_fl.distributed.get_backend_config("npu", is_high_priority_stream=True, group_name="g")
    assert config["options"]["group_name"] == "g" and "is_high_priority_stream" not in config["options"]


def test_backend_config_needs_master_address(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(RuntimeError, match="the npuccl backend meets over tcp: set MASTER_ADDR and MASTER_PORT"):
        torch_fl.distributed.get_backend_config("npu")
    with pytest.raises(RuntimeError, match="no torch.distributed backend for device type 'meta': no installed torch_fl package describes it"):
        torch_fl.distributed.get_backend_config("meta")


def test_single_rank_group_with_nccl_name_maps_to_the_chip(tmp_path):
    """init_process_group(backend="nccl") on this CPU-only host: the chip's backend, one warning."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    with pytest.warns(UserWarning, match="backend 'nccl' is not available here; using the npu chip's 'npuccl'") as rec:
        dist.init_process_group(backend="nccl", store=store, rank=0, world_size=1)
    try:
        assert dist.get_backend() == "npuccl"
        t = torch.arange(4.0, device="npu")
        dist.all_reduce(t)
        assert t.device.type == "npu" and t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        sub = dist.new_group(backend="nccl")   # mapped again, without a second warning
        assert dist.get_backend(sub) == "npuccl"
    finally:
        dist.destroy_process_group()
    assert len([w for w in rec if "nccl" in str(w.message)]) == 1


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_matches_one_process_on_the_global_batch(tmp_path, world):
    out = tmp_path / "ddp"
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}", "--master_addr=127.0.0.1",
                          f"--master_port={port}", "examples/train_ddp.py", "--out-dir", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert ddp.returncode == 0, ddp.stdout + ddp.stderr
    ref = subprocess.run([sys.executable, "examples/train_ddp.py", "--reference", "--out-dir", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    single = json.loads((out / "reference.json").read_text())

    for r, run in enumerate(ranks):
        assert run["backend"] == "npuccl"   # the script asked for nccl
        assert run["config"]["init_method"] == f"tcp://127.0.0.1:{port}"
        assert run["param_devices"] == ["npu:0"]
        c = run["collectives"]
        assert c["all_reduce"] == [world * (world + 1) / 2] * 3   # rank q contributes q + 1
        assert c["broadcast"] == [11.0] * 2
        assert c["all_gather"] == [[float(q)] * 2 for q in range(world)]
        assert c["all_gather_single"] == [float(q) for q in range(world) for _ in range(2)]
        assert c["reduce_scatter"] == [float(sum(q * world + r for q in range(world)))] * 2
        assert c["all_to_all"] == [[float(q * 10 + r)] for q in range(world)]
        assert c["all_to_all_single"] == [float(r + 10 * q) for q in range(world)]
        assert c["send_recv"] == ([100.0] * 2 if r < 2 else [float(r + 100)] * 2)   # rank 0 sends to rank 1
        assert c["devices"] == ["npu:0"]
    # identical on every rank, and what one process gets from the whole batches
    assert all(run["params"] == ranks[0]["params"] for run in ranks[1:])
    assert ranks[0]["params"].keys() == single["params"].keys()
    for name, values in single["params"].items():
        torch.testing.assert_close(torch.tensor(ranks[0]["params"][name]), torch.tensor(values),
                                   rtol=1e-5, atol=1e-6, msg=name)
    assert ranks[0]["params"] != _initial_params()   # it trained


def _initial_params():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_ddp
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    torch.randn(6 * train_ddp.GLOBAL_BATCH, 3, 16, 16)
    torch.randint(0, 10, (6 * train_ddp.GLOBAL_BATCH,))
    return {n: p.detach().flatten().tolist() for n, p in train_ddp.make_model().named_parameters()}


def test_nccl_beside_native_cuda_keeps_cuda_and_adds_the_chip(monkeypatch):
    """On a CUDA machine (NCCL natively there) a script's backend="nccl" keeps NCCL for cuda
    tensors and gives the chip's tensors the chip's backend in the same group: seen on the H200,
    where "nccl" alone left nvgpu tensors with "No backend type associated with device type"."""
    from torch_fl import distributed as fl_dist

    monkeypatch.setattr(fl_dist, "_natively_available", lambda backend: backend == "nccl")
    backend, message = fl_dist._replacement("nccl")
    assert backend == "cuda:nccl,npu:npuccl"
    assert message.startswith("torch.distributed backend 'nccl' serves cuda tensors; npu tensors in the same group "
                              "use the chip's 'npuccl'")
    assert fl_dist._replacement("cuda:nccl") is None and fl_dist._replacement("gloo") is None
    monkeypatch.setattr(fl_dist, "_natively_available", lambda backend: False)
    assert fl_dist._replacement("nccl")[0] == "npuccl"
