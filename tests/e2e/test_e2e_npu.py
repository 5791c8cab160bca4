"""The npu chip end to end: build from specs/npu.yaml, train, memory, driver errors."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from e2e_helpers import ROOT, VARIANT_SPEC_EDITS, last_json_line, run_python, torchfl_gen


def test_rebuild_with_same_inputs_is_a_no_op(npu_backend):
    again = torchfl_gen("build", "specs/npu.yaml")
    assert again.returncode == 0, again.stderr
    assert "is up to date" in again.stderr
    assert "compiling" not in again.stderr


def test_example_trains_like_cpu_with_no_fallbacks(npu_backend, tmp_path):
    runs = {}
    for device in ("cpu", "npu"):
        out = tmp_path / f"{device}.json"
        proc = subprocess.run([sys.executable, "examples/train_resnet_stem.py", "--device", device, "--strict",
                               "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        runs[device] = json.loads(out.read_text())
    cpu, npu = runs["cpu"], runs["npu"]
    assert npu["cpu_fallbacks"] == {}
    assert len(npu["losses"]) == len(cpu["losses"]) == 2 * 512 // 32
    assert npu["losses"][-1] < npu["losses"][0]  # it learns
    for a, b in zip(npu["losses"], cpu["losses"]):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b))
    assert npu["weights"].keys() == cpu["weights"].keys()
    for name in cpu["weights"]:
        for a, b in zip(npu["weights"][name], cpu["weights"][name]):
            assert abs(a - b) <= 1e-5 + 1.3e-6 * abs(b), name


def test_memory_baseline_cache_retry_and_oom(npu_backend):
    proc = run_python("""
        import json, torch
        MiB = 1 << 20
        npu = torch.npu
        base = npu.memory_allocated()
        a = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
        live = npu.memory_allocated() - base
        del a
        after_del = npu.memory_allocated() - base
        cached = npu.memory_reserved()
        # 30 MiB cached + 40 MiB new > 64 MiB capacity: the cache is freed and the malloc retried.
        b = torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
        retries = npu.memory_stats()["num_alloc_retries"]
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
            oom = None
        except torch.OutOfMemoryError as e:
            oom = str(e)
        del b
        npu.empty_cache()
        print(json.dumps({"live": live, "after_del": after_del, "cached": cached, "retries": retries,
                          "oom": oom, "final": npu.memory_allocated() - base,
                          "reserved": npu.memory_reserved(), "ooms": npu.memory_stats()["num_ooms"]}))
    """, env={"SIMNPU_MEMORY_CAPACITY": "64M"})
    assert proc.returncode == 0, proc.stderr
    r = last_json_line(proc.stdout)
    assert r["live"] == 30 << 20 and r["after_del"] == 0
    assert r["cached"] >= 30 << 20
    assert r["retries"] == 1
    assert r["oom"] is not None and "Tried to allocate 40.00 MiB" in r["oom"]
    assert "total capacity of 64.00 MiB" in r["oom"]
    assert r["ooms"] == 1
    assert r["final"] == 0 and r["reserved"] == 0


def test_device_count_follows_the_driver(npu_backend):
    proc = run_python("import torch; print(torch.npu.device_count())", env={"SIMNPU_DEVICE_COUNT": "3"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "3"


def test_driver_version_mismatch_names_the_matching_package(npu_backend):
    proc = run_python("""
        import torch
        assert not torch.npu.is_available()
        torch.ones(1, device="npu")
    """, env={"SIMNPU_DRIVER_VERSION_OVERRIDE": "2.0"})
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("RuntimeError: driver version mismatch")
    assert "reports version 2.0" in error and "built for driver 2.1" in error
    assert "torch-fl-npu==0.1.0+driver2.0" in error
    assert "libsimnpu_runtime.so" in error and "spec specs/npu.yaml" in error


def test_import_torch_survives_a_broken_driver(npu_backend):
    proc = run_python("""
        import torch, torch_fl
        info = torch_fl.init()["npu"]
        print(info.available, info.error)
    """, env={"SIMNPU_DRIVER_VERSION_OVERRIDE": "2.0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("False driver version mismatch")


@pytest.fixture(scope="session")
def variant_backend(tmp_path_factory, npu_backend):
    """A chip without vendor kernels whose driver folder the tests control.

    Built once into a private folder (not installed): the tests put a real
    driver, no driver, or a driver missing symbols into its `lib/`.
    """
    root = tmp_path_factory.mktemp("variant")
    text = (ROOT / "specs" / "npu.yaml").read_text()
    text = text.replace("../generator/schema", str(ROOT / "generator" / "schema"))
    for old, new in VARIANT_SPEC_EDITS.items():
        assert old in text, old
        text = text.replace(old, new)
    for first, last in (("  # Other SDK releases", "\nkernels:\n"), ("\nkernels:\n", "\ndtypes:"),
                        ("\nops:\n", "\n# Ops the spec does not name")):
        text = text[:text.index(first)] + text[text.index(last):]  # no kernels, no ops: all on the CPU chain
    (root / "variant.yaml").write_text(text)
    result = torchfl_gen("build", str(root / "variant.yaml"), "--output", str(root / "pkg"), "--no-install")
    assert result.returncode == 0, result.stderr
    wheel = result.stdout.strip().splitlines()[-1]
    site = root / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    (root / "lib").mkdir()
    return root


def run_variant(root, code: str) -> subprocess.CompletedProcess:
    return run_python(f"""
        import torch, torch_fl_npuvariant
        torch_fl_npuvariant._register()
        {code}
    """, env={"PYTHONPATH": str(root / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})


def set_driver(root, library) -> None:
    target = root / "lib" / "libsimnpu_runtime.so"
    target.unlink(missing_ok=True)
    if library is not None:
        shutil.copy(library, target)


def test_variant_runs_on_its_cpu_chain(variant_backend):
    set_driver(variant_backend, ROOT / "simnpu" / "build" / "lib" / "libsimnpu_runtime.so")
    proc = run_variant(variant_backend, """
        x = torch.arange(6.0, device="npuvariant").reshape(2, 3)
        print((x * 2).sum().item(), x.device)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["30.0", "npuvariant:0"]


