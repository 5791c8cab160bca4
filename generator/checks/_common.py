"""Helpers the section checks share."""
from __future__ import annotations

from typing import Any


def get(d: Any, *keys: str) -> Any:
    """``d[k1][k2]...``, or None where a level is missing or not a mapping (checks run on
    documents the schema may have rejected)."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d
