"""What torch_fl knows about a chip, read from the package its spec generated.

Every chip torch_fl serves has a spec: a generated chip (PrivateUse1) through its
`torch_fl_<chip>.spec`, a native one (`integration: native`: CUDA, ROCm) through the
pure-Python package `torchfl-gen build specs/<chip>.yaml` installs. torch_fl.amp,
torch_fl.distributed and torch_fl.monitor read the facts here, so none of them names a
vendor.

    torch_fl.chip_facts("npu").dist_backend      # "npuccl"
    torch_fl.chip_facts("hip").dist_library      # "rccl"
    torch_fl.device_facts("cuda").name           # "cuda" on a CUDA build of torch, "hip" on ROCm
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib import metadata

import torch

GENERATED_GROUP = "torch_fl.backends"
NATIVE_GROUP = "torch_fl.native"

__all__ = ["ChipFacts", "chip_facts", "device_facts", "native_chips", "torch_build"]


@dataclass(frozen=True)
class ChipFacts:
    name: str                       # torch_fl's name of the chip: "npu", "cuda", "hip"
    device_type: str                # torch's device type of its tensors
    kind: str                       # "generated" or "native"
    package: str                    # the package the facts come from
    spec_source: str
    amp_dtypes: tuple[str, ...]     # dtype names; a native chip's bfloat16 only where the device has it
    amp_default: str | None
    dist_backend: str | None        # torch.distributed backend name
    dist_library: str | None        # the collective library behind it
    dist_init_method: str | None    # tcp | env | file
    dist_unsupported_options: tuple[str, ...] = ()
    monitor_command: tuple[str, ...] = ()
    monitor_parser: str | None = None
    visible_devices_env: str | None = None
    torch_build: str | None = None  # native: the torch build that drives it ("cuda", "hip")


def torch_build() -> str | None:
    """The GPU runtime this torch is built for: "hip" (ROCm), "cuda", or None (a CPU build)."""
    if torch.version.hip:
        return "hip"
    return "cuda" if torch.version.cuda else None


def _entries(group: str) -> dict[str, str]:
    return {e.name: e.value for e in sorted(metadata.entry_points(group=group), key=lambda e: e.name)}


@functools.lru_cache(maxsize=None)
def _spec_module(package: str):
    return importlib.import_module(f"{package}.spec")


def native_chips() -> dict[str, object]:
    """Native chip name -> its spec module, for every installed native package."""
    return {name: _spec_module(package) for name, package in _entries(NATIVE_GROUP).items()}


def _native_facts(spec) -> ChipFacts:
    return ChipFacts(
        name=spec.CHIP, device_type=spec.DEVICE_TYPE, kind="native", package=spec.__name__.rpartition(".")[0],
        spec_source=spec.SPEC_SOURCE, amp_dtypes=tuple(spec.AMP_DTYPES), amp_default=spec.AMP_DEFAULT_DTYPE or None,
        dist_backend=spec.DIST_BACKEND, dist_library=spec.DIST_LIBRARY, dist_init_method=spec.DIST_INIT_METHOD,
        dist_unsupported_options=tuple(spec.DIST_UNSUPPORTED_OPTIONS), monitor_command=tuple(spec.MONITOR_COMMAND),
        monitor_parser=spec.MONITOR_PARSER or None, visible_devices_env=spec.VISIBLE_DEVICES_ENV or None,
        torch_build=spec.TORCH_BUILD)


def _generated_facts(package: str) -> ChipFacts:
    spec = _spec_module(package)
    return ChipFacts(
        name=spec.CHIP, device_type=spec.CHIP, kind="generated", package=package, spec_source=spec.SPEC_SOURCE,
        amp_dtypes=tuple(spec.AMP_DTYPES), amp_default=spec.AMP_DEFAULT_DTYPE or None,
        dist_backend=spec.DIST_BACKEND or None, dist_library=spec.DIST_BACKEND or None,
        dist_init_method=spec.DIST_INIT_METHOD or None, dist_unsupported_options=tuple(spec.DIST_UNSUPPORTED_OPTIONS))


def chip_facts(name: str) -> ChipFacts | None:
    """The facts of the chip torch_fl calls `name` ("npu", "cuda", "hip"); None when no
    installed package describes it."""
    generated = _entries(GENERATED_GROUP)
    if name in generated:
        return _generated_facts(generated[name])
    native = native_chips()
    return _native_facts(native[name]) if name in native else None


def device_facts(device_type: str) -> ChipFacts | None:
    """The facts of the chip behind torch's device type `device_type`: a generated chip's own,
    for `cuda` the native chip this torch build drives (cuda or hip), and on a build driving
    none the chip named like the device type. None when no installed package describes it."""
    generated = _entries(GENERATED_GROUP)
    if device_type in generated:
        return _generated_facts(generated[device_type])
    candidates = [spec for spec in native_chips().values() if spec.DEVICE_TYPE == device_type]
    if not candidates:
        return None
    build = torch_build()
    chosen = next((s for s in candidates if s.TORCH_BUILD == build), None) or \
        next((s for s in candidates if s.CHIP == device_type), candidates[0])
    return _native_facts(chosen)


def missing_facts_error(device_type: str, what: str) -> RuntimeError:
    """The error for a device type no installed spec package describes."""
    return RuntimeError(f"no {what} for device type '{device_type}': no installed torch_fl package describes it "
                        f"(build its spec: torchfl-gen build specs/<chip>.yaml; installed: generated "
                        f"{sorted(_entries(GENERATED_GROUP)) or 'none'}, native {sorted(_entries(NATIVE_GROUP)) or 'none'})")
