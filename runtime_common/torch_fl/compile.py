"""A chip in torch.compile: what Dynamo and Inductor learn about it.

Dynamo asks `get_interface_for_device(<chip>)` for the chip's devices, streams and properties;
Inductor asks for the chip's code generation (device op overrides, scheduling, wrapper code).
Importing either costs most of a second, so `import torch` imports neither: an import hook
registers every chip when torch first imports `torch._dynamo.device_interface` or
`torch._inductor.codegen.common` (torch.compile does), or at once where they are imported.

Inductor does not generate code for a generated chip yet (issue 20). Unregistered, Inductor
failed deep in its wrapper code (`KeyError: 'npu'`, `AssertionError: Device nvgpu not
supported`); registered so, `torch.compile(model)` over chip tensors raises `ChipCompileError`
naming the chip and what works today: `backend="aot_eager"`, Dynamo's and AOTAutograd's graphs
run by the chip's own kernels (the chip suites' test_compile.py).
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
import warnings
from types import ModuleType

__all__ = ["ChipCompileError", "register"]

_DYNAMO = "torch._dynamo.device_interface"
_INDUCTOR = "torch._inductor.codegen.common"
_chips: dict[str, tuple[ModuleType, tuple[str, ...]]] = {}   # chip -> (torch.<chip>, its spec's dtypes)
_lock = threading.Lock()


class ChipCompileError(RuntimeError):
    """torch.compile asked for a compiler stage the chip does not have."""


def inductor_refusal(chip: str) -> str:
    return (f"torch.compile: Inductor does not generate code for chip '{chip}' yet (docs/compile.md). "
            f"Compile with backend=\"aot_eager\" (Dynamo and AOTAutograd graphs run by {chip}'s own kernels), "
            f"or run the model eagerly.")


def register(chip: str, device_module: ModuleType, dtypes: tuple[str, ...]) -> None:
    """Tell Dynamo and Inductor about `chip` (its device module and spec dtypes) once torch
    imports them (now, if it has)."""
    with _lock:
        _chips[chip] = (device_module, tuple(dtypes))
        if not any(isinstance(finder, _ThenRegister.Finder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _ThenRegister.Finder())
    for name in (_DYNAMO, _INDUCTOR):
        module = sys.modules.get(name)
        if module is not None:
            _register_in(name, module)


def _register_in(name: str, module: ModuleType) -> None:
    # A failure here must not fail torch's import: torch.compile then reports what it lacks.
    try:
        for chip, (device_module, dtypes) in list(_chips.items()):
            if name == _DYNAMO:
                module.register_interface_for_device(chip, _interface(module, chip, device_module, dtypes))
            else:
                module.register_device_op_overrides(chip, _op_overrides(module, chip)())
                module.register_backend_for_device(chip, _refusing(chip), _refusing(chip), _refusing(chip))
    except Exception as error:  # noqa: BLE001
        warnings.warn(f"torch_fl: could not register {sorted(_chips)} with {name}: {type(error).__name__}: {error}",
                      stacklevel=2)


class _ThenRegister(importlib.abc.Loader):
    """Runs a module's own loader, then registers the chips in the module."""

    def __init__(self, loader, name: str):
        self.loader = loader
        self.name = name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _register_in(self.name, module)

    def __getattr__(self, attribute):   # get_source, get_filename, ... (tracebacks, inspect)
        return getattr(self.loader, attribute)

    class Finder(importlib.abc.MetaPathFinder):
        _searching = threading.local()   # another finder asking the whole meta path must not loop

        def find_spec(self, name, path, target=None):
            if name not in (_DYNAMO, _INDUCTOR) or getattr(self._searching, "active", False):
                return None
            self._searching.active = True
            try:
                for finder in sys.meta_path:
                    if finder is self or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        if spec.loader is not None:
                            spec.loader = _ThenRegister(spec.loader, name)
                        return spec
                return None
            finally:
                self._searching.active = False


def _interface(device_interface: ModuleType, chip: str, module: ModuleType, dtypes: tuple[str, ...]) -> type:
    """Dynamo's DeviceInterface for the chip, answered by torch.<chip>."""
    import torch

    class Worker:
        set_device = staticmethod(module.set_device)
        current_device = staticmethod(module.current_device)
        get_device_properties = staticmethod(module.get_device_properties)

    def exchange_device(device: int) -> int:
        previous = module.current_device()
        if device >= 0 and device != previous:
            module.set_device(device)
        return previous

    def get_compute_capability(device=None) -> int:
        major, minor = module.get_device_capability(device)
        return major * 10 + minor   # CUDA's encoding: Inductor compares these as integers

    def set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        module.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    def is_dtype_supported(dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return str(dtype).removeprefix("torch.") in dtypes

    def raise_if_triton_unavailable(device=None) -> None:
        raise ChipCompileError(inductor_refusal(chip))

    return type(f"{chip.capitalize()}Interface", (device_interface.DeviceInterface,), {
        "device": module.device,
        "Event": torch.Event,
        "Stream": torch.Stream,
        "Worker": Worker,
        "current_device": staticmethod(module.current_device),
        "set_device": staticmethod(module.set_device),
        "maybe_exchange_device": staticmethod(exchange_device),
        "exchange_device": staticmethod(exchange_device),
        "device_count": staticmethod(module.device_count),
        "is_available": staticmethod(module.is_available),
        "stream": staticmethod(module.stream),
        "current_stream": staticmethod(module.current_stream),
        "set_stream": staticmethod(module.set_stream),
        "_set_stream_by_id": staticmethod(set_stream_by_id),
        "get_raw_stream": staticmethod(lambda device_index: module.current_stream(device_index).native_handle),
        "synchronize": staticmethod(module.synchronize),
        "get_device_properties": staticmethod(module.get_device_properties),
        "get_compute_capability": staticmethod(get_compute_capability),
        "is_bf16_supported": staticmethod(lambda including_emulation=False: module.is_bf16_supported()),
        "is_dtype_supported": staticmethod(is_dtype_supported),
        "memory_allocated": staticmethod(module.memory_allocated),
        # Inductor's Triton code generation does not target the chip yet.
        "is_triton_capable": staticmethod(lambda device=None: False),
        "raise_if_triton_unavailable": staticmethod(raise_if_triton_unavailable),
    })


def _op_overrides(common: ModuleType, chip: str) -> type:
    """The Python lines Inductor's wrapper code would write for the chip's device calls."""

    class Overrides(common.DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"{name} = lambda index: torch.{chip}.current_stream(index).native_handle"

        def set_device(self, device_idx: int) -> str:
            return f"torch.{chip}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{chip}.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.{chip}.device({device_idx})"

    return Overrides


def _refusing(chip: str) -> type:
    """Stands in Inductor's slots for the chip's scheduling and wrapper code: making either, or
    asking either anything (Inductor first asks the wrapper class whether it supports caching),
    raises ChipCompileError."""

    class Refuses(type):
        def __getattr__(cls, attribute):
            raise ChipCompileError(inductor_refusal(chip))

        def __call__(cls, *args, **kwargs):
            raise ChipCompileError(inductor_refusal(chip))

    return Refuses(f"{chip.capitalize()}InductorCodegen", (), {})
