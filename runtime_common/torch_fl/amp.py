"""Mixed precision that reads the same on every chip.

`autocast()` and `GradScaler()` take the current device (the one `set_default_device`
made the default) when none is given, so a script never names `cuda` to get AMP:

    with torch_fl.amp.autocast():          # npu here, cuda on a GPU host
        loss = model(x)
    scaler.scale(loss).backward()

On a generated chip the dtypes are the spec's `amp.dtypes` and asking for another is
an error (torch itself would only warn and run without autocast). The two ops
GradScaler needs run on the chip as Triton kernels (`register_scaler_kernels`, called
by the generated backend at load), never through the CPU fallback.
"""
from __future__ import annotations

import torch

__all__ = ["GradScaler", "autocast", "current_device_type", "register_scaler_kernels", "supported_dtypes"]


def current_device_type() -> str:
    """The device type new tensors go to (`torch_fl.set_default_device`, else cpu)."""
    return torch.get_default_device().type


def supported_dtypes(device_type: str) -> tuple[torch.dtype, ...]:
    """The dtypes autocast can run in on `device_type`: its spec's `amp.dtypes` (a native chip's
    bfloat16 only where the device reports it), torch's own list for a type no spec describes."""
    if device_type == torch._C._get_privateuse1_backend_name():
        return tuple(getattr(torch, device_type).get_amp_supported_dtype())
    from .chips import device_facts

    facts = device_facts(device_type)
    if facts is None or facts.kind != "native":
        return (torch.bfloat16, torch.float16)   # torch's own list for cpu and the other built-in types
    module = getattr(torch, facts.device_type)
    has_bf16 = getattr(module, "is_bf16_supported", None)
    return tuple(getattr(torch, name) for name in facts.amp_dtypes
                 if name != "bfloat16" or has_bf16 is None or has_bf16())


def autocast(device_type: str | None = None, dtype: torch.dtype | None = None, enabled: bool = True,
             cache_enabled: bool | None = None) -> torch.autocast:
    """`torch.autocast` on the current device; `dtype` defaults to the device's autocast dtype
    (the spec's `amp.default` on a generated chip). An unsupported dtype raises."""
    device_type = device_type or current_device_type()
    if dtype is None:
        dtype = torch.get_autocast_dtype(device_type)
    if enabled and dtype not in supported_dtypes(device_type):
        raise RuntimeError(f"autocast on {device_type} does not support {dtype}; supported: "
                           + ", ".join(map(str, supported_dtypes(device_type))))
    return torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def GradScaler(device_type: str | None = None, **kwargs) -> torch.amp.GradScaler:
    """`torch.amp.GradScaler` for the current device (kwargs as torch's: init_scale, ...)."""
    return torch.amp.GradScaler(device_type or current_device_type(), **kwargs)


# --------------------------------------------------------------------------- scaler kernels
#
# aten::_amp_foreach_non_finite_check_and_unscale_ and aten::_amp_update_scale_ are the
# two ops GradScaler calls that no chip kernel or Triton family covers; CUDA has
# dedicated kernels for them, these are the Triton equivalents (same arithmetic).

SCALER_OPS = ("_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_")

def _build_kernels():
    """The Triton kernels (imported on first use: importing triton is slow)."""
    from . import _amp_kernels

    return _amp_kernels.unscale_kernel, _amp_kernels.update_scale_kernel


_BLOCK = 1024
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_scalar(t: torch.Tensor, what: str, dtype: torch.dtype, device: torch.device) -> None:
    if t.numel() != 1 or t.dtype != dtype or t.device != device:
        raise RuntimeError(f"{what} must be a one-element {dtype} tensor on {device}, got "
                           f"{t.numel()} element(s) of {t.dtype} on {t.device}")


def non_finite_check_and_unscale_(grads, found_inf: torch.Tensor, inv_scale: torch.Tensor) -> None:
    """aten::_amp_foreach_non_finite_check_and_unscale_: grads *= inv_scale; found_inf = 1.0 if
    any gradient holds an inf or NaN (found_inf is never reset here, as on CUDA)."""
    from .triton_ops._common import compute_code, contig, copy_into, dtype_code

    unscale_kernel, _ = _build_kernels()
    _check_scalar(found_inf, "found_inf", torch.float32, inv_scale.device)
    _check_scalar(inv_scale, "inv_scale", torch.float32, inv_scale.device)
    for g in grads:
        if g.device != inv_scale.device:
            raise RuntimeError(f"a gradient is on {g.device}, inv_scale on {inv_scale.device}")
        if g.dtype not in _FLOATS:
            raise RuntimeError(f"gradients must be floating point, got {g.dtype}")
        n = g.numel()
        if n == 0:
            continue
        # Work on a dense copy when the gradient is a strided view; copy back after.
        dense = g if g.is_contiguous() else contig(g)
        unscale_kernel[(triton_cdiv(n, _BLOCK),)](dense, n, inv_scale, found_inf, ODT=dtype_code(g.dtype),
                                                  CDT=compute_code(g.dtype), BLOCK=_BLOCK)
        if dense is not g:
            copy_into(g, dense)


def update_scale_(scale: torch.Tensor, growth_tracker: torch.Tensor, found_inf: torch.Tensor,
                  scale_growth_factor: float, scale_backoff_factor: float, growth_interval: int) -> torch.Tensor:
    """aten::_amp_update_scale_: back off after an inf step, grow after `growth_interval` clean ones."""
    from .triton_ops._common import fill_into

    _, update_scale_kernel = _build_kernels()
    device = scale.device
    _check_scalar(scale, "scale", torch.float32, device)
    _check_scalar(growth_tracker, "growth_tracker", torch.int32, device)
    _check_scalar(found_inf, "found_inf", torch.float32, device)
    # The factors go in as float64 on the device: Python floats reach a kernel as float32.
    factors = torch.empty(2, dtype=torch.float64, device=device)
    fill_into(factors[0], float(scale_growth_factor))
    fill_into(factors[1], float(scale_backoff_factor))
    update_scale_kernel[(1,)](scale, growth_tracker, found_inf, factors, int(growth_interval))
    return scale


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def register_scaler_kernels(chip: str, note_path, mode: str):
    """Register the scaler ops at the chip's PrivateUse1 key, counted as the `triton` path.
    Returns the torch.library handle (keep it alive), or None when Triton cannot run here:
    then the ops take the chip's fallback chain like any other."""
    import os

    if mode == "interpret":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from . import triton_ops
    from ._outside_dynamo import outside_dynamo

    if not triton_ops.available():
        return None

    def unscale(grads, found_inf, inv_scale):
        non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        note_path(SCALER_OPS[0], "triton")

    def update(scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor, growth_interval):
        result = update_scale_(scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor,
                               growth_interval)
        note_path(SCALER_OPS[1], "triton")
        return result

    library = torch.library.Library("aten", "IMPL")
    library.impl(SCALER_OPS[0], outside_dynamo(unscale), "PrivateUse1")
    library.impl(SCALER_OPS[1], outside_dynamo(update), "PrivateUse1")
    return library
