"""Batches to the device: `DeviceLoader` wraps a DataLoader (or any iterable of batches).

    loader = torch_fl.data.DeviceLoader(DataLoader(dataset, batch_size=32), "npu")
    for x, y in loader: ...        # x, y already on npu

Each batch (a tensor, or tuples, lists, dicts and namedtuples of them; other leaves pass
through) is copied to the device with `non_blocking=True` from pinned host memory, one batch
ahead: the copy of batch i+1 is queued before batch i is handed out, so it overlaps the step
that uses batch i. Host tensors are pinned unless the loader already pinned them
(`DataLoader(pin_memory=True, pin_memory_device=...)`) or the device has no pinned memory.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

import torch
from torch.utils import _pytree as pytree

from . import naming

__all__ = ["DeviceLoader", "to_device"]


def _pin(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_pinned():
        return tensor
    try:
        return tensor.pin_memory()
    except RuntimeError:  # no accelerator with pinned host memory in this process
        return tensor


def _move(batch: Any, device: torch.device, pin_memory: bool, non_blocking: bool):
    """(batch on `device`, the host tensors its asynchronous copies still read)."""
    async_copy = non_blocking and device.type not in ("cpu", "meta")
    sources: list[torch.Tensor] = []

    def move(leaf):
        if not isinstance(leaf, torch.Tensor) or leaf.device == device:
            return leaf
        if async_copy and leaf.device.type == "cpu":
            if pin_memory:
                leaf = _pin(leaf)
            if leaf.is_pinned():  # from pageable memory a copy is synchronous whatever the flag
                sources.append(leaf)
                return leaf.to(device, non_blocking=True)
        return leaf.to(device)

    return pytree.tree_map(move, batch), sources


def to_device(batch: Any, device: str | torch.device, *, non_blocking: bool = False) -> Any:
    """`batch` with every tensor leaf on `device` (containers rebuilt, other leaves kept).

    With non_blocking=True, copies from pinned tensors are asynchronous: the caller keeps
    those tensors alive until the device has read them (DeviceLoader does that for you).
    """
    return _move(batch, naming.device(device), False, non_blocking)[0]


class DeviceLoader:
    """Iterate `loader`, yielding each batch on `device` (see the module's docstring)."""

    def __init__(self, loader: Iterable, device: str | torch.device | None = None, *,
                 pin_memory: bool = True, non_blocking: bool = True, prefetch: bool = True):
        if device is None:
            device = torch.get_default_device()
        self.loader = loader
        self.device = naming.device(device)
        if self.device.type not in ("cpu", "meta"):
            torch.empty(0, device=self.device)  # an unusable device fails here, not at the first batch
        self.pin_memory = pin_memory
        self.non_blocking = non_blocking
        self.prefetch = prefetch

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def _move(self, batch):
        """(moved batch, (event, host sources)): the sources stay alive until the event completes."""
        moved, sources = _move(batch, self.device, self.pin_memory, self.non_blocking)
        if not sources:
            return moved, None
        # A generated chip's pinned-memory cache does not track pending copies (CUDA's does):
        # a freed pinned buffer could be handed out again while the copy still reads it.
        event = torch.Event(device=self.device)
        event.record()
        return moved, (event, sources)

    def __iter__(self) -> Iterator:
        batches = iter(self.loader)
        if not self.prefetch:
            for batch in batches:
                moved, pending = self._move(batch)
                _release(pending)
                yield moved
            return
        # Batch i+1 is queued before batch i is handed out; both copies go to the device's current
        # stream, which the step uses too, so stream order makes the step wait for its batch while
        # the host never blocks. Batch i's host memory is released once its copy has run.
        in_flight = []  # (event, host sources) of the batches whose copies may still run
        try:
            for batch in batches:
                moved, pending = self._move(batch)
                in_flight.append(pending)
                if len(in_flight) == 1:
                    ahead = moved
                    continue
                current, ahead = ahead, moved
                if len(in_flight) > 2:  # the batch before `current`: its step has been queued
                    _release(in_flight.pop(0))
                yield current
            if in_flight:
                yield ahead
        finally:  # also when the loop is left early: no pinned buffer is freed mid-copy
            for pending in in_flight:
                _release(pending)


def _release(pending) -> None:
    if pending is not None:
        pending[0].synchronize()
