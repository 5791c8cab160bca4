"""specs/hip_pu1.yaml: AMD GPUs through the HIP runtime as a generated chip, checked without
an AMD GPU against Debian's HIP headers and library (libamdhip64-dev 5.2; .ci/run installs it).

1. Every hook symbol, called with the hook ABI's argument types, compiles against the HIP
   headers (the function exists, takes that many arguments, returns a status or a message)
   and links against libamdhip64.
2. The generated backend compiles and, loaded in a fresh process, opens libamdhip64, binds
   all hooks, reads HIP 5.2 from hipRuntimeGetVersion and reports the missing GPU clearly.
What a GPU would show (kernels, copies, streams on a device) is out of reach here: docs/hip.md.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_helpers import ROOT, run_python, torchfl_gen
from torchfl_gen.hook_abi import HOOK_SIGNATURES
from torchfl_gen.spec import load_spec
from torch_fl import env

HIP_HEADER = Path("/usr/include/hip/hip_runtime_api.h")
pytestmark = pytest.mark.skipif(
    not HIP_HEADER.exists() and env.get("REQUIRE_HIP") != "1",
    reason="Debian's HIP runtime is not installed (apt-get install libamdhip64-dev; CI sets TORCH_FL_REQUIRE_HIP=1)")

SPEC = load_spec(ROOT / "specs" / "hip_pu1.yaml")


def _call(hook: str, symbol: str) -> str:
    """A C statement calling `symbol` with zero values of the hook ABI's parameter types."""
    ret, params = HOOK_SIGNATURES[hook]
    args = ", ".join(f"({ctype})0" for ctype, _ in params)
    return f"  {{ {ret} r = {symbol}({args}); (void)r; }}  /* {hook} */"


def test_every_hook_compiles_against_the_hip_headers_and_links(tmp_path):
    source = tmp_path / "hooks.c"
    body = "\n".join(_call(hook, symbol) for hook, symbol in SPEC.driver.hooks)
    source.write_text("#include <hip/hip_runtime_api.h>\n\n"
                      "/* never run: it only has to compile and link */\n"
                      f"void torchfl_hook_calls(void) {{\n{body}\n}}\n\n"
                      "int main(int argc, char** argv) {\n  (void)argv;\n"
                      "  if (argc > 99) torchfl_hook_calls();\n  return 0;\n}\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    result = subprocess.run([cc, "-D__HIP_PLATFORM_AMD__", "-Wno-deprecated-declarations", "-Werror=implicit-function-declaration",
                             str(source), "-lamdhip64", "-o", str(tmp_path / "hooks")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert len(SPEC.driver.hooks) == len(HOOK_SIGNATURES)
    assert subprocess.run([str(tmp_path / "hooks")]).returncode == 0


def test_a_wrong_arity_hook_fails_that_compile(tmp_path):
    """The check above can fail: hipHostMalloc has a flags argument the host_malloc hook has not."""
    source = tmp_path / "bad.c"
    source.write_text("#include <hip/hip_runtime_api.h>\nvoid f(void) {\n" + _call("host_malloc", "hipHostMalloc")
                      + "\n}\n")
    result = subprocess.run([shutil.which("cc") or "gcc", "-D__HIP_PLATFORM_AMD__", "-c", str(source), "-o",
                             str(tmp_path / "bad.o")], capture_output=True, text=True)
    assert result.returncode != 0 and "too few arguments" in result.stderr, result.stderr


@pytest.fixture(scope="module")
def hip_pu1_backend(tmp_path_factory):
    """specs/hip_pu1.yaml built into a wheel and unpacked into a private folder (installing it
    beside the npu backend would give a process two PrivateUse1 backends)."""
    root = tmp_path_factory.mktemp("hip_pu1")
    result = torchfl_gen("build", "specs/hip_pu1.yaml", "--output", str(root / "pkg"), "--no-install")
    assert result.returncode == 0, result.stderr
    wheel = result.stdout.strip().splitlines()[-1]
    assert "torch_fl_hip_pu-0.1.0+driver5.2" in wheel
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(root / "site"),
                          wheel], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return root


def test_backend_binds_the_hip_runtime_and_reports_no_gpu(hip_pu1_backend):
    proc = run_python("""
        import json, torch, torch_fl_hip_pu as backend
        backend._register()
        out = {"error": backend.load_error(), "device_count": torch.hip_pu.device_count()}
        if out["error"] is None:
            out["libraries"] = list(backend._C._driver_libraries())
            out["version"] = backend._C._driver_version()
        try:
            torch.ones(2, device="hip_pu")
            out["tensor"] = "made"
        except Exception as e:
            out["tensor"] = f"{type(e).__name__}: {e}"
        print(json.dumps(out))
    """, env={"PYTHONPATH": str(hip_pu1_backend / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is None, out
    assert any(lib.endswith("libamdhip64.so.5") for lib in out["libraries"]), out
    assert out["version"] // 100_000 == 502, out  # HIP 5.2.x: every hook bound, the version accepted
    assert out["device_count"] == 0, out
    assert "no hip_pu device is available: the driver reports hipErrorNoDevice" in out["tensor"], out
