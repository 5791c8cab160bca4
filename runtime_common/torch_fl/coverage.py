"""Which aten ops a workload calls, and the path each takes on the generated chip.

    report = torch_fl.coverage.trace(fn, *args)            # any callable
    report = torch_fl.coverage.trace_model(model, inputs)  # one forward + backward step
    print(report.table()); report.to_json(); report.ops    # rows, CPU fallbacks first

A TorchDispatchMode sees every aten op after autograd and the implicit decompositions; around
each call the chip's path counters (fallback_stats) are diffed, so each traced op gets the
backend ops that ran under it and where: "vendor" (a vendor kernel), "triton" (the shared
Triton kernels), "cpu" (the boxed CPU fallback), or "composite" (no counter moved: views,
allocation and other ops the backend runtime serves itself, or a decomposition into such ops).
When several paths ran under one op, the slowest wins: cpu, then triton, then vendor.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._api import _current_runtime

PATHS = ("cpu", "triton", "vendor", "composite")
_RANK = {p: i for i, p in enumerate(PATHS)}


def op_name(func) -> str:
    """aten op as fallback_stats names it: "add.Tensor", "relu" (the default overload bare)."""
    name = func._schema.name.split("::", 1)[-1]
    overload = func._schema.overload_name
    return f"{name}.{overload}" if overload else name


@dataclass
class OpUse:
    op: str
    calls: int = 0
    path: str = "composite"
    backend: dict[str, dict[str, int]] = field(default_factory=dict)  # backend op -> path -> calls

    def as_dict(self) -> dict:
        return {"op": self.op, "calls": self.calls, "path": self.path,
                "backend": {op: dict(sorted(p.items())) for op, p in sorted(self.backend.items())}}


@dataclass
class CoverageReport:
    chip: str
    ops: list[OpUse]

    def by_path(self) -> dict[str, int]:
        counts = {p: 0 for p in PATHS}
        for use in self.ops:
            counts[use.path] += 1
        return counts

    def as_dict(self) -> dict:
        return {"chip": self.chip, "summary": self.by_path(), "ops": [u.as_dict() for u in self.ops]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, sort_keys=True)

    def table(self, declared=None) -> str:
        """A text table; `declared(op) -> str` adds what the spec declares for each op."""
        rows = [("aten op", "calls", "path") + (("declared",) if declared else ()) + ("backend ops (path)",)]
        for use in self.ops:
            backend = ", ".join(f"{op} ({'/'.join(sorted(p))})" for op, p in sorted(use.backend.items()))
            rows.append((use.op, str(use.calls), use.path) + ((declared(use.op),) if declared else ())
                        + (backend or "-",))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
        lines.insert(1, "-" * len(lines[0]))
        summary = ", ".join(f"{n} {p}" for p, n in self.by_path().items())
        lines.append(f"\n{len(self.ops)} aten ops on {self.chip}: {summary}")
        return "\n".join(lines)


def _diff(after: dict, before: dict) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for op, paths in after.items():
        for path, calls in paths.items():
            delta = calls - before.get(op, {}).get(path, 0)
            if delta > 0:
                out.setdefault(op, {})[path] = delta
    return out


def _worst(paths) -> str:
    return min(paths, key=lambda p: _RANK.get(p, len(PATHS))) if paths else "composite"


class CoverageMode(TorchDispatchMode):
    """Counts aten ops and attributes the chip's path counters to each."""

    def __init__(self):
        super().__init__()
        runtime = _current_runtime()
        if runtime is None:
            raise RuntimeError("torch_fl.coverage needs a generated chip backend (torchfl-gen build SPEC)")
        self._stats = runtime.fallback_stats
        self.uses: dict[str, OpUse] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = self._stats()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            moved = _diff(self._stats(), before)
            use = self.uses.setdefault(op_name(func), OpUse(op_name(func)))
            use.calls += 1
            for op, paths in moved.items():
                mine = use.backend.setdefault(op, {})
                for path, calls in paths.items():
                    mine[path] = mine.get(path, 0) + calls
            use.path = _worst({p for paths in use.backend.values() for p in paths})

    def report(self) -> CoverageReport:
        ops = sorted(self.uses.values(), key=lambda u: (_RANK.get(u.path, 9), -u.calls, u.op))
        return CoverageReport(torch._C._get_privateuse1_backend_name(), ops)


def trace(fn, *args, **kwargs) -> CoverageReport:
    """Run fn(*args, **kwargs) under the trace; the report of every aten op it called."""
    with CoverageMode() as mode:
        fn(*args, **kwargs)
    return mode.report()


def _sum_outputs(out):
    from torch.utils import _pytree as pytree

    parts = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not parts:
        return None
    total = parts[0].sum()
    for t in parts[1:]:
        total = total + t.sum()
    return total


def trace_model(model, inputs) -> CoverageReport:
    """One training step's ops: forward of model(*inputs), then backward of the sum of its outputs."""
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)

    def step():
        loss = _sum_outputs(model(*inputs))
        if loss is not None:
            loss.backward()

    return trace(step)
