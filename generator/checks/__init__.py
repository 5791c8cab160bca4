"""The semantic checks of a chip spec: what its JSON Schema cannot express.

One module per spec section, each run through its `errors(doc, data, ...)`. They run on any
document the YAML loader accepted, valid against the schema or not, so every check
skips what is malformed (the schema reports that) instead of failing on it.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import SpecError
from ..paths import include_errors, path_errors
from ..yaml_loader import YamlDocument
from . import amp, chip, distributed, driver, driver_versions, dtypes, kernels, names, native, ops, spec_version


def semantic_errors(doc: YamlDocument, base: Path | None = None) -> list[SpecError]:
    """Checks the schema cannot express; `base` is the spec's folder (paths are relative to it)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    # The order of the one function these checks came from: SpecErrors sorts by position,
    # but of two errors alike it keeps the first one's hint. That order is why `driver`
    # and `driver_versions` are two modules, and why `chip` (not `native`) checks what
    # integration: native rules out.
    out: list[SpecError] = []
    out += spec_version.errors(doc, data)
    out += chip.errors(doc, data)
    out += names.errors(doc, data)
    out += driver.errors(doc, data)
    out += native.errors(doc, data)
    out += ops.errors(doc, data)
    out += driver_versions.errors(doc, data)
    out += include_errors(doc, data)
    if base is not None:
        out += path_errors(doc, data, base)
    out += kernels.errors(doc, data, base)
    out += dtypes.errors(doc, data)
    out += amp.errors(doc, data)
    out += distributed.errors(doc, data)
    return out
