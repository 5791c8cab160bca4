"""Triton kernels of the `linalg` family (dense linear algebra on small matrices (one program per matrix)).

`KERNELS` maps each name of `_linalg_ops.OPS` to a function with the aten schema's
signature (see the package README)."""
from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
