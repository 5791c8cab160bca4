"""Triton kernels of the `nn` family (neural-network ops: pooling, upsampling, losses, normalisation, sampling).

`KERNELS` maps each name of `_nn_ops.OPS` to a function with the aten schema's
signature (see the package README)."""
from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
