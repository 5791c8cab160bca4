"""Helpers for end-to-end tests: build backends and run Python in fresh processes.

Each check runs in its own interpreter because a process can hold one
PrivateUse1 backend only, and driver settings are read from the environment.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port no one listens on now, for a torchrun rendezvous: a fixed port collides with
    whatever else runs on the machine (another test run, a user's job)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_python(code: str, env: dict | None = None, timeout: int = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def torchfl_gen(*args: str, timeout: int = 1800, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchfl_gen", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def last_json_line(output: str) -> dict:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output:\n{output}")


def record_figures(test: str, **figures) -> None:
    """Appends a reliability test's figures (cases tried, faults survived, leaks found) to
    .torchfl/reliability.jsonl, from which docs/reliability.md quotes them."""
    import datetime

    path = ROOT / ".torchfl" / "reliability.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"test": test, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              **figures}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


# specs/npu.yaml edited into a chip without vendor kernels whose driver folder a test controls
# (test_e2e_npu's variant backend; the doctor's tests build the same variant).
VARIANT_SPEC_EDITS = {
    "name: npu\n": "name: npuvariant\n",
    "search_paths: [../simnpu/build/lib]": "search_paths: [lib]",
    "  home_env: SIMNPU_HOME\n": "",
}


# ------------------------------------------ the C++ replays of Triton launches ---

def npu_backend_built() -> bool:
    """Whether the simulated NPU's backend is installed and makes a tensor."""
    proc = run_python("import torch_fl_npu, torch; torch.zeros(1, device='npu')", timeout=120)
    return proc.returncode == 0


def compile_stand_in_driver(folder: Path, source: str) -> Path:
    """A stand-in `libcuda.so.1` compiled from C `source` into `folder` (the replay tests put
    it first on LD_LIBRARY_PATH); returns the folder."""
    (folder / "libcuda.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(folder / "libcuda.so.1"), str(folder / "libcuda.c"),
                    "-ldl"], check=True)
    return folder


def run_with_stand_in_driver(script: str, driver: Path) -> dict:
    """`script` in a fresh process on the simulated NPU with the stand-in driver in `driver`
    (its folder also in STAND_IN_DIR); the last JSON line it prints."""
    assert npu_backend_built(), "build the npu backend first (scripts/quickstart.sh)"
    library_path = os.pathsep.join(p for p in (str(driver), os.environ.get("LD_LIBRARY_PATH")) if p)
    proc = run_python(script, env={"LD_LIBRARY_PATH": library_path, "STAND_IN_DIR": str(driver)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return last_json_line(proc.stdout)


def nvgpu_backend():
    """The nvgpu backend registered beside CUDA (torch_fl.coexistence), or None without one or
    without a GPU."""
    try:
        import torch_fl_nvgpu
    except ImportError:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch_fl_nvgpu._register()
    return torch_fl_nvgpu
