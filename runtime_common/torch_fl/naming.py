"""Device names torch_fl accepts: torch's own, and a composite chip's members by their own names.

A composite chip (docs/multichip.md) is one device type whose devices are its member chips'
devices in member order: with specs/hybrid.yaml, `hybrid:0` and `hybrid:1` are npu's and
`hybrid:2` is vpu's. `device("vpu:0")` says the same as `device("hybrid:2")` without counting;
torch itself knows only the composite's name. DevicePlacementPolicy and DeviceLoader take both.
"""
from __future__ import annotations

import importlib

import torch

__all__ = ["device"]


def device(name: str | torch.device | int) -> torch.device:
    """`torch.device(name)`, where `name` may also be `<member>[:<n>]`: the n-th device of a member
    chip of the registered composite chip."""
    if isinstance(name, torch.device):
        return name
    if isinstance(name, str):
        member, _, index = name.partition(":")
        composite = _registered_composite()
        if composite is not None and member in [m.CHIP for m in composite.MEMBERS]:
            return _member_device(composite, member, index)
    return torch.device(name)


def _registered_composite():
    """The spec module of the composite chip registered as PrivateUse1, or None."""
    chip = torch._C._get_privateuse1_backend_name()
    if chip == "privateuseone":
        return None
    try:
        spec = importlib.import_module(f"torch_fl_{chip}.spec")
    except ImportError:
        return None
    return spec if getattr(spec, "MEMBERS", ()) else None


def _member_device(spec, member: str, index: str) -> torch.device:
    if index and not index.isdigit():
        raise ValueError(f"invalid device '{member}:{index}': the index of a {member} device is a number")
    _C = importlib.import_module(f"torch_fl_{spec.CHIP}._C")
    position = [m.CHIP for m in spec.MEMBERS].index(member)
    devices = [i for i in range(getattr(torch, spec.CHIP).device_count()) if _C._member_of(i) == position]
    local = int(index or 0)
    if local >= len(devices):
        raise ValueError(f"{member}:{local} does not exist: chip {member} has {len(devices)} device(s) in the "
                         f"composite {spec.CHIP} ({', '.join(f'{spec.CHIP}:{i}' for i in devices) or 'none'})")
    return torch.device(spec.CHIP, devices[local])
