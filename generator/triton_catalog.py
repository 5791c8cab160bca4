"""The ops the shared Triton library has kernels for, read from its data file.

The runtime (`torch_fl.triton_ops`) and the generator both read `triton_ops/ops.yaml`; neither
imports the other (runtime_files finds the file).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import yaml

from .runtime_files import runtime_dir

CATALOG_FILE = ("triton_ops", "ops.yaml")


class CatalogError(Exception):
    """The runtime's op catalog is missing or malformed (an installation problem)."""


@dataclass(frozen=True)
class TritonCatalog:
    ops: frozenset[str]                 # every op with a kernel
    compiled_only: frozenset[str]       # ops routed to Triton only where it compiles

    def __contains__(self, op: str) -> bool:
        return op in self.ops


def parse(text: str, where: str) -> TritonCatalog:
    data = yaml.safe_load(text)
    families = data.get("families") if isinstance(data, dict) else None
    if not isinstance(families, dict) or not all(
            isinstance(ops, list) and all(isinstance(op, str) for op in ops) for ops in families.values()):
        raise CatalogError(f"{where}: 'families' must map family names to lists of op names")
    compiled_only = data.get("compiled_only", [])
    if not isinstance(compiled_only, list) or any(f not in families for f in compiled_only):
        raise CatalogError(f"{where}: 'compiled_only' must list families of 'families'")
    return TritonCatalog(ops=frozenset(op for ops in families.values() for op in ops),
                         compiled_only=frozenset(op for f in compiled_only for op in families[f]))


@functools.lru_cache(maxsize=1)
def load() -> TritonCatalog:
    path = runtime_dir().joinpath(*CATALOG_FILE)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CatalogError(f"cannot read the Triton op catalog {path}: {error.strerror}") from None
    return parse(text, str(path))
