"""Checks of the names a spec gives to generated Python and C++: no keyword of the language
a name reaches, no C++ reserved identifier, and a chip name torch does not own already.

The schema's patterns (full-match) make each a well-formed identifier; this is what a
pattern cannot say. Which field reaches which language is written here, once.
"""
from __future__ import annotations

from ..errors import SpecError
from ..identifiers import cpp_keyword, cpp_reserved, python_keyword, torch_name_owner
from ..yaml_loader import YamlDocument
from ._common import get
from .chip import is_builtin_device_type


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    out: list[SpecError] = []
    native = get(data, "chip", "integration") == "native"
    name = get(data, "chip", "name")
    # The chip's name: `torch.<name>`, `import torch_fl_<name>`, the generated tests' code.
    if isinstance(name, str) and name:
        if python_keyword(name):
            out.append(doc.error(("chip", "name"), f"'{name}' is a Python keyword; the chip is torch.{name} "
                                 "in Python", hint="choose another name"))
        elif not native and not is_builtin_device_type(name) and (owner := torch_name_owner(name)) is not None:
            out.append(doc.error(("chip", "name"), f"'{name}' is already a name of torch's ({owner}): torch "
                                 f"refuses a backend of that name (it adds torch.{name}, Tensor.{name}(), Tensor.is_{name})",
                                 hint="choose a name torch does not use itself"))
    # C++ identifiers of the generated code: the kernels' namespace and names.
    namespace = get(data, "kernels", "namespace")
    if isinstance(namespace, str):
        for part in namespace.split("::"):
            if why := _cpp_problem(part):
                out.append(doc.error(("kernels", "namespace"), f"'{part}' in namespace '{namespace}' {why}"))
                break
    for prefix, ops in _op_tables(data):
        for op, entry in ops.items():
            kernel = entry.get("kernel") if isinstance(entry, dict) else None
            if isinstance(kernel, str) and (why := _cpp_problem(kernel)):
                out.append(doc.error((*prefix, op, "kernel"), f"kernel name '{kernel}' {why}"))
    # C symbols of the driver, looked up by dlsym: a C function cannot take a keyword's name.
    hooks = get(data, "driver", "hooks")
    if isinstance(hooks, dict):
        for hook, symbol in hooks.items():
            if isinstance(symbol, str) and cpp_keyword(symbol):
                out.append(doc.error(("driver", "hooks", hook), f"symbol '{symbol}' is a C/C++ keyword; no C "
                                     "function has that name"))
    return out


def _cpp_problem(name: str) -> str | None:
    if cpp_keyword(name):
        return "is a C++ keyword"
    if cpp_reserved(name):
        return "is reserved for the C++ implementation (a double underscore, or '_' and a capital)"
    return None


def _op_tables(data: dict):
    """(path, ops) of the spec's `ops` and of each driver overlay's."""
    ops = data.get("ops")
    if isinstance(ops, dict):
        yield ("ops",), ops
    versions = get(data, "driver", "versions")
    if isinstance(versions, dict):
        for version, overlay in versions.items():
            overlay_ops = overlay.get("ops") if isinstance(overlay, dict) else None
            if isinstance(overlay_ops, dict):
                yield ("driver", "versions", version, "ops"), overlay_ops
