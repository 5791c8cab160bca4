"""Checks of the `native` section: it belongs to native chips only, and its monitor command
runs the vendor's read-only query and nothing else.

What a native chip may not declare elsewhere is checked with `chip.integration` (`chip.py`).
"""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument
from ._common import get

# native.monitor.parser -> (the one program whose output it reads, the options that program
# may be run with). An option's kind: "=" takes its value as `--opt=value`, " " takes one or
# more values as the following arguments, "" takes none. Only read-only queries: nvidia-smi
# and rocm-smi also reset GPUs and set clocks, fans and power limits, and a spec is untrusted.
# torch_fl/monitor.py holds the same table (the runtime refuses a command outside it too);
# tests/generator/test_spec_hostile.py keeps the two equal.
MONITOR_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "nvidia-smi-csv": ("nvidia-smi", {"--query-gpu": "=", "--format": "=", "--id": "=", "-i": " "}),
    "rocm-smi-json": ("rocm-smi", {"--showuse": "", "--showmemuse": "", "--showmeminfo": " ", "--json": "",
                                   "-d": " ", "--device": " "}),
}


def monitor_command_problem(parser: str, command: list) -> tuple[int, str] | None:
    """(index of the first argument refused, why) for a monitor command outside MONITOR_TOOLS."""
    tool = MONITOR_TOOLS.get(parser)
    if tool is None or not command or not all(isinstance(a, str) for a in command):
        return None  # reported by the schema
    program, options = tool
    if command[0] != program:
        return 0, f"the monitor program must be {program} (the tool parser {parser} reads), not '{command[0]}'"
    values_allowed = False
    for i, arg in enumerate(command[1:], 1):
        if arg.startswith("-"):
            option, eq, _ = arg.partition("=")
            kind = options.get(option)
            if kind is None:
                return i, (f"'{option}' is not an option {program} may be run with here (allowed: "
                           + ", ".join(options) + ")")
            if kind == "=" and not eq:
                return i, f"'{option}' takes its value as {option}=VALUE"
            if kind != "=" and eq:
                return i, f"'{option}' takes no '=VALUE'"
            values_allowed = kind == " "
        elif not values_allowed:
            return i, f"'{arg}' follows no option that takes a value"
    return None


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """A `native` section in a spec that does not say `chip.integration: native`; a monitor
    command other than the parser's tool with read-only options."""
    out: list[SpecError] = []
    if "native" in data and get(data, "chip", "integration") != "native":
        out.append(doc.error(("native",), "'native' applies only to chip.integration: native", at="key"))
    command, parser = get(data, "native", "monitor", "command"), get(data, "native", "monitor", "parser")
    if isinstance(command, list) and isinstance(parser, str):
        problem = monitor_command_problem(parser, command)
        if problem is not None:
            index, why = problem
            out.append(doc.error(("native", "monitor", "command", index), why,
                                 hint="the monitor runs the vendor's query tool without a shell; see "
                                      "specs/cuda.yaml and specs/hip.yaml"))
    return out