def test_missing_driver_library_is_named_with_dlerror(variant_backend):
    set_driver(variant_backend, None)
    proc = run_variant(variant_backend, "torch.ones(1, device='npuvariant')")
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert "cannot load driver library 'libsimnpu_runtime.so'" in error
    assert "cannot open shared object file" in error  # dlerror's own text
    assert str(variant_backend / "lib") in error and "variant.yaml" in error


def test_missing_driver_symbol_is_named(variant_backend, tmp_path):
    stub = tmp_path / "stub.c"
    stub.write_text("int simnpuDriverGetVersion(int* v) { *v = 2010; return 0; }\n")
    library = tmp_path / "libstub.so"
    cc = subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(stub)], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    set_driver(variant_backend, library)
    proc = run_variant(variant_backend, "torch.ones(1, device='npuvariant')")
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert "driver hook 'error_string': symbol 'simnpuGetErrorString' not found in" in error
    assert "libsimnpu_runtime.so" in error and "undefined symbol" in error and "variant.yaml" in error


def test_pinned_block_not_reused_before_its_async_copy_finished():
    """x.pin_memory().to(dev, non_blocking=True) on a temporary: the pinned block goes back to
    the cache at once, but must not be handed out (and overwritten) before the copy has run."""
    proc = run_python("""
        import torch
        torch.npu.synchronize()
        results, expected = [], []
        for i in range(200):
            src = torch.full((4096,), float(i))
            results.append(src.pin_memory().to("npu", non_blocking=True))  # temporary pinned block
            expected.append(src)
            scribble = torch.empty(4096).pin_memory()  # same size class: the freed block's candidate
            scribble.fill_(-1.0)
        torch.npu.synchronize()
        bad = [i for i, (r, e) in enumerate(zip(results, expected)) if not torch.equal(r.cpu(), e)]
        print("corrupted", len(bad))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "corrupted 0"


def test_random_op_on_the_cpu_path_draws_from_the_chip_generator(npu_backend):
    """poisson has no npu kernel and no Triton kernel: it runs on the CPU path, but must draw
    from the chip's generator (its state, its seed), not from the host's."""
    proc = run_python("""
        import json, torch, torch_fl
        rates = torch.full((1000,), 3.0, device="npu")
        torch.npu.manual_seed(123)
        host_before = torch.get_rng_state()
        state = torch.npu.get_rng_state()
        a = torch.poisson(rates).cpu()
        advanced = not torch.equal(torch.npu.get_rng_state(), state)
        torch.npu.set_rng_state(state)
        b = torch.poisson(rates).cpu()
        g = torch.Generator().manual_seed(123)  # the chip's generator state is the CPU generator's
        c = torch.poisson(torch.full((1000,), 3.0), generator=g)
        paths = torch_fl.fallback_stats().get("poisson", {})
        print(json.dumps({"replay": torch.equal(a, b), "like_cpu": torch.equal(a, c), "advanced": advanced,
                          "host_untouched": torch.equal(torch.get_rng_state(), host_before), "paths": paths}))
    """)
    assert proc.returncode == 0, proc.stderr
    r = last_json_line(proc.stdout)
    assert r["paths"].get("cpu") == 2
    assert r["replay"] and r["like_cpu"] and r["advanced"] and r["host_untouched"]


def test_importing_the_package_before_torch_registers_the_chip():
    """`import torch_fl_npu` first: torch's autoload calls back into the package while torch
    imports, so the package must be complete before it imports the runtime."""
    proc = run_python("import torch_fl_npu, torch; print(torch.zeros(2, device='npu').add(1).cpu().tolist())",
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[1.0, 1.0]"


def test_half_precision_batch_norm_trains_like_the_cpu(npu_backend):
    """bfloat16 batch norm through `_native_batch_norm_legit` (the op compiled and decomposed
    graphs call): the Triton forward saves float32 statistics, as torch's meta function and CUDA
    do, and the simulated SDK's backward kernel takes them (it failed on the device, "unspecified
    launch failure"). Output, statistics and gradients as the CPU's, within bfloat16's rounding."""
    import torch

    generator = torch.Generator().manual_seed(0)
    x, grad = (torch.randn(6, 4, 5, generator=generator).bfloat16() for _ in range(2))
    weight, bias = torch.rand(4, generator=generator).bfloat16() + 0.5, torch.randn(4, generator=generator).bfloat16()
    results = {}
    for device in ("cpu", "npu"):
        leaves = [t.detach().to(device).requires_grad_() for t in (x, weight, bias)]
        running = [torch.zeros(4, dtype=torch.bfloat16, device=device), torch.ones(4, dtype=torch.bfloat16, device=device)]
        out, mean, rstd = torch.ops.aten._native_batch_norm_legit(*leaves, *running, True, 0.1, 1e-5)
        out.backward(grad.to(device))
        results[device] = [t.detach().cpu().float() for t in (out, mean, rstd, *running)] + [t.grad.cpu().float()
                                                                                              for t in leaves]
    assert [t.dtype for t in results["npu"]] == [torch.float32] * 8
    for name, chip, cpu in zip(("out", "mean", "rstd", "running_mean", "running_var", "grad x", "grad weight",
                                "grad bias"), results["npu"], results["cpu"]):
        torch.testing.assert_close(chip, cpu, rtol=2e-2, atol=2e-2, msg=lambda m, name=name: f"{name}: {m}")
