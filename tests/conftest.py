import sys
from pathlib import Path

# Make tests/spec_helpers.py importable regardless of pytest's rootdir/import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import subprocess

import pytest
import torch

from slow_files_first import pytest_xdist_make_scheduler  # noqa: F401  (a hook: the workers' file order)

# The simulated library's full dtype table replaced by NCCL's codes (driverless_chip).
NCCL_DTYPE_TABLE = {
    """    dtypes: {int8: 0, uint8: 1, int32: 2, int64: 4, float16: 6, float32: 7, float64: 8, bfloat16: 9,
             bool: 10, int16: 11, complex64: 12, complex128: 13}""":
    "    dtypes: {int8: 0, uint8: 1, int32: 2, int64: 4, float16: 6, float32: 7, float64: 8, bfloat16: 9, bool: 1}",
}


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


@pytest.fixture(scope="session")
def driverless_chip(tmp_path_factory):
    """The end-to-end suite's variant chip (no kernels, driver looked up only in its own lib/),
    built here under the shared build lock, with that folder left empty: its driver is missing.
    (No environment variable can hide the installed npu's driver: its kernel library links it.)
    Its collective library's dtype table is NCCL's (no int16, no complex, bool as uint8): the
    backend's way with dtypes a library lacks is tested on it (tests/runtime/test_collectives.py)."""
    from e2e_helpers import ROOT, VARIANT_SPEC_EDITS

    root = tmp_path_factory.mktemp("driverless")
    text = (ROOT / "specs" / "npu.yaml").read_text().replace("../generator/schema", str(ROOT / "generator" / "schema"))
    for old, new in {**VARIANT_SPEC_EDITS, **NCCL_DTYPE_TABLE}.items():
        assert old in text, old
        text = text.replace(old, new)
    for first, last in (("  # Other SDK releases", "\nkernels:\n"), ("\nkernels:\n", "\ndtypes:"),
                        ("\nops:\n", "\n# Ops the spec does not name")):
        text = text[:text.index(first)] + text[text.index(last):]
    (root / "variant.yaml").write_text(text)
    build = subprocess.run(["flock", "/tmp/torchfl-build.lock", sys.executable, "-m", "torchfl_gen", "build",
                            str(root / "variant.yaml"), "--output", str(root / "pkg"), "--no-install"],
                           cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(root / "site"),
                          build.stdout.strip().splitlines()[-1]], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    (root / "lib").mkdir()
    return root
