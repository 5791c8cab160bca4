"""Registering a generated chip's backend with torch, written once for every chip.

A generated package's `__init__.py` makes one `ChipBackend` from its spec module and exposes
its `register` (as `_register`), `autoload` (the `torch.backends` entry point run by `import
torch`), `load_error` and `triton_status`. Registration renames PrivateUse1 to the chip, installs
`torch.<chip>` (torch_fl.device_module), routes the routing table's Triton ops, enables autocast
and the GradScaler kernels, and registers the spec's collective backend.
"""
from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path
from types import ModuleType

__all__ = ["ChipBackend"]


class ChipBackend:
    def __init__(self, package: str, spec: ModuleType):
        self.package = package            # e.g. "torch_fl_npu"
        self.spec = spec
        self.registered = False
        self.triton_status = "not enabled"
        self._failed_step: str | None = None  # the first registration error, reported on every later attempt
        self._load_error: str | None = None   # why autoload failed, for torch_fl's doctor
        self.deferred: str | None = None      # why autoload left the chip unregistered (coexistence)
        self._keep_alive: list = []            # torch.library registrations (Triton ops, GradScaler kernels)

    def _extension(self) -> ModuleType:
        return importlib.import_module(f"{self.package}._C")

    def _driver_search_paths(self) -> list[str]:
        # Written by `torchfl-gen build` next to the package: where the driver library lies.
        record = Path(importlib.import_module(self.package).__file__).with_name("_build.json")
        if not record.exists():
            return []
        return list(json.loads(record.read_text())["driver_search_paths"])

    def register(self) -> None:
        """Rename PrivateUse1 to the chip and install `torch.<chip>` (idempotent)."""
        if self.registered:
            return
        if self._failed_step is not None:  # a half-done registration cannot be redone in this process
            raise RuntimeError(f"registering {self.spec.CHIP} failed earlier in this process: {self._failed_step}")
        try:
            self._register_steps()
        except Exception as error:
            self._failed_step = f"{type(error).__name__}: {error}"
            raise
        self.registered = True
        self.deferred = None
        from . import coexistence

        coexistence.after_register(self.spec.CHIP)

    def _register_steps(self) -> None:
        import torch

        from . import _exit_drain, compile

        _C = self._extension()
        _C._set_driver_search_paths(self._driver_search_paths())
        torch.utils.rename_privateuse1_backend(self.spec.CHIP)
        torch._register_device_module(self.spec.CHIP, importlib.import_module(f"{self.package}.device"))
        torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
        self._route_to_triton(_C)
        self._enable_amp(_C)
        self._register_collectives()
        _exit_drain.install(self.spec.CHIP)  # a backward's last moments must not meet interpreter exit
        compile.register(self.spec.CHIP, getattr(torch, self.spec.CHIP), self.spec.DTYPES,
                         getattr(self.spec, "INDUCTOR", "none"))  # absent from packages generated before it

    def _route_to_triton(self, _C) -> None:
        """The `triton` step: the ops the routing table gives it, plus vendor ops whose kernel the
        library lacks when their own chain starts with triton."""
        from . import routes

        serves = None
        if getattr(self.spec, "MEMBERS", ()):
            ops, declined, per_member = routes.composite_triton(self.spec, _C._missing_kernel_ops())
            serves = _member_serves(self.spec.CHIP, _C, per_member)
        else:
            ops = routes.triton_ops(self.spec, missing_kernels=_C._missing_kernel_ops())
            declined = routes.declined_ops(self.spec)
        if not ops and not declined:
            return
        from . import _triton_route

        library, self.triton_status = _triton_route.enable(
            self.spec.CHIP, ops, _C._note_path, self.spec.TRITON_MODE, _C._next_step, _C._current_native_stream,
            backend=_C, declined=declined, serves=serves)
        self._keep_alive.append(library)
        _C._set_triton_status(self.triton_status)

    def _enable_amp(self, _C) -> None:
        """Autocast's default dtype (the spec's amp.default) and the GradScaler ops' kernels."""
        if not self.spec.AMP_DTYPES:
            return
        import torch

        from . import amp

        torch.set_autocast_dtype(self.spec.CHIP, getattr(torch, self.spec.AMP_DEFAULT_DTYPE))
        self._keep_alive.append(amp.register_scaler_kernels(self.spec.CHIP, _C._note_path, self.spec.TRITON_MODE))

    def _register_collectives(self) -> None:
        """The spec's `distributed` backend, for this chip's tensors."""
        if not self.spec.DIST_BACKEND:
            return
        from . import distributed

        distributed.register_chip_backend(self.spec, self._extension())

    def autoload(self) -> None:
        """The entry point `import torch` runs: a broken backend must not break torch, and a chip
        beside a native accelerator waits to be asked (torch_fl.coexistence)."""
        from . import coexistence

        try:
            load, why = coexistence.autoload_decision(self.spec.CHIP)
        except Exception as error:  # a malformed TORCH_FL_CHIPS: said, and the chip stays out
            load, why = False, str(error)
            warnings.warn(f"{self.spec.CHIP} backend ({self.package}) not loaded: {why}", stacklevel=3)
        if not load:
            self.deferred = why
            return
        try:
            self.register()
        except Exception as error:  # reported, not raised: torch itself must stay importable
            self._load_error = f"{type(error).__name__}: {error}"
            warnings.warn(f"{self.spec.CHIP} backend ({self.package}) could not be loaded: {self._load_error}",
                          stacklevel=3)

    def load_error(self) -> str | None:
        """Why the backend could not be registered or its driver loaded, or None."""
        if self._load_error is not None:
            return self._load_error
        if not self.registered:
            return f"not registered: {self.deferred}" if self.deferred else "not registered"
        return self._extension()._driver_load_error() or None


def _member_serves(chip: str, _C, per_member: list[set[str]]):
    """For a composite chip: whether the Triton step serves a call, by its first chip tensor's
    member (the current device's where it has none)."""
    import torch

    def device_of(values):
        for value in values:
            if isinstance(value, torch.Tensor):
                if value.device.type == chip:
                    return value.device.index
            elif isinstance(value, (list, tuple)):
                index = device_of(value)
                if index is not None:
                    return index
        return None

    def serves(op: str, args, kwargs) -> bool:
        index = device_of(args)
        if index is None:
            index = device_of(kwargs.values())
        if index is None:
            index = getattr(torch, chip).current_device()
        return op in per_member[_C._member_of(index)]

    return serves
