"""A generated chip's device module, `torch.<chip>`, mirroring `torch.cuda`: written once here
for every chip. The generated `device.py` is a shim that calls `install(module, spec, backend)`.

`install` defines the basics (availability, current device, streams and events, memory
statistics, the default generators) and `extend` the rest of torch.cuda's device-generic API
(device properties and capability, memory summary and snapshot, per-process fraction,
torch.cuda's old names, `torch.<chip>.amp`, `StreamContext`, peer access, fork safety). They
read the chip's name and facts from its `spec` module and reach the runtime through its
extension module `backend`; state lives on the module (`module._initialized`), as it would in
a hand-written one.
"""
from __future__ import annotations

import os
import sys
import threading
import types
import warnings
from collections import OrderedDict
from typing import Any

import torch

from torch_fl.errors import DeviceLostError, StreamTimeoutError

__all__ = ["extend", "install"]

# The basics every chip module exports (torch.cuda's names).
BASICS = (
    "Event", "Stream", "current_device", "current_stream", "default_stream", "device", "device_count",
    "empty_cache", "get_amp_supported_dtype", "get_device_name", "get_rng_state", "get_rng_state_all",
    "init", "initial_seed", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats", "seed",
    "seed_all", "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "synchronize",
)
# Private helpers `extend` and torch_fl read on the module.
_HELPERS = ("_lazy_init", "_index", "_generator")


