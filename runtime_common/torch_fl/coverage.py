"""Which aten ops a workload calls, and the path each takes on the generated chip.

    report = torch_fl.coverage.trace(fn, *args)            # any callable
    report = torch_fl.coverage.trace_model(model, inputs)  # one forward + backward step
    print(report.table()); report.to_json(); report.ops    # rows, CPU fallbacks first
    python -m torch_fl coverage --chip npu --script train.py -- ARGS   (`torchfl-gen coverage`)
    python -m torch_fl coverage --chip npu --compile --script train.py  (its torch.compile graph breaks)

A TorchDispatchMode sees every aten op after autograd and the implicit decompositions; around
each call the chip's path counters (fallback_stats) are diffed, so each traced op gets the
backend ops that ran under it and where: "vendor" (a vendor kernel), "triton" (the shared
Triton kernels), "cpu" (the boxed CPU fallback), or "composite" (no counter moved: views,
allocation and other ops the backend runtime serves itself, or a decomposition into such ops).
When several paths ran under one op, the slowest wins: cpu, then triton, then vendor.

With --compile the script runs untraced (a dispatch mode would change what Dynamo traces) and
the report is its graph breaks: each reason Dynamo gave, how often, and whether the chip caused
it: its reason names the chip's code (torch_fl, the chip's package or C++ module, torch.<chip>).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import runpy
import sys
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


@dataclass
class GraphBreak:
    reason: str          # Dynamo's, its first line and the one explaining it
    count: int
    chip: bool           # the reason names the chip's code


@dataclass
class CompileReport:
    chip: str
    graphs: int          # graphs Dynamo compiled
    breaks: list[GraphBreak]

    @property
    def chip_breaks(self) -> int:
        return sum(b.count for b in self.breaks if b.chip)

    def as_dict(self) -> dict:
        return {"chip": self.chip, "graphs": self.graphs, "graph_breaks": sum(b.count for b in self.breaks),
                "chip_graph_breaks": self.chip_breaks,
                "breaks": [{"reason": b.reason, "count": b.count, "chip": b.chip} for b in self.breaks]}

    def table(self) -> str:
        lines = [f"{b.count:>5}  {'chip ' if b.chip else 'other'}  {b.reason}" for b in self.breaks]
        total = sum(b.count for b in self.breaks)
        return "\n".join(["count  cause  graph break reason", "-" * 60, *lines,
                          f"\n{self.graphs} graph(s) compiled on {self.chip}; {total} graph break(s), "
                          f"{self.chip_breaks} caused by the chip"])


def _brief(reason: str) -> str:
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    return " / ".join(lines[:2])


def caused_by_chip(reason: str, chip: str) -> bool:
    """A break is the chip's when its reason names the chip's code: the runtime (torch_fl), the
    chip's package or C++ module (torch_fl_<chip>), or its device module (torch.<chip>.)."""
    return any(mark in reason for mark in ("torch_fl", f"torch.{chip}."))


def compile_report(chip: str) -> CompileReport:
    """Dynamo's graph breaks so far in this process (its counters), attributed."""
    from torch._dynamo.utils import counters

    merged: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        merged[_brief(reason)] = merged.get(_brief(reason), 0) + count
    breaks = sorted((GraphBreak(reason, count, caused_by_chip(reason, chip)) for reason, count in merged.items()),
                    key=lambda b: (not b.chip, -b.count, b.reason))
    return CompileReport(chip, int(counters["stats"]["unique_graphs"]), breaks)


def _run_as_main(script: str, args: list[str], mode=None) -> str | None:
    """Run `script` as __main__ (sys.argv = [script, *args]; under `mode` if given): its failure,
    or None."""
    saved_argv = sys.argv
    sys.argv = [script, *args]
    try:
        with mode if mode is not None else contextlib.nullcontext():
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            return f"SystemExit({exit_.code!r})"
    except Exception as exc:  # the report of what ran is still useful
        return f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv = saved_argv
    return None


EXIT_FAILED = 6  # the script failed or the chip is unusable (= torchfl-gen's EXIT_COVERAGE)


class CoverageUnavailable(RuntimeError):
    """The chip's backend is not usable in this process."""


def run_script(chip: str, script: str, args: list[str]) -> tuple[CoverageReport, str | None, object]:
    """Run `script` as __main__ (sys.argv = [script, *args]) under the trace: the report of what
    ran, the script's failure (or None) and the chip's spec module (its routing table)."""
    info = _usable(chip)
    spec = importlib.import_module(f"{info.package}.spec")
    mode = CoverageMode()
    error = _run_as_main(script, args, mode)
    return mode.report(), error, spec


def _usable(chip: str):
    """The chip's init info, or CoverageUnavailable saying why not."""
    import torch_fl

    info = torch_fl.init().get(chip)
    if info is None or not info.available:
        why = info.error if info is not None else "not installed"
        raise CoverageUnavailable(f"chip '{chip}' is not usable here ({why})")
    if torch._C._get_privateuse1_backend_name() != chip:
        raise CoverageUnavailable(f"the PrivateUse1 backend here is "
                                  f"'{torch._C._get_privateuse1_backend_name()}', not '{chip}'")
    return info


def run_compile_script(chip: str, script: str, args: list[str]) -> tuple[CompileReport, str | None]:
    """Run `script` as __main__, untraced: the graph breaks of what it compiled, and its failure."""
    _usable(chip)
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    error = _run_as_main(script, args)
    return compile_report(chip), error


def main(argv: list[str] | None = None) -> int:
    """`python -m torch_fl coverage --chip NAME --script PATH [--json] [-- ARGS]`: the table (or
    JSON) of the script's aten ops, each with the path its chip's routing table declares."""
    from . import routes

    parser = argparse.ArgumentParser(prog="python -m torch_fl coverage", description=main.__doc__.splitlines()[0])
    parser.add_argument("--chip", required=True, help="the chip (device type) to trace on")
    parser.add_argument("--script", required=True, help="the script to run, as __main__")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--spec", help="the spec's name for the JSON report (default: the build's)")
    parser.add_argument("--compile", action="store_true",
                        help="report the graph breaks of what the script compiles (torch.compile) instead")
    parser.add_argument("script_args", nargs="*", help="arguments for the script (after --)")
    args = parser.parse_args(argv)
    if args.compile:
        return _main_compile(args)
    try:
        report, error, spec = run_script(args.chip, args.script, args.script_args)
    except CoverageUnavailable as failure:
        print(f"error: {failure}", file=sys.stderr)
        return EXIT_FAILED

    def declared(op: str) -> str:
        return routes.route(spec, op).path

    if args.json:
        data = report.as_dict()
        data["spec"] = args.spec or spec.SPEC_SOURCE
        for row in data["ops"]:
            row["declared"] = declared(row["op"])
        print(json.dumps(data, indent=1, sort_keys=True))
    else:
        print(report.table(declared))
    if error is not None:
        print(f"error: {args.script} failed: {error}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _main_compile(args) -> int:
    try:
        report, error = run_compile_script(args.chip, args.script, args.script_args)
    except CoverageUnavailable as failure:
        print(f"error: {failure}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(report.as_dict(), indent=1, sort_keys=True))
    else:
        print(report.table())
    if error is not None:
        print(f"error: {args.script} failed: {error}", file=sys.stderr)
        return EXIT_FAILED
    return 0
