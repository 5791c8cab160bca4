"""`torchfl-gen coverage SPEC --script train.py -- args`: a script's aten ops and their paths
(with --compile: the graph breaks of what it compiles, and which the chip caused).

The trace is the runtime's (`python -m torch_fl coverage`), run in a process of its own: the
generator imports no part of the runtime. Each op's declared path comes from the routing table
of the chip's installed build, the table its dispatch follows.
"""
from __future__ import annotations

import subprocess
import sys

from .model import ChipSpec


def runtime_command(spec: ChipSpec, script: str, args: list[str], as_json: bool, compile: bool = False) -> list[str]:
    return [sys.executable, "-m", "torch_fl", "coverage", "--chip", spec.chip.name, "--script", script,
            "--spec", spec.source_display, *(["--json"] if as_json else []), *(["--compile"] if compile else []),
            "--", *args]


def run(spec: ChipSpec, script: str, args: list[str], as_json: bool, compile: bool = False) -> int:
    """Run the trace, its output passed through; its exit status (0, or torch_fl.coverage's 6)."""
    return subprocess.run(runtime_command(spec, script, args, as_json, compile), check=False).returncode
