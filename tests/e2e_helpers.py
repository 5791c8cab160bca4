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
