"""Triton kernels of the `index` family (scans, sorting, advanced indexing, scatter, selection).

`KERNELS` maps each name of `_index_ops.OPS` to a function with the aten schema's
signature (see the package README)."""
from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
