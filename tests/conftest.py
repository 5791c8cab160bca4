import sys
from pathlib import Path

# Make tests/spec_helpers.py importable regardless of pytest's rootdir/import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest
import torch


@pytest.fixture(autouse=True)
def _no_default_device_leaks():
    """A test that leaves torch.set_default_device active changes every later test
    (each Tensor method then goes through a TorchFunctionMode): fail the test that leaks."""
    yield
    context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    if context is not None:
        torch.set_default_device(None)
        pytest.fail("the test left torch.set_default_device active; restore it with torch.set_default_device(None)")


@pytest.fixture(scope="session")
def npu_backend():
    """The installed npu backend, (re)built if its inputs changed (a no-op otherwise)."""
    import subprocess

    from e2e_helpers import ROOT, torchfl_gen

    sdk = subprocess.run(["bash", "simnpu/build.sh"], cwd=ROOT, capture_output=True, text=True)
    assert sdk.returncode == 0, sdk.stdout + sdk.stderr
    result = torchfl_gen("build", "specs/npu.yaml")
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="session")
def native_packages():
    """The native chips' packages (specs/cuda.yaml, specs/hip.yaml) installed: pure Python, seconds."""
    from e2e_helpers import torchfl_gen

    from torch_fl import chips

    for spec in ("specs/cuda.yaml", "specs/hip.yaml"):
        result = torchfl_gen("build", spec)
        assert result.returncode == 0, result.stderr
    chips._spec_module.cache_clear()
    return sorted(chips.native_chips())
