"""The spec's defaults, applied from the JSON Schema: the one place they are written.

After validation, every property the schema gives a `default` and the document leaves out is
filled in (a section whose own default is `{}` is created, then filled), so model construction
reads values and repeats no default.
"""
from __future__ import annotations

import copy
from typing import Any


def filled(data: Any, schema: dict) -> Any:
    """A copy of `data` with the schema's defaults filled in (objects with `properties` only)."""
    return _fill(copy.deepcopy(data), schema, schema)


def _resolve(node: dict, root: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/"):
        target = root
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def _fill(data: Any, node: dict, root: dict) -> Any:
    node = _resolve(node, root)
    if not isinstance(data, dict) or not isinstance(node, dict):
        return data
    for name, sub in node.get("properties", {}).items():
        sub = _resolve(sub, root)
        if name not in data and isinstance(sub, dict) and "default" in sub:
            data[name] = copy.deepcopy(sub["default"])
        if name in data:
            data[name] = _fill(data[name], sub, root)
    return data
