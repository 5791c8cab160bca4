"""The benchmarks run (on the simulated NPU here) and docs/benchmarks.md is what the committed results give.

Timings are never asserted: only that each script measures what it says, prints one JSON
record and a table, and writes the record where --out says.
"""
from __future__ import annotations

import json
import subprocess
import sys

from e2e_helpers import ROOT, last_json_line


def bench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_benchmarks_doc_is_generated_from_the_results():
    proc = bench("bench/report.py", "--check")
    assert proc.returncode == 0, proc.stderr
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    for section in ("ResNet-50 training step", "Per-op host overhead", "Triton fallback kernels",
                    "Caching allocator", "`torchfl-gen build` times", "Where the time goes",
                    "all_reduce bus bandwidth: collective library vs gloo staging (npu)"):
        assert section in text


def test_op_overhead_on_the_simulated_npu(npu_backend, tmp_path):
    out = tmp_path / "overhead.json"
    proc = bench("bench/op_overhead.py", "--pair", "npu:cpu", "--calls", "20", "--repeats", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    record = last_json_line(proc.stdout)
    assert record == json.loads(out.read_text())
    ops = record["results"]["npu:cpu"]
    assert {"add (a + b)", "mm 16x16", "empty (allocator)"} <= set(ops)
    assert all(v["chip_us"] > 0 and v["native_us"] > 0 and v["ratio"] > 0 for v in ops.values())
    assert "npu vs cpu" in proc.stdout  # the human table


def test_allocator_compares_the_cache_with_raw_driver_allocation(npu_backend, tmp_path):
    out = tmp_path / "allocator.json"
    proc = bench("bench/allocator.py", "--chip", "npu", "--native", "cpu", "--count", "200", "--raw-count", "20",
                 "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert set(record["results"]) == {"1 KiB", "1 MiB", "64 MiB"}
    for v in record["results"].values():
        assert v["raw_pairs_per_s"] > 0 and v["chip_pairs_per_s"] > 0


def test_collectives_compare_the_library_with_gloo_staging(npu_backend, tmp_path):
    out = tmp_path / "collectives.json"
    proc = bench("bench/collectives.py", "--chip", "npu", "--ranks", "2", "--sizes", "4K", "64K",
                 "--warmup", "1", "--iters", "2", "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = last_json_line(proc.stdout)
    assert record == json.loads(out.read_text())
    assert (record["backend"], record["ranks"]) == ("npuccl", 2)
    assert set(record["results"]) == {"4 KiB", "64 KiB"}
    for size, v in record["results"].items():
        assert v["bytes"] == {"4 KiB": 4096, "64 KiB": 65536}[size]
        for path in ("library", "staging"):   # bus bandwidth as nccl-tests define it
            assert v[path]["median_s"] > 0
            assert abs(v[path]["busbw_GBps"] - v["bytes"] * 2 * (2 - 1) / 2 / v[path]["median_s"] / 1e9) < 1e-9
        assert v["ratio"] == v["library"]["busbw_GBps"] / v["staging"]["busbw_GBps"]
        assert set(v["staging_steps_median_s"]) == {"to_host", "gloo", "to_device"}
    assert "staging GB/s" in proc.stdout  # the human table


def test_gpu_benchmarks_refuse_clearly_without_the_chip():
    proc = bench("bench/resnet50.py", "--chip", "nochip")
    assert proc.returncode != 0
    assert "torch.nochip is not available" in proc.stderr and "Traceback" not in proc.stderr
    proc = bench("bench/attention.py", "--chip", "nochip")
    assert proc.returncode != 0
    assert "chip nochip is not available" in proc.stderr and "Traceback" not in proc.stderr
    proc = bench("bench/vendor_call_parts.py")   # nvgpu's C++ timing needs CUDA and the backend
    assert proc.returncode == 2
    assert "needs a CUDA machine with the nvgpu backend" in proc.stderr and "Traceback" not in proc.stderr


def test_step_parts_splits_a_step_and_names_its_costliest_ops(tmp_path):
    out = tmp_path / "parts.json"
    proc = bench("bench/step_parts.py", "--device", "cpu", "--model", "transformer_encoder", "--steps", "2",
                 "--warmup", "1", "--rows", "4", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    record = last_json_line(proc.stdout)
    assert record == json.loads(out.read_text())
    parts = record["parts_ms"]
    assert set(parts) == {"forward", "backward", "optimizer", "step"} and all(v > 0 for v in parts.values())
    assert parts["step"] >= max(parts["forward"], parts["backward"], parts["optimizer"])
    assert len(record["top_ops"]) == 4 and all(op["name"].startswith("aten::") or op["calls_per_step"] > 0
                                               for op in record["top_ops"])
    sys.path.insert(0, str(ROOT / "bench"))
    import report

    assert report.command(record) == ("python bench/step_parts.py --device cpu --model transformer_encoder "
                                      "--size small")
    table = report.step_parts(record)
    assert table[0] == "| forward | backward | optimizer | step |" and len(table) == 6 + 4
    assert "gpu" not in record   # no CUDA GPU here: no GPU view


def test_step_parts_gpu_view_splits_kernels_from_the_hosts_cuda_calls():
    """The GPU view (cuda, nvgpu) from profiler events: GPU work by device time, the CUDA
    runtime and driver calls by host time, aten ops in neither."""
    from types import SimpleNamespace

    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import report
    import step_parts

    gpu, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(key, device_type, count, cpu_us=0.0, gpu_us=0.0):
        return SimpleNamespace(key=key, device_type=device_type, count=count, self_cpu_time_total=cpu_us,
                               self_device_time_total=gpu_us)

    n = step_parts.PROFILED_STEPS
    events = [event("ampere_sgemm_128x64_nn", gpu, 4 * n, gpu_us=900.0 * n),
              event("Memcpy DtoD (Device -> Device)", gpu, n, gpu_us=100.0 * n),
              event("cudaStreamSynchronize", cpu, n, cpu_us=5000.0 * n),
              event("cuLaunchKernel", cpu, 40 * n, cpu_us=200.0 * n),
              event("aten::mm", cpu, 4 * n, cpu_us=80.0 * n, gpu_us=900.0 * n)]
    view = step_parts.gpu_view(events, rows=5)
    assert view["busy_ms_per_step"] == 1.0 and view["launches_per_step"] == 5
    assert [k["name"] for k in view["top_kernels"]] == ["ampere_sgemm_128x64_nn", "Memcpy DtoD (Device -> Device)"]
    assert view["top_driver_calls"] == [
        {"name": "cudaStreamSynchronize", "host_us_per_step": 5000.0, "calls_per_step": 1.0},
        {"name": "cuLaunchKernel", "host_us_per_step": 200.0, "calls_per_step": 40.0}]
    record = {"parts_ms": {"forward": 1.0, "backward": 1.0, "optimizer": 1.0, "step": 4.0}, "top_ops": [],
              "gpu": view}
    table = "\n".join(report.step_parts(record))
    assert "GPU busy 1 ms a step (5 kernels and copies)." in table
    assert "| `cudaStreamSynchronize` | 5e+03 | 1 |" in table
