"""AMP on the npu chip: autocast from the spec's lists, GradScaler's ops on the chip, the example."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import torch_fl
from e2e_helpers import ROOT

NPU = "npu"


def test_spec_dtypes_and_default():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.get_autocast_dtype(NPU) == torch.float16   # amp.default


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_casts_per_policy(dtype):
    a = torch.randn(4, 8, device=NPU)
    b = torch.randn(8, 3, device=NPU)
    half = torch.randn(3, device=NPU, dtype=dtype)
    with torch.autocast(NPU, dtype=dtype):
        mm = a @ b                                    # lower_precision_ops
        lin = torch.nn.functional.linear(a, b.t())
        soft = torch.softmax(mm, dim=1)               # fp32_ops (dtype argument set)
        ex = torch.exp(half)                          # fp32_ops
        prom = torch.addcmul(a[0, :3], half, half)    # promote_ops: widest input
        plain = a + 1                                 # in no list: untouched
    assert (mm.dtype, lin.dtype) == (dtype, dtype)
    assert soft.dtype == ex.dtype == prom.dtype == plain.dtype == torch.float32
    ref = (a.cpu().to(dtype) @ b.cpu().to(dtype))
    torch.testing.assert_close(mm.cpu(), ref)


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    p = torch.rand(4, device=NPU)
    target = torch.rand(4, device=NPU)
    with torch.autocast(NPU):
        with pytest.raises(RuntimeError, match="binary_cross_entropy and torch.nn.BCELoss are unsafe to "
                                               "autocast on npu"):
            torch.nn.functional.binary_cross_entropy(p, target)
        safe = torch.nn.functional.binary_cross_entropy_with_logits(p, target)   # fp32_ops
    assert safe.dtype == torch.float32
    torch.nn.functional.binary_cross_entropy(p, target)   # outside autocast: allowed


def test_autocast_outside_the_block_is_off():
    a = torch.randn(4, 4, device=NPU)
    with torch.autocast(NPU, dtype=torch.bfloat16):
        pass
    assert (a @ a).dtype == torch.float32


def test_unlisted_dtype_torch_warns_and_disables_torch_fl_refuses():
    # torch.autocast on a custom device warns and runs without autocast (as torch does for
    # every PrivateUse1 backend); torch_fl's own autocast refuses the dtype outright.
    a = torch.ones(4, 4, device=NPU)
    with pytest.warns(UserWarning, match=r"In npu autocast, but the target dtype is not supported\. "
                                         r"Disabling autocast\.\nnpu Autocast only supports dtypes of "
                                         r"torch\.float16, torch\.bfloat16"):
        with torch.autocast(NPU, dtype=torch.float32):
            assert not torch.is_autocast_enabled(NPU)
            assert (a @ a).dtype == torch.float32
    with pytest.raises(RuntimeError, match="autocast on npu does not support torch.float64"):
        torch_fl.amp.autocast(NPU, dtype=torch.float64)


def test_torch_fl_amp_takes_the_current_device():
    try:
        torch_fl.set_default_device(NPU)
        cast = torch_fl.amp.autocast(dtype=torch.bfloat16)
        assert (cast.device, cast.fast_dtype) == (NPU, torch.bfloat16)
        assert torch_fl.amp.autocast().fast_dtype == torch.float16
        assert torch_fl.amp.GradScaler()._device == NPU
        torch.set_default_device("cpu")
        assert torch_fl.amp.autocast().device == "cpu"
    finally:
        # None, not "cpu": set_default_device("cpu") leaves a device mode active for the whole session
        torch.set_default_device(None)


def _paths(op):
    return torch_fl.fallback_stats().get(op, {})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_unscale_matches_cpu_and_runs_on_triton(dtype):
    torch.manual_seed(0)
    host = [torch.randn(1500).to(dtype), torch.randn(6, 5).to(dtype).t(), torch.randn(0).to(dtype)]
    host[1][1, 2] = float("inf") if dtype != torch.float32 else float("nan")
    grads = [g.to(NPU) for g in host]
    found, ref_found = torch.zeros((), device=NPU), torch.zeros(())
    inv, ref_inv = torch.full((), 0.125, device=NPU), torch.full((), 0.125)
    torch_fl.reset_fallback_stats()
    torch._amp_foreach_non_finite_check_and_unscale_(grads[:1], found, inv)
    assert found.item() == 0.0                          # finite: untouched
    torch._amp_foreach_non_finite_check_and_unscale_(grads[1:], found, inv)
    torch._amp_foreach_non_finite_check_and_unscale_(host[:1], ref_found, ref_inv)
    torch._amp_foreach_non_finite_check_and_unscale_(host[1:], ref_found, ref_inv)
    assert found.item() == ref_found.item() == 1.0
    for g, h in zip(grads, host):
        torch.testing.assert_close(g.cpu(), h, rtol=0, atol=0, equal_nan=True)
    assert _paths("_amp_foreach_non_finite_check_and_unscale_") == {"triton": 2}


@pytest.mark.parametrize("found_inf,tracker", [(0.0, 0), (0.0, 2), (1.0, 2), (0.0, 1)])
def test_update_scale_matches_cpu(found_inf, tracker):
    scale, ref_scale = torch.full((), 1024.0, device=NPU), torch.full((), 1024.0)
    t, ref_t = torch.full((), tracker, dtype=torch.int32, device=NPU), torch.full((), tracker, dtype=torch.int32)
    f = torch.full((), found_inf)
    torch_fl.reset_fallback_stats()
    out = torch._amp_update_scale_(scale, t, f.to(NPU), 3.0, 0.25, 3)
    torch._amp_update_scale_(ref_scale, ref_t, f, 3.0, 0.25, 3)
    assert out is scale
    assert (scale.item(), t.item()) == (ref_scale.item(), ref_t.item())
    assert _paths("_amp_update_scale_") == {"triton": 1}


def test_grad_scaler_never_falls_back_to_cpu():
    model = torch.nn.Linear(4, 2).to(NPU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(NPU, init_scale=256.0)
    with torch_fl.strict_fallback():
        with torch.autocast(NPU):
            loss = model(torch.randn(3, 4, device=NPU)).float().sum()
        scaler.scale(loss).backward()
        model.weight.grad[0, 0] = float("nan")
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 128.0   # the step was skipped and the scale backed off


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_example_trains_and_skips_inf_steps(tmp_path, dtype):
    out = tmp_path / "amp.json"
    proc = subprocess.run([sys.executable, "examples/train_amp.py", "--device", NPU, "--dtype", dtype, "--strict",
                           "--steps", "20", "--inf-every", "7", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(out.read_text())
    assert set(run["autocast_dtypes"]) == {f"torch.{dtype}"}
    poisoned = {6, 13}
    assert [i for i, s in enumerate(run["stepped"]) if not s] == sorted(poisoned)
    for i in poisoned:   # a skipped step halves the scale; the others never shrink it
        assert run["scales"][i] == run["scales"][i - 1] / 2
    assert all(run["scales"][i] >= run["scales"][i - 1] for i in range(1, 20) if i not in poisoned)
    assert max(run["scales"]) > run["scales"][0]          # growth_interval=5 clean steps grow it
    assert run["losses"][-1] < 0.5 * run["losses"][0]
    cpu = {op: p for op, p in run["fallback_stats"].items() if "cpu" in p}
    assert cpu == {}
    assert run["fallback_stats"]["_amp_update_scale_"] == {"triton": 20}
