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
