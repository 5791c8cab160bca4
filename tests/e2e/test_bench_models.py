"""bench/models.py, the real-model sweep: its registry, every installed model's small config
training on the CPU, and the sweep's protocol run end to end with the CPU on both sides
(no generated chip needed). Timings are never asserted."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
import time

import pytest
import torch

from e2e_helpers import ROOT



def _load_bench_models():
    """bench/models.py under a name of its own (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


models = _load_bench_models()

# issue 19's list: transformers' five, torch.nn's three, torchvision's and timm's vision models
REQUIRED = {"gpt2", "llama", "bert", "t5", "vit", "transformer_encoder", "lstm", "gru",
            "resnet18", "resnet50", "convnext_tiny"}


def test_the_registry_holds_the_models_of_issue_19():
    assert len(models.REGISTRY) >= 12
    assert REQUIRED <= set(models.REGISTRY)
    assert {"mobilenet_v3", "efficientnet_b0"} & set(models.REGISTRY)
    assert {spec.package for spec in models.REGISTRY.values()} == {"transformers", "torch", "torchvision", "timm"}


def test_llama_uses_grouped_query_attention_and_gpt2_ties_its_embeddings():
    llama, _ = models.REGISTRY["llama"].build("small")
    assert llama.config.num_key_value_heads < llama.config.num_attention_heads
    gpt2, _ = models.REGISTRY["gpt2"].build("small")
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight


@pytest.mark.parametrize("name", sorted(models.REGISTRY))
def test_each_small_model_trains_one_step_on_the_cpu(name):
    spec = models.REGISTRY[name]
    if models.missing_package(spec):
        pytest.skip(f"{spec.package} not installed")
    torch.manual_seed(0)
    model, batch = spec.build("small")
    inputs = batch(torch.Generator().manual_seed(1))
    before = [p.detach().clone() for p in model.parameters()]
    step = models.make_step(model, spec.loss, [inputs], models.make_optimizer("adamw", model.parameters()),
                            "cpu", "fp32")
    loss = step()
    assert loss.dim() == 0 and math.isfinite(loss.item())
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters())), "the step changed no weight"


def test_the_sweep_runs_both_workers_and_reports_a_missing_package_as_skipped(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(models.REGISTRY, "needs_missing",
                        models.ModelSpec("no_such_package_for_bench", models._gpt2, models._hf_loss))
    out = tmp_path / "models.json"
    models.main(["--chip", "cpu", "--native", "cpu", "--size", "small", "--models", "gpt2", "needs_missing",
                 "--steps", "2", "--blocks", "2", "--warmup", "1", "--precision", "fp32", "--out", str(out)])
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["benchmark"] == "models_train_step"
    assert record["results"]["needs_missing"] == {"status": "skipped",
                                                  "reason": "no_such_package_for_bench not installed"}
    assert "skipped: no_such_package_for_bench not installed" in printed
    gpt2 = record["results"]["gpt2"]["fp32/adamw"]
    assert gpt2["status"] == "ok", gpt2
    assert gpt2["steps_per_device"] == 2 and len(gpt2["block_ratios"]) == 2
    assert gpt2["ratio"] > 0 and gpt2["host_ratio"] > 0
    # the same weights and batch on the same device: the eval forward agrees exactly
    assert gpt2["eval_loss"]["chip"] == gpt2["eval_loss"]["native"] and gpt2["step0_loss_rel_diff"] == 0
    assert len(gpt2["train_losses"]["chip"]) == len(gpt2["train_losses"]["native"]) == 3  # warm-up + timed
    assert gpt2["cpu_fallback_calls"] == 0 and gpt2["status"] == "ok"
    assert gpt2["native_privateuse1_backend"] == "privateuseone"  # the native worker loaded no chip
    assert record["summary"]["fp32/adamw"]["models"] == 1
    assert "summary fp32/adamw: median ratio" in printed
    assert any("TORCH_FL_CHIPS=none" in note for note in record["notes"])


def test_models_past_the_timeout_are_reported_failed_and_the_sweep_goes_on(capsys):
    record = models.main(["--chip", "cpu", "--native", "cpu", "--size", "small", "--models", "lstm", "gru",
                          "--timeout", "0.2", "--precision", "fp32"])
    for name in ("lstm", "gru"):
        figures = record["results"][name]["fp32/adamw"]
        assert figures["status"] == "failed" and "timed out" in figures["error"]
    assert "summary: no model ran on both devices" in capsys.readouterr().out


def test_a_crashed_worker_is_reported_with_its_last_words():
    worker = models.Worker("chip fake", [sys.executable, "-c", "import sys; print('boom: out of memory', "
                                         "file=sys.stderr); sys.exit(3)"], env=None)
    with pytest.raises(models.WorkerFailed, match=r"chip fake: worker exited with code 3 \(boom: out of memory\)"):
        worker.receive(time.monotonic() + 30, 30)
    worker.stop()


def test_a_hung_worker_meets_the_deadline_and_is_killed():
    worker = models.Worker("native fake", [sys.executable, "-c", "import time; time.sleep(600)"], env=None)
    start = time.monotonic()
    with pytest.raises(models.WorkerFailed, match="native fake: timed out"):
        worker.receive(time.monotonic() + 0.5, 0.5)
    worker.stop(kill=True)
    assert worker.proc.returncode is not None and time.monotonic() - start < 60


def test_steps_split_into_blocks_as_evenly_as_they_go():
    assert models.block_sizes(3, 4) == [1, 1, 1]
    assert models.block_sizes(10, 4) == [3, 3, 2, 2]
    assert models.block_sizes(1, 1) == [1]
