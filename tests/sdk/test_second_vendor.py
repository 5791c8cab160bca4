"""The SDK's second vendor (simvpu): the same SDK under another vendor's names, loadable beside
simnpu in one process with no symbol of one binding to the other (docs/multichip.md)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "simnpu" / "build" / "lib"


@pytest.fixture(scope="module", autouse=True)
def built():
    if not (LIB / "libsimvpu_runtime.so").exists():
        env = dict(os.environ, SIMNPU_BUILD_KERNELS=os.environ.get("SIMNPU_BUILD_KERNELS", "OFF"))
        subprocess.run(["bash", str(ROOT / "simnpu" / "build.sh")], check=True, env=env)


BOTH = f"""
import ctypes
npu = ctypes.CDLL({str(LIB / 'libsimnpu_runtime.so')!r}, mode=ctypes.RTLD_GLOBAL)
vpu = ctypes.CDLL({str(LIB / 'libsimvpu_runtime.so')!r}, mode=ctypes.RTLD_GLOBAL)
def out(f, *args, kind=ctypes.c_int):
    value = kind()
    assert f(*args, ctypes.byref(value)) == 0
    return value.value
"""


def _run(code, **env):
    code = BOTH + textwrap.dedent(code)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SIMNPU_", "SIMVPU_"))}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()




def test_both_vendors_in_one_process_keep_their_own_devices_and_memory():
    version_npu, version_vpu, count_npu, count_vpu, total_vpu, foreign = _run("""
        print(out(npu.simnpuDriverGetVersion), out(vpu.simvpuDriverGetVersion))
        print(out(npu.simnpuGetDeviceCount), out(vpu.simvpuGetDeviceCount))
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        assert vpu.simvpuMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
        print(total.value)
        p = ctypes.c_void_p()
        assert vpu.simvpuMalloc(ctypes.byref(p), 1024) == 0
        device = ctypes.c_int()
        print(npu.simnpuPointerGetDevice(p, ctypes.byref(device)))  # not simnpu's memory
        assert vpu.simvpuPointerGetDevice(p, ctypes.byref(device)) == 0 and vpu.simvpuFree(p) == 0
    """)
    assert (version_npu, version_vpu) == ("2010", "3020")
    assert (count_npu, count_vpu) == ("2", "1")
    assert int(total_vpu) == 2 << 30
    assert foreign == "4"  # simnpuErrorInvalidDevicePointer


def test_second_vendor_reads_its_own_environment():
    counts = _run("print(out(npu.simnpuGetDeviceCount), out(vpu.simvpuGetDeviceCount))",
                  SIMVPU_DEVICE_COUNT="3")
    assert counts == ["2", "3"]


def test_second_vendor_exports_no_simnpu_symbol():
    for library in ("libsimvpu_runtime.so", "libsimvpu_kernels.so"):
        if not (LIB / library).exists():
            continue  # kernels need torch (SIMNPU_BUILD_KERNELS=OFF builds the runtimes only)
        symbols = subprocess.run(["nm", "-D", "--defined-only", "-C", str(LIB / library)], check=True,
                                 capture_output=True, text=True).stdout
        assert "simvpu" in symbols and "simnpu" not in symbols.lower(), library