class DeviceProperties:
    """`torch.<chip>.get_device_properties(i)`: the fields torch.cuda's object has that a chip
    can answer. `total_memory` comes from the driver; `major`/`minor` from the spec's
    `chip.capability` (0.0 when the spec declares none); `multi_processor_count` is 0: the
    driver hooks have no query for it."""

    def __init__(self, name: str, index: int, total_memory: int, major: int, minor: int, chip: str):
        self.name = name
        self.index = index
        self.total_memory = total_memory
        self.major = major
        self.minor = minor
        self.multi_processor_count = 0
        self.type = chip

    def __repr__(self) -> str:
        return (f"_{self.type.capitalize()}DeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def _summary(stats: dict, device: int, chip: str, abbreviated: bool) -> str:
    """A table of the allocator's statistics in torch.cuda.memory_summary's shape."""

    def size(n: int) -> str:
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024
        return str(n)

    rows = [("Allocated memory", "allocated_bytes", size), ("Active memory", "active_bytes", size),
            ("Requested memory", "requested_bytes", size), ("Reserved memory", "reserved_bytes", size),
            ("Non-releasable memory", "inactive_split_bytes", size), ("Allocations", "allocation", str),
            ("Active allocs", "active", str), ("Reserved segments", "segment", str)]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    line = "=" * 75
    out = [line, f" {chip.upper()} memory summary, device ID {device}".ljust(75), line,
           f" {'Metric':<26}| {'Cur Usage':>10} | {'Peak Usage':>10} | {'Tot Alloc':>10} | {'Tot Freed':>10}",
           "-" * 75]
    for title, key, fmt in rows:
        for pool in pools:
            label = title if pool == "all" else f"   from {pool.replace('_', ' ')}"
            values = [fmt(stats.get(f"{key}.{pool}.{field}", 0)) for field in ("current", "peak", "allocated", "freed")]
            out.append(f" {label:<26}| " + " | ".join(f"{v:>10}" for v in values))
        out.append("-" * 75)
    out.append(f" Device allocs / frees: {stats.get('num_device_alloc', 0)} / {stats.get('num_device_free', 0)}"
               f", OOMs: {stats.get('num_ooms', 0)}, alloc retries: {stats.get('num_alloc_retries', 0)}")
    out.append(line)
    return "\n".join(out) + "\n"


class StreamContext:
    """`torch.<chip>.StreamContext(stream)`: makes `stream` (and its device) current for the
    block, like torch.cuda.StreamContext; `None` is a no-op."""

    def __init__(self, module: types.ModuleType, stream: torch.Stream | None):
        self._module = module
        self.stream = stream
        self._previous_stream = None
        self._previous_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        self._previous_device = self._module.current_device()
        self._module.set_device(self.stream.device_index)
        self._previous_stream = self._module.current_stream()
        self._module.set_stream(self.stream)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        self._module.set_stream(self._previous_stream)
        self._module.set_device(self._previous_device)
        return False


def _amp_module(chip: str) -> types.ModuleType:
    """`torch.<chip>.amp`: autocast and GradScaler bound to the chip, as torch.cuda.amp."""
    amp = types.ModuleType(f"torch.{chip}.amp", f"Automatic mixed precision on {chip} (as torch.cuda.amp).")

    class autocast(torch.amp.autocast_mode.autocast):  # noqa: N801 - torch's name
        def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True):
            super().__init__(chip, enabled=enabled, dtype=dtype or torch.get_autocast_dtype(chip),
                             cache_enabled=cache_enabled)

    class GradScaler(torch.amp.GradScaler):
        def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True):
            super().__init__(chip, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    autocast.__qualname__ = autocast.__name__ = "autocast"
    GradScaler.__qualname__ = GradScaler.__name__ = "GradScaler"
    amp.autocast, amp.GradScaler = autocast, GradScaler
    amp.__all__ = ["autocast", "GradScaler"]
    return amp


def member_spec(spec: types.ModuleType, backend: Any, index: int) -> types.ModuleType:
    """The spec module of the chip behind device `index`: a composite's member's, else `spec`."""
    members = getattr(spec, "MEMBERS", ())
    return members[backend._member_of(index)] if members else spec


def extend(module: types.ModuleType, spec: types.ModuleType, backend: Any) -> None:
    """Add the shared part of `torch.<chip>` to the generated device `module`."""
    chip = spec.CHIP

    def get_device_properties(device: Any = None) -> DeviceProperties:
        index = module._index(device)
        module._lazy_init()
        if not 0 <= index < module.device_count():
            raise AssertionError(f"Invalid device id {index}: {chip} has {module.device_count()} device(s)")
        _, total = backend.mem_get_info(index)
        facts = member_spec(spec, backend, index)
        major, minor = tuple(getattr(facts, "CAPABILITY", (0, 0)))
        return DeviceProperties(facts.DESCRIPTION, index, int(total), major, minor, chip)

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        properties = get_device_properties(device)
        return properties.major, properties.minor

    def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
        return _summary(dict(module.memory_stats(device)), module._index(device), chip, abbreviated)

    def memory_snapshot(mempool_id: Any = None) -> list:
        """Every cached segment with its blocks (torch.cuda.memory_snapshot's segment format)."""
        if mempool_id is not None:
            raise NotImplementedError(f"memory pools are not supported on {chip}; call memory_snapshot()")
        if not module.is_initialized():
            return []
        return backend.memory_snapshot()

    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        """Cap this process's reserved memory on the device at `fraction` of its total memory:
        an allocation beyond it frees the cache and retries, then raises torch.OutOfMemoryError."""
        if not isinstance(fraction, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        module._lazy_init()
        backend.set_memory_fraction(fraction, module._index(device))

    def get_per_process_memory_fraction(device: Any = None) -> float:
        module._lazy_init()
        return backend.memory_fraction(module._index(device))

    def reset_max_memory_allocated(device: Any = None) -> None:
        module.reset_peak_memory_stats(device)

    def can_device_access_peer(device: Any, peer_device: Any) -> bool:
        """True for two distinct devices of the chip: copies between them go device to device
        through the driver (a driver without a peer path stages them itself)."""
        first, second = module._index(device), module._index(peer_device)
        count = module.device_count()
        for index in (first, second):
            if not 0 <= index < count:
                raise AssertionError(f"Invalid device id {index}: {chip} has {count} device(s)")
        return first != second

    def empty_host_cache() -> None:
        """Return cached pinned host memory to the driver (torch.accelerator.empty_host_cache
        from torch 2.12 on reaches the same allocator)."""
        backend.empty_host_cache()

    def get_sync_debug_mode() -> int:
        """Always 0 ("default"): the chip has no synchronization debug mode."""
        return 0

    def set_sync_debug_mode(debug_mode: int | str) -> None:
        if debug_mode not in (0, "default"):
            raise RuntimeError(f"{chip} has no synchronization debug mode: its runtime does not report which "
                               f"ops synchronize with the host (asked for {debug_mode!r}; only 0/'default')")

    def stream(stream: torch.Stream | None) -> StreamContext:
        """Make `stream` (and its device) current for the block, like torch.cuda.stream."""
        return StreamContext(module, stream)

    def _in_bad_fork() -> bool:
        return bool(backend._in_bad_fork())

    def _after_fork_in_child() -> None:
        # The child inherits the parent's `_initialized`; the C++ side refuses the driver.
        module._initialized = False

    functions = dict(
        get_device_properties=get_device_properties, get_device_capability=get_device_capability,
        memory_summary=memory_summary, memory_snapshot=memory_snapshot,
        set_per_process_memory_fraction=set_per_process_memory_fraction,
        get_per_process_memory_fraction=get_per_process_memory_fraction,
        reset_max_memory_allocated=reset_max_memory_allocated,
        reset_max_memory_cached=module.reset_peak_memory_stats,
        memory_cached=module.memory_reserved, max_memory_cached=module.max_memory_reserved,
        can_device_access_peer=can_device_access_peer, get_sync_debug_mode=get_sync_debug_mode,
        empty_host_cache=empty_host_cache,
        set_sync_debug_mode=set_sync_debug_mode, stream=stream, _is_in_bad_fork=_in_bad_fork,
    )
    for name, function in functions.items():
        function.__module__ = module.__name__
        setattr(module, name, function)
    module.StreamContext = type("StreamContext", (StreamContext,), {
        "__init__": lambda self, stream: StreamContext.__init__(self, module, stream),
        "__module__": module.__name__})
    module.OutOfMemoryError = torch.OutOfMemoryError
    module.DeviceProperties = DeviceProperties
    module.amp = _amp_module(chip)
    sys.modules[f"{module.__name__}.amp"] = sys.modules[f"torch.{chip}.amp"] = module.amp

    def __getattr__(name: str):
        if name == "default_generators":  # like torch.cuda's: one per device, created on first use
            return tuple(module._generator(i) for i in range(module.device_count()))
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    module.__getattr__ = __getattr__
    module.__all__ = sorted(set(module.__all__) | {n for n in functions if not n.startswith("_")}
                            | {"StreamContext", "OutOfMemoryError", "amp", "default_generators"})
    os.register_at_fork(after_in_child=_after_fork_in_child)


def install(module: types.ModuleType, spec: types.ModuleType, _C: Any) -> None:
    """Make `module` the chip's device module: the basics, then `extend`'s API."""
    _init_lock = threading.Lock()
    module._initialized = False

    def is_available() -> bool:
        """True if the driver loads and reports at least one device."""
        return _C.device_count() > 0

    def device_count() -> int:
        return _C.device_count()

    def is_initialized() -> bool:
        return module._initialized

    def _lazy_init() -> None:
        """Load the driver (once). Raises RuntimeError naming the library, symbol and spec."""
        if module._initialized:
            return
        with _init_lock:
            if not module._initialized:
                _C._lazy_init()
                module._initialized = True

    init = _lazy_init

    def _index(device: Any = None, optional: bool = True) -> int:
        if device is None:
            return current_device() if optional else 0
        if isinstance(device, int):
            return device
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type != spec.CHIP:
                raise ValueError(f"expected a {spec.CHIP} device, got {device}")
            return current_device() if device.index is None else device.index
        raise TypeError(f"cannot interpret {device!r} as a {spec.CHIP} device")

    def current_device() -> int:
        if torch.compiler.is_compiling():   # the chip is torch's accelerator: Dynamo traces this
            return torch.accelerator.current_device_index()
        _lazy_init()
        return _C.current_device()

    def set_device(device: Any) -> None:
        _lazy_init()
        _C.set_device(_index(device))

    class device:
        """Context manager that makes `device` current, like torch.cuda.device."""

        def __init__(self, device: Any):
            self.idx = _index(device, optional=False) if device is not None else -1
            self.prev_idx = -1

        def __enter__(self):
            if self.idx >= 0:
                self.prev_idx = current_device()
                if self.prev_idx != self.idx:
                    set_device(self.idx)
            return self

        def __exit__(self, *exc):
            if self.idx >= 0 and self.prev_idx != self.idx:
                set_device(self.prev_idx)
            return False

    def synchronize(device: Any = None) -> None:
        """Wait for all work queued on the device's streams."""
        _lazy_init()
        _C.synchronize(_index(device))

    def get_device_name(device: Any = None) -> str:
        index = _index(device)
        facts = member_spec(spec, _C, index)
        member = f", {facts.CHIP}" if facts is not spec else ""
        return f"{facts.DESCRIPTION} ({spec.CHIP}:{index}{member})"

    def get_amp_supported_dtype() -> list:
        """The autocast dtypes the spec lists (amp.dtypes). For any other, torch.autocast warns and
        runs without autocast, as on every custom device; torch_fl.amp.autocast refuses it."""
        return [getattr(torch, name) for name in spec.AMP_DTYPES]

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return "bfloat16" in spec.DTYPES

    # Streams and events: torch.Stream / torch.Event on this device type.

    class Stream(torch.Stream):
        """A stream of the chip; `Stream()` takes one from the device's pool."""

        def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
            if kwargs:  # rebuilt from (stream_id, device_index, device_type)
                return super().__new__(cls, **kwargs)
            _lazy_init()
            with module.device(device):
                return super().__new__(cls, device=torch.device(spec.CHIP, current_device()), priority=priority)

    class _EventType(type(torch.Event)):
        def __instancecheck__(cls, obj) -> bool:
            return isinstance(obj, torch.Event) and obj.device.type == spec.CHIP

    class Event(torch.Event, metaclass=_EventType):
        """An event of the chip. Instances are plain torch.Events on this device (torch's
        event methods accept nothing else); isinstance(e, Event) still holds."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
            _lazy_init()
            return torch.Event(device=spec.CHIP, enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def _as_stream(packed) -> Stream:
        stream_id, device_index, device_type = packed
        return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)

    def current_stream(device: Any = None) -> Stream:
        if torch.compiler.is_compiling():   # as current_device: the graph keeps the stream
            return torch.accelerator.current_stream() if device is None else torch.accelerator.current_stream(
                torch.device(spec.CHIP, device) if isinstance(device, int) else device)
        _lazy_init()
        return _as_stream(_C.current_stream(_index(device)))

    def default_stream(device: Any = None) -> Stream:
        _lazy_init()
        return _as_stream(_C.default_stream(_index(device)))

    def set_stream(stream: torch.Stream) -> None:
        if stream is None:
            return
        _lazy_init()
        _C.set_stream(stream.stream_id, stream.device_index, stream.device_type)

    # Memory: the shared caching allocator's statistics, in torch.cuda's format.

    def _flatten(prefix: str, value, out: dict) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                _flatten(f"{prefix}.{key}" if prefix else key, item, out)
        else:
            out[prefix] = value

    def memory_stats(device: Any = None) -> "OrderedDict[str, Any]":
        _lazy_init()
        flat: dict = {}
        _flatten("", _C.memory_stats(_index(device)), flat)
        return OrderedDict(sorted(flat.items()))

    def memory_allocated(device: Any = None) -> int:
        return memory_stats(device).get("allocated_bytes.all.current", 0)

    def max_memory_allocated(device: Any = None) -> int:
        return memory_stats(device).get("allocated_bytes.all.peak", 0)

    def memory_reserved(device: Any = None) -> int:
        return memory_stats(device).get("reserved_bytes.all.current", 0)

    def max_memory_reserved(device: Any = None) -> int:
        return memory_stats(device).get("reserved_bytes.all.peak", 0)

    def reset_peak_memory_stats(device: Any = None) -> None:
        _lazy_init()
        _C.reset_peak_memory_stats(_index(device))

    def reset_accumulated_memory_stats(device: Any = None) -> None:
        _lazy_init()
        _C.reset_accumulated_memory_stats(_index(device))

    def empty_cache() -> None:
        """Return cached, unused device memory to the driver."""
        if module._initialized:
            _C.empty_cache()

    def mem_get_info(device: Any = None) -> tuple:
        """(free, total) bytes of the device, from the driver."""
        _lazy_init()
        return tuple(_C.mem_get_info(_index(device)))

    # Random numbers: one default generator per device, CPU-compatible state.

    def _generator(device: Any = None) -> torch.Generator:
        _lazy_init()
        return _C.default_generator(_index(device))

    # Random kernels draw when they run on the device, in stream order: reseeding
    # first waits for queued work, so numbers drawn after a seed never go to kernels
    # queued before it.

    def _wait_before_reseed(device: Any = None) -> None:
        """Waits for the device's queued work. A device in a fault does not stop the seeding
        of the others (torch.manual_seed seeds every device): a lost device runs nothing more,
        and a stalled one is reseeded with its work still queued, with a warning."""
        try:
            synchronize(device)
        except DeviceLostError:
            pass
        except StreamTimeoutError as error:
            warnings.warn(f"{spec.CHIP}:{_index(device)} is stalled ({error}); its generator is reseeded "
                          "with that work still queued: the random numbers it draws are not "
                          "reproducible", RuntimeWarning, stacklevel=3)

    def manual_seed(seed: int) -> None:
        """Seed the current device's generator (torch.manual_seed seeds all of them)."""
        _wait_before_reseed()
        _generator().manual_seed(int(seed))

    def manual_seed_all(seed: int) -> None:
        for index in range(device_count()):
            _wait_before_reseed(index)
            _generator(index).manual_seed(int(seed))

    def seed() -> None:
        _wait_before_reseed()
        _generator().seed()

    def seed_all() -> None:
        for index in range(device_count()):
            _wait_before_reseed(index)
        first = _generator(0).seed()
        for index in range(1, device_count()):
            _generator(index).manual_seed(first)

    def initial_seed() -> int:
        return _generator().initial_seed()

    # A device's RNG state: its generator's CPU-layout state, then the Philox counter offset of
    # the kernels that draw on the chip (8 bytes, little-endian), as torch.cuda's carries its offset.
    def get_rng_state(device: Any = None) -> torch.Tensor:
        synchronize(device)  # the device's RNG advances in stream order
        return _generator(device).get_state()  # the CPU generator's layout, then the Philox offset

    def get_rng_state_all() -> list:
        return [get_rng_state(i) for i in range(device_count())]

    def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
        synchronize(device)
        generator = _generator(device)
        full = generator.get_state().numel()
        if new_state.dtype != torch.uint8 or new_state.numel() not in (full - 8, full):
            raise RuntimeError(f"RNG state of a {spec.CHIP} device: expected a ByteTensor of {full} "
                               f"bytes (get_rng_state's) or {full - 8} (a CPU generator's), got "
                               f"{new_state.dtype} of {new_state.numel()}")
        state = new_state.detach().cpu().contiguous()
        if state.numel() == full - 8:  # a CPU generator's state: the Philox stream restarts
            generator.set_offset(0)
        generator.set_state(state)

    def set_rng_state_all(new_states) -> None:
        for index, state in enumerate(new_states):
            set_rng_state(state, index)

    names = dict(locals())
    for name in (*BASICS, *_HELPERS):
        value = names[name]
        if isinstance(value, (type, types.FunctionType)):
            value.__module__ = module.__name__
            value.__qualname__ = name
        setattr(module, name, value)
    module.__all__ = list(BASICS)
    extend(module, spec, _C)
