"""How an op name becomes its kernel: the family module that ops.yaml names, its `KERNELS`
entry, wrapped with the aten schema's signature and the dtype checks every kernel shares
(complex calls to their adapter in `_complex`, dtypes the kernels lack declined).

Every kernel module exposes its kernels the same way: a `KERNELS` dict op name -> function,
built at the end of the module. `torch_fl.triton_ops.kernel_for` resolves through here.
"""
from __future__ import annotations

import importlib
import itertools
from types import ModuleType
from typing import Callable

import torch

from . import FAMILIES, _FAMILY_OF
from ._common import CAPTURE, DTYPE_CODES, require_kernel_dtypes


def family_module(family: str) -> ModuleType:
    """The module holding a family's kernels: `_<family>.py`."""
    return importlib.import_module(f"._{family}", __package__)


def kernel(op_name: str) -> Callable:
    """The wrapped kernel of `op_name` (an entry of SUPPORTED_OPS; KeyError otherwise)."""
    return wrap_kernel(op_name, family_module(_FAMILY_OF[op_name]).KERNELS[op_name])


def all_kernels() -> dict[str, dict[str, Callable]]:
    """family -> its module's `KERNELS` (imports every family module)."""
    return {family: family_module(family).KERNELS for family in FAMILIES}


def _signature(op_name):
    """inspect.Signature of the aten schema (documentation / introspection only)."""
    import inspect
    base, _, ov = op_name.partition(".")
    try:
        schema = getattr(getattr(torch.ops.aten, base), ov or "default")._schema
    except Exception:  # noqa: BLE001
        return None
    params = []
    for a in schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if not a.has_default_value() else a.default_value
        try:
            params.append(inspect.Parameter(a.name, kind, default=default))
        except ValueError:   # a Python keyword (`from` of uniform_): passed by position only
            return None
    try:
        return inspect.Signature(params)
    except ValueError:
        return None


# Kernels that take complex tensors themselves (as pairs of reals: Triton has no complex
# types); every other op reaches complex tensors only through its adapter in `_complex`.
_COMPLEX_AWARE = frozenset({"_fft_c2c", "_fft_c2c.out", "_fft_r2c", "_fft_r2c.out", "_fft_c2r", "_fft_c2r.out",
                            "conj_physical.out", "conj_physical_", "flip", "complex.out", "polar.out",
                            # compositions of chip ops, which take complex tensors through theirs
                            "triangular_solve.X", "renorm.out"})


def _kernel_dtypes(args, kwargs):
    """The dtypes of a call's tensors (also inside lists), of its `dtype=` argument and of
    its complex Python scalars."""
    for value in itertools.chain(args, kwargs.values()):
        if isinstance(value, torch.Tensor):
            yield value.dtype
        elif isinstance(value, (list, tuple)):
            yield from (v.dtype for v in value if isinstance(v, torch.Tensor))
        elif isinstance(value, torch.dtype):
            yield value
        elif isinstance(value, complex):
            yield torch.complex128


def wrap_kernel(op_name: str, fn: Callable) -> Callable:
    """`fn` named after the op and carrying the aten schema's signature. A call with a
    complex tensor, `dtype=` or Python number goes to the op's complex adapter (`_complex`:
    real ops on the parts) or, without one, is declined before the kernel runs, as is any
    other dtype the kernels lack: no kernel answers in a substitute dtype."""
    checked = op_name not in _COMPLEX_AWARE
    from ._complex import adapter_for

    complex_kernel = adapter_for(op_name) if checked else None

    def kernel(*args, **kwargs):
        if checked:
            for dtype in _kernel_dtypes(args, kwargs):  # one pass, no list: every call comes here
                if dtype in DTYPE_CODES:
                    continue
                if complex_kernel is None or not dtype.is_complex:
                    require_kernel_dtypes((dtype,))
                if CAPTURE.launches is not None:
                    CAPTURE.launches.append(None)  # many launches: nothing for a C++ replay to record
                return complex_kernel(*args, **kwargs)
        return fn(*args, **kwargs)

    kernel.__name__ = "triton_" + op_name.replace(".", "_")
    kernel.__qualname__ = kernel.__name__
    sig = _signature(op_name)
    if sig is not None:
        kernel.__signature__ = sig
    return kernel
