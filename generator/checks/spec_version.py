"""`spec_version` is written as the integer 1 exactly.

YAML reads `1.0`, `0x1`, `+1`, `01` and `1_` all as one; the schema (JSON Schema counts 1.0 as
an integer) took them all. A spec's version is a literal, so only `1` is accepted.
"""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    value = data.get("spec_version")
    written = doc.scalars.get(("spec_version",))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 1 and written != "1":
        return [doc.error(("spec_version",), f"spec_version is written '{written}': write the integer 1",
                          hint="spec_version: 1")]
    return []
