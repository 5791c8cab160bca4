"""The `special` family's kernels (see _special_ops.py)."""
from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
