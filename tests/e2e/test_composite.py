"""A composite chip (specs/hybrid.yaml): the simulated NPU (vendor simnpu, two devices) and the
second vendor's VPU (simvpu, one device) behind one device type, in one process.

Built for real and installed into a private folder (one PrivateUse1 backend per process), then
its generated suite (torch_fl.testing.composite: devices, dtypes, routes, copies, a split model
against the CPU, the selector) and this composite's own facts, and the seed's section 5.1
script (examples/hybrid_two_chips.py).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from e2e_helpers import ROOT, run_python, torchfl_gen


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory, npu_backend):
    root = tmp_path_factory.mktemp("hybrid")
    result = torchfl_gen("build", "specs/hybrid.yaml", "--output", str(root / "pkg"), "--no-install")
    assert result.returncode == 0, result.stderr
    wheel = result.stdout.strip().splitlines()[-1]
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(root / "site"),
                          wheel], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return root


def _env(root):
    return {"PYTHONPATH": str(root / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def test_generated_suite(hybrid):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           str(hybrid / "pkg" / "tests")], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **_env(hybrid)}, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert re.search(r"\b6 passed", proc.stdout), proc.stdout[-2000:]


def test_devices_drivers_and_errors_of_the_two_vendors(hybrid):
    proc = run_python("""
        import json, torch, torch_fl_hybrid
        torch_fl_hybrid._register()
        m = torch.hybrid
        out = {"count": m.device_count(), "totals": [m.mem_get_info(i)[1] for i in range(m.device_count())],
               "members": [torch_fl_hybrid._C._member_of(i) for i in range(3)],
               "amp": [str(d) for d in m.get_amp_supported_dtype()]}
        try:
            torch.ones(2, dtype=torch.float64, device="hybrid:2")
        except NotImplementedError as e:
            out["refused"] = str(e)
        x = torch.ones(3, device="hybrid:0", dtype=torch.float64)  # npu takes float64
        out["float64"] = x.sum().item()
        print(json.dumps(out))
    """, env=_env(hybrid))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["count"] == 3 and out["members"] == [0, 0, 1]
    assert out["totals"] == [8 << 30, 8 << 30, 2 << 30]
    assert out["amp"] == ["torch.float16"]  # the one dtype both chips autocast to
    assert "chip 'vpu' (hybrid:2 of the composite 'hybrid') does not support dtype torch.float64" in out["refused"]
    # The package names its specs relative to the folder it shares with them (where it was built).
    assert re.search(r"\(spec \S*\bvpu\.yaml, lists dtypes: float32, float16, int8", out["refused"]), out["refused"]
    assert out["float64"] == 3.0


def test_a_member_driver_that_cannot_load_is_named(hybrid, tmp_path):
    # The second vendor's SDK is not where the build found it: the error names the member.
    proc = run_python("""
        import torch, torch_fl_hybrid
        torch_fl_hybrid._register()
        try:
            torch.hybrid._lazy_init()
        except RuntimeError as e:
            print("ERROR", e)
    """, env={**_env(hybrid), "SIMVPU_HOME": str(tmp_path), "SIMVPU_FAULTS": "bogus"})
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("ERROR"))
    assert re.search(r"chip 'vpu', spec \S*\bvpu\.yaml\)", line) and "SIMVPU_FAULTS: 'bogus'" in line, line


def test_the_seed_hybrid_script_trains_on_two_chips(hybrid):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "hybrid_two_chips.py"), "--steps", "6"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **_env(hybrid)}, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["embedding"] == "hybrid:2" and result["transformer"] == "hybrid:0"
    assert result["max_loss_difference"] < 1e-4 and result["losses"][-1] < result["losses"][0]
