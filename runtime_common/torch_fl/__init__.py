"""torch_fl: one API for every chip, native or generated from a spec.

`init()` discovers the installed backends, `set_default_device()` makes one the
default, `chip_facts()` / `device_facts()` say what a chip's spec says (AMP dtypes, collective backend); `fallback_stats()` and `strict_fallback()` show and police CPU fallbacks.
`data.DeviceLoader`, `placement.DevicePlacementPolicy`, `monitor.DeviceMonitor` and
`DynamicDeviceSelector`, `autograd_check` (installed by init()); `python -m torch_fl doctor`.
`coexistence`: beside a native accelerator a chip registers when asked (`init(chips=[...])`);
`divergence.check()`: the first aten op whose chip result differs from the CPU's.
A chip's faults raise `KernelError`, `DeviceLostError`, `StreamTimeoutError` (torch_fl.errors).
"""
from __future__ import annotations

import os
from pathlib import Path

from ._api import BackendInfo, fallback_stats, init, reset_fallback_stats, set_default_device, strict_fallback
from .chips import ChipFacts, chip_facts, device_facts
from .naming import device
from .errors import ChipError, DeviceLostError, KernelError, StreamTimeoutError
from .coexistence import NativeBackwardError
from .compile import ChipCompileError
from . import amp, distributed  # noqa: E402  (torch_fl.amp.autocast, torch_fl.distributed.get_backend_config)
from . import autograd_check, coexistence, data, divergence, monitor, placement  # noqa: E402,F401  (torch_fl.data.DeviceLoader, ...)

__version__ = "0.1.0"
__all__ = ["BackendInfo", "ChipCompileError", "ChipError", "ChipFacts", "DeviceLostError", "KernelError", "NativeBackwardError", "StreamTimeoutError", "chip_facts", "csrc_dir", "device", "device_facts", "fallback_stats", "init", "reset_fallback_stats", "set_default_device", "strict_fallback"]


def csrc_dir() -> str:
    """The shared C++ runtime (include/ and src/) that generated backends compile in."""
    return os.fspath(Path(__file__).with_name("csrc"))
