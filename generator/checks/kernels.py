"""Checks of the `kernels` section: its sources exist, and it is there when an op names a kernel."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import SpecError
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict, base: Path | None) -> list[SpecError]:
    """``base``: the spec's folder, which source paths are relative to (None: not checked)."""
    out: list[SpecError] = []
    kernels = data.get("kernels")
    if isinstance(kernels, dict) and isinstance(kernels.get("sources"), list) and base is not None:
        for i, src in enumerate(kernels["sources"]):
            if (isinstance(src, str) and re.fullmatch(r"[^\x00\n\r]+\.(cpp|cc|cxx)", src)
                    and not Path(os.path.normpath(base / src)).is_file()):
                out.append(doc.error(("kernels", "sources", i), f"kernel source '{src}' does not exist "
                                     f"(looked in {base / src})"))

    first_kernel_path = _first_kernel_path(data.get("ops"))
    if first_kernel_path is not None and "kernels" not in data:
        out.append(doc.error(first_kernel_path, "op has a kernel but the spec has no 'kernels' section",
                             at="key", hint="add a top-level 'kernels' section naming the vendor kernel library"))
    return out


def _first_kernel_path(ops) -> tuple | None:
    """Where the first op of `ops` with a kernel names it; one error for the spec, not one per op.

    Skips the entries the op checks skip: a malformed op name is the schema's to report."""
    if not isinstance(ops, dict):
        return None
    op_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")
    for op, entry in ops.items():
        if not op_re.fullmatch(op) or not isinstance(entry, dict):
            continue
        if entry.get("kernel") is not None:
            return ("ops", op, "kernel")
    return None
