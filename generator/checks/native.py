"""Checks of the `native` section: it belongs to native chips only.

What a native chip may not declare elsewhere is checked with `chip.integration` (`chip.py`).
"""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument
from ._common import get


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """A `native` section in a spec that does not say `chip.integration: native`."""
    if "native" in data and get(data, "chip", "integration") != "native":
        return [doc.error(("native",), "'native' applies only to chip.integration: native", at="key")]
    return []
