"""The `select` family's kernels (see _select_ops.py)."""
from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
