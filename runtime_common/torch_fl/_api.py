"""Backend discovery and the first user-facing calls of torch_fl."""
from __future__ import annotations

import contextlib
import importlib
import logging
from dataclasses import dataclass
from importlib import metadata

import torch

log = logging.getLogger("torch_fl")

ENTRY_POINT_GROUP = "torch_fl.backends"


@dataclass(frozen=True)
class BackendInfo:
    """What init() found out about one installed backend."""
    name: str                  # device type, e.g. "npu"
    package: str               # e.g. "torch_fl_npu"
    available: bool
    device_count: int
    driver_version: str | None  # the driver the backend was built for
    error: str | None          # why it is unavailable


_backends: dict[str, BackendInfo] = {}


def _generated_module(name: str):
    """The package of the generated backend serving device type `name`, or None."""
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return importlib.import_module(entry.value)
    return None


def _probe(entry) -> BackendInfo:
    log.debug("torch_fl: found backend %s -> %s", entry.name, entry.value)
    try:
        module = importlib.import_module(entry.value)
        module._register()
        log.debug("torch_fl: %s registered as torch.%s", entry.value, entry.name)
        error = module.load_error()
        device_module = getattr(torch, entry.name)
        count = device_module.device_count() if error is None else 0
        log.debug("torch_fl: %s driver: %s; %d device(s)", entry.name, error or "loaded", count)
        return BackendInfo(entry.name, entry.value, error is None and count > 0, count,
                           module.spec.DRIVER_VERSION, error)
    except Exception as exc:  # a broken backend is reported, not fatal
        log.debug("torch_fl: %s failed: %s", entry.name, exc)
        return BackendInfo(entry.name, entry.value, False, 0, None, f"{type(exc).__name__}: {exc}")


def init(verbose: bool = False) -> dict[str, BackendInfo]:
    """Discover the installed generated backends, register and probe each; idempotent.

    Returns device type -> BackendInfo. Steps are logged at DEBUG on logger "torch_fl".
    """
    if verbose:
        logging.basicConfig(level=logging.DEBUG)
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name not in _backends or not _backends[entry.name].available:
            _backends[entry.name] = _probe(entry)
    return dict(_backends)


def set_default_device(device: str | torch.device) -> torch.device:
    """Make `device` the default for tensor creation (after init()); errors if it is unusable."""
    device = torch.device(device)
    if device.type not in ("cpu", "cuda", "meta"):
        info = init().get(device.type)
        if info is None:
            raise RuntimeError(f"no torch_fl backend provides device '{device.type}'; "
                               f"installed: {sorted(init()) or 'none'} (build one with torchfl-gen build SPEC)")
        if not info.available:
            raise RuntimeError(f"device '{device.type}' is not available: {info.error or 'no devices'}")
    torch.set_default_device(device)
    return device


def _current_runtime():
    name = torch._C._get_privateuse1_backend_name()
    module = _generated_module(name) if name != "privateuseone" else None
    return module._C if module is not None else None


def fallback_stats() -> dict[str, dict[str, int]]:
    """op -> path ("vendor", "cpu") -> calls, for the generated chip in this process."""
    runtime = _current_runtime()
    return {op: dict(paths) for op, paths in runtime.fallback_stats().items()} if runtime else {}


def reset_fallback_stats() -> None:
    runtime = _current_runtime()
    if runtime:
        runtime.reset_fallback_stats()


@contextlib.contextmanager
def strict_fallback(enabled: bool = True):
    """Within the block, any CPU fallback raises instead of running."""
    runtime = _current_runtime()
    if runtime is None:
        yield
        return
    previous = runtime.strict_fallback()
    runtime.set_strict_fallback(enabled)
    try:
        yield
    finally:
        runtime.set_strict_fallback(previous)
