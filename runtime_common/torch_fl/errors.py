"""The faults a chip reports, as exceptions named for them.

A generated backend raises these when its driver returns a status the spec declares
(`driver.status`: `launch_failure`, `device_lost`, `timeout`) or when a wait on the device
passes `TORCH_FL_SYNC_TIMEOUT`. An allocation the device cannot satisfy is torch's own
`torch.OutOfMemoryError`. All are `RuntimeError`s, so code written for torch.cuda's errors
keeps working; each carries the chip's name and the driver's status code.
"""
from __future__ import annotations

__all__ = ["ChipError", "DeviceLostError", "KernelError", "StreamTimeoutError"]


class ChipError(RuntimeError):
    """A failure the chip's driver reported. `chip`: the device type; `status`: the driver's code."""

    chip: str = ""
    status: int | None = None


class KernelError(ChipError):
    """A kernel failed on the device (the driver's launch failure), reported at the next wait on
    its stream. The device stays usable; the failed op's outputs are undefined."""


class DeviceLostError(ChipError):
    """The device is gone (reset, unplugged, fallen off the bus): every further call on it fails,
    and its tensors are lost. Other devices of the chip are unaffected."""


class StreamTimeoutError(ChipError):
    """A wait on the device took longer than TORCH_FL_SYNC_TIMEOUT seconds: the device is stalled
    or far slower than expected. Its queued work may still complete later."""
