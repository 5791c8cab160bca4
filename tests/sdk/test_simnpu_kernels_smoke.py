"""Runs the SDK's standalone kernel smoke test (every kernel vs ATen CPU) if it is built.

Build it with: SIMNPU_BUILD_TESTS=ON bash simnpu/build.sh
"""
import subprocess
from pathlib import Path

import pytest

EXE = Path(__file__).resolve().parents[2] / "simnpu" / "build" / "kernel_smoke"


@pytest.mark.skipif(not EXE.exists(), reason="kernel_smoke not built (SIMNPU_BUILD_TESTS=ON bash simnpu/build.sh)")
def test_kernel_smoke():
    r = subprocess.run([str(EXE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
