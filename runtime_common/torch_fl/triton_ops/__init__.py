"""Triton fallback kernels for generated PrivateUse1 backends.

`SUPPORTED_OPS` lists aten op names (with overload, as in native_functions.yaml);
`kernel_for(name)` returns a Python function with that op's schema signature,
ready for ``torch.library.Library("aten", "IMPL").impl(name, fn, "PrivateUse1")``.
Every numeric result is computed by a Triton kernel: compiled on a GPU, or run by
Triton's interpreter (``TRITON_INTERPRET=1``, set before triton is imported).

Importing this package never imports triton; `available()` says whether the
kernels can run here. See README.md for the mechanism and the interpreter's limits.

The library is split into families, listed with their op names in `ops.yaml` (data the
generator reads too); family `<f>`'s kernels are in `_<f>.py` (`_pointwise`, `_reductions`,
`_softmax_norm`, `_matmul`, `_gather`, `_creation`, `_index`, `_nn`, `_linalg`, ...), whose
`KERNELS` dict (op name -> function) is built at the module's end. `kernel_for` resolves an
op through one mapping, op -> family (from ops.yaml), and `_registry`, which imports that
family's module and wraps its `KERNELS` entry. Shared machinery is in `_common.py`, the
Triton kernels most families share in `_kernels.py`.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Callable

__all__ = ["COMPILED_ONLY", "FAMILIES", "SUPPORTED_OPS", "Unsupported", "available", "copy_into", "family_ops", "fill_into",
           "kernel_for"]

class Unsupported(NotImplementedError):
    """Raised by a kernel, before it writes anything, for inputs it does not handle
    (a layout, size or dtype outside its design). The op then takes the next step of
    its chain (the CPU where the spec allows it), exactly as if Triton lacked it."""


def _read_catalog() -> dict:
    # ops.yaml is data the generator reads too (without importing torch_fl).
    import yaml

    with open(os.path.join(os.path.dirname(__file__), "ops.yaml"), encoding="utf-8") as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


_CATALOG = _read_catalog()
# Every family, in the order their ops are listed.
FAMILIES: tuple[str, ...] = tuple(_CATALOG["families"])


def family_ops(family: str) -> tuple[str, ...]:
    """The op names of one family of ops.yaml (one of FAMILIES)."""
    return tuple(_CATALOG["families"][family])


SUPPORTED_OPS: tuple[str, ...] = tuple(op for ops in _CATALOG["families"].values() for op in ops)
# The one mapping kernel_for resolves through: op -> its family (whose module's KERNELS has it).
_FAMILY_OF: dict[str, str] = {op: family for family, ops in _CATALOG["families"].items() for op in ops}
COMPILED_ONLY: frozenset[str] = frozenset(op for f in _CATALOG["compiled_only"] for op in family_ops(f))


def available() -> bool:
    """True when triton is importable and kernels can run: a GPU driver or TRITON_INTERPRET=1."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        from .._triton_interpreter import repair_atomics
        from ._launch import serialize_interpreter

        serialize_interpreter()  # kernels run from several threads (one per device, autograd's)
        repair_atomics()
        return True
    try:
        import torch

        return bool(torch.cuda.is_available()) or bool(getattr(torch, "xpu", None) and torch.xpu.is_available())
    except Exception:  # noqa: BLE001
        return False


def kernel_for(op_name: str) -> Callable:
    """The Triton-backed implementation of aten `op_name` (an entry of SUPPORTED_OPS)."""
    if op_name not in _FAMILY_OF:
        raise KeyError(f"torch_fl.triton_ops has no kernel for aten::{op_name}")
    from ._registry import kernel

    return kernel(op_name)


def copy_into(dst, src):
    """Strided -> strided copy with dtype conversion (src broadcast to dst); returns dst."""
    from . import _common

    return _common.copy_into(dst, src)


def fill_into(dst, value):
    """Fill a strided tensor with a Python scalar (exact for float64/int64); returns dst."""
    from . import _common

    return _common.fill_into(dst, value)

