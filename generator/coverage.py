"""`torchfl-gen coverage SPEC --script train.py -- args`: a script's aten ops and their paths.

The script runs in this process (runpy, as `__main__`, with sys.argv = [script, *args]) under
torch_fl.coverage's dispatch trace; the report adds what the spec declares for each op.
"""
from __future__ import annotations

import json
import runpy
import sys
from dataclasses import dataclass

from .matrix import declared_path, triton_ops
from .model import ChipSpec


class CoverageError(Exception):
    """No backend for the spec's chip in this environment."""


@dataclass
class SpecCoverage:
    spec: ChipSpec
    report: object  # torch_fl.coverage.CoverageReport

    def declared(self, op: str) -> str:
        return declared_path(self.spec, op, self._triton)

    def __post_init__(self):
        self._triton = triton_ops(self.spec)

    def table(self) -> str:
        return self.report.table(self.declared)

    def to_json(self) -> str:
        data = self.report.as_dict()
        data["spec"] = self.spec.source_display
        for row in data["ops"]:
            row["declared"] = self.declared(row["op"])
        return json.dumps(data, indent=1, sort_keys=True)


def run_script(spec: ChipSpec, script: str, args: list[str]):
    """(SpecCoverage, None) or (SpecCoverage of what ran, the script's exception text)."""
    import torch
    import torch_fl
    from torch_fl.coverage import CoverageMode

    info = torch_fl.init().get(spec.chip.name)
    if info is None or not info.available:
        why = info.error if info is not None else "not installed"
        raise CoverageError(f"chip '{spec.chip.name}' is not usable here ({why}); "
                            f"build it: torchfl-gen build {spec.source_display}")
    if torch._C._get_privateuse1_backend_name() != spec.chip.name:
        raise CoverageError(f"the PrivateUse1 backend here is '{torch._C._get_privateuse1_backend_name()}', "
                            f"not '{spec.chip.name}'")
    saved_argv = sys.argv
    sys.argv = [script, *args]
    error = None
    mode = CoverageMode()
    try:
        with mode:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            error = f"SystemExit({exit_.code!r})"
    except Exception as exc:  # the report of what ran is still useful
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv = saved_argv
    return SpecCoverage(spec, mode.report()), error
