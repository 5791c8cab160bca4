"""Checks of the `chip` section: a name torch does not own, and what `integration: native` and
`integration: composite` rule out."""
from __future__ import annotations

import warnings

from ..errors import SpecError
from ..yaml_loader import YamlDocument
from ._common import get
from .amp import AMP_OP_LISTS

# torch's built-in device types (c10::DeviceType names, as torch.device parses them) plus
# a few reserved names; a privateuse1 backend may not take any of them.
BUILTIN_DEVICE_TYPES = frozenset({
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
    "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone", "metal",
    "privateuse1", "mkl", "sparse", "quantized",
})

# Sections a native chip has no use for: torch itself drives it and dispatches its ops.
NATIVE_UNUSED = {
    "driver": "torch loads the GPU's driver itself",
    "kernels": "torch's own kernels run the ops",
    "ops": "torch's own kernels run the ops",
    "fallback": "every op has torch's own kernel",
    "distributed": "name torch's backend under native.collective",
    "compile": "torch's own Inductor backend compiles for it",
}


# A composite chip's sections are its members': it names them under `composite.members`.
COMPOSITE_USED = ("spec_version", "chip", "composite")


def is_builtin_device_type(name: str) -> bool:
    """True if ``name`` is a device type torch itself defines (cpu, cuda, meta, ...)."""
    if name in BUILTIN_DEVICE_TYPES:
        return True
    try:
        import torch
        if name == torch._C._get_privateuse1_backend_name():
            return False   # this very backend, already registered in this process
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.device(name)
        return True
    except Exception:
        return False


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """A native chip: the sections it cannot use; any other: a name torch does not define."""
    out: list[SpecError] = []
    integration = get(data, "chip", "integration")
    native = integration == "native"
    if native:
        out += _native_unused_errors(doc, data)
    if integration == "composite":
        out += [doc.error((key,), f"'{key}' does not apply to a composite chip: each member's own spec says it",
                          at="key", hint="remove it; change it in the member's spec instead")
                for key in data if key not in COMPOSITE_USED]
        if isinstance(data.get("chip"), dict) and "capability" in data["chip"]:
            out.append(doc.error(("chip", "capability"), "a composite chip's devices report their members' "
                                 "capabilities; chip.capability would not be used", at="key", hint="remove it"))
    elif "composite" in data:
        out.append(doc.error(("composite",), "'composite' applies only to chip.integration: composite", at="key",
                             hint="add `integration: composite` under chip, or remove the section"))
    name = get(data, "chip", "name")
    # A native chip is torch's own device by design; only a generated backend needs a new name.
    if isinstance(name, str) and not native and is_builtin_device_type(name):
        out.append(doc.error(("chip", "name"), f"'{name}' is a built-in torch device type",
                             hint="choose a name torch does not define itself"))
    return out


def _native_unused_errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    out = [doc.error((key,), f"'{key}' does not apply to a native chip ({why})", at="key",
                     hint="remove it, or use integration: privateuse1 to generate a backend")
           for key, why in NATIVE_UNUSED.items() if key in data]
    chip = data.get("chip")
    if isinstance(chip, dict) and "capability" in chip:
        out.append(doc.error(("chip", "capability"), "a native chip's capability comes from its torch build; "
                             "chip.capability would not be used", at="key", hint="remove it"))
    if "native" not in data:
        return out
    amp = data.get("amp")
    if isinstance(amp, dict):
        for key in AMP_OP_LISTS:
            if key in amp:
                out.append(doc.error(("amp", key), f"a native chip autocasts with torch's own op lists; "
                                     f"amp.{key} would not be applied", at="key", hint="remove it"))
    return out
