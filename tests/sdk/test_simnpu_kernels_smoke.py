"""The SDK's standalone kernel smoke test: every kernel against ATen CPU, through a
minimal stand-in backend of the SDK's own (simnpu/tests/kernel_smoke.cpp), so a
kernel bug shows up here independently of the generated backend."""
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXE = ROOT / "simnpu" / "build" / "kernel_smoke"


def test_kernel_smoke():
    build = subprocess.run(["bash", "simnpu/build.sh"], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, SIMNPU_BUILD_TESTS="ON"), timeout=900)
    assert build.returncode == 0, build.stdout + build.stderr
    r = subprocess.run([str(EXE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
