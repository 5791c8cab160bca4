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
    kind: str = "generated"    # "generated" (torchfl-gen), "native" (a native spec's package), "out-of-tree" (torch.backends)
    runtime_version: str | None = None  # what the loaded driver reports
    libraries: tuple[str, ...] = ()     # the driver libraries loaded, with their paths


_backends: dict[str, BackendInfo] = {}


def _generated_module(name: str):
    """The package of the generated backend serving device type `name`, or None."""
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return importlib.import_module(entry.value)
    return None


def _version_text(code, scales: tuple[int, int]) -> str:
    """A driver version code as the spec writes versions, by the package's DRIVER_VERSION_SCALES:
    2010 -> "2.1" with CUDA's (1000*major + 10*minor), 50221153 -> "5.2" with HIP's (10000000, 100000)."""
    major_scale, minor_scale = scales
    if isinstance(code, int) and code >= major_scale:
        major, rest = divmod(code, major_scale)
        return f"{major}.{rest // minor_scale}"
    return str(code)


def _probe(entry) -> BackendInfo:
    log.debug("torch_fl: found backend %s -> %s", entry.name, entry.value)
    taken = torch._C._get_privateuse1_backend_name()
    if taken not in ("privateuseone", entry.name):
        # One PrivateUse1 backend per process: the first one registered keeps it.
        error = (f"PrivateUse1 is taken by '{taken}' in this process (one generated backend per process; "
                 f"use this one with TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import {entry.value} first)")
        log.debug("torch_fl: %s not registered: %s", entry.name, error)
        return BackendInfo(entry.name, entry.value, False, 0, None, error)
    try:
        module = importlib.import_module(entry.value)
        module._register()
        log.debug("torch_fl: %s registered as torch.%s", entry.value, entry.name)
        error = module.load_error()
        built = module.spec.DRIVER_VERSION
        runtime = libraries = None
        if error is None:
            libraries = tuple(module._C._driver_libraries())
            runtime = _version_text(module._C._driver_version(), module.spec.DRIVER_VERSION_SCALES)
            log.debug("torch_fl: %s driver loaded from %s, version %s (built for %s)", entry.name,
                      ", ".join(libraries), runtime, built)
        device_module = getattr(torch, entry.name)
        count = device_module.device_count() if error is None else 0
        log.debug("torch_fl: %s driver: %s; %d device(s)", entry.name, error or "loaded", count)
        return BackendInfo(entry.name, entry.value, error is None and count > 0, count, built, error,
                           runtime_version=runtime, libraries=libraries or ())
    except Exception as exc:  # a broken backend is reported, not fatal
        log.debug("torch_fl: %s failed: %s", entry.name, exc)
        return BackendInfo(entry.name, entry.value, False, 0, None, f"{type(exc).__name__}: {exc}")


def _probe_native(entry) -> BackendInfo:
    """A native chip (its spec's package): available when this torch is the build that drives it
    and sees a device."""
    from . import chips

    try:
        spec = importlib.import_module(f"{entry.value}.spec")
    except Exception as exc:
        return BackendInfo(entry.name, entry.value, False, 0, None, f"{type(exc).__name__}: {exc}", kind="native")
    build = chips.torch_build()
    if build != spec.TORCH_BUILD:
        have = f"a {build} build" if build else "a CPU build"
        error = f"needs a {spec.TORCH_BUILD} build of torch; this torch ({torch.__version__}) is {have}"
        log.debug("torch_fl: native %s unavailable: %s", entry.name, error)
        return BackendInfo(entry.name, entry.value, False, 0, None, error, kind="native")
    version = getattr(torch.version, spec.TORCH_BUILD)
    try:
        count = getattr(torch, spec.DEVICE_TYPE).device_count()
        error = None if count > 0 else "no devices (driver missing or no GPU visible)"
    except Exception as exc:
        count, error = 0, f"{type(exc).__name__}: {exc}"
    log.debug("torch_fl: native %s (torch built for %s %s): %d device(s)%s", entry.name, spec.TORCH_BUILD,
              version, count, f"; {error}" if error else "")
    return BackendInfo(entry.name, entry.value, count > 0, count, version, error, kind="native",
                       runtime_version=version)


def _probe_out_of_tree(entry) -> BackendInfo:
    """A torch.backends entry point that is not a torch_fl backend: torch autoloads it; look at torch.<name>."""
    log.debug("torch_fl: found out-of-tree backend %s -> %s", entry.name, entry.value)
    device_module = getattr(torch, entry.name, None)
    if device_module is None or not hasattr(device_module, "device_count"):
        error = f"torch.{entry.name} is missing (autoload off, or {entry.value} failed)"
        return BackendInfo(entry.name, entry.value.split(":")[0], False, 0, None, error, kind="out-of-tree")
    try:
        count = device_module.device_count()
        error = None if count > 0 else "no devices"
    except Exception as exc:
        count, error = 0, f"{type(exc).__name__}: {exc}"
    log.debug("torch_fl: %s: %d device(s)", entry.name, count)
    return BackendInfo(entry.name, entry.value.split(":")[0], count > 0, count, None, error, kind="out-of-tree")


def init(verbose: bool = False, check_autograd: bool = True, chips: list[str] | None = None) -> dict[str, BackendInfo]:
    """Discover the installed backends, register and probe each; idempotent.

    Generated backends are found through the `torch_fl.backends` entry points (each also has a
    `torch.backends` one, through which `import torch` loads it), native chips (CUDA, ROCm: the
    packages of `integration: native` specs) through `torch_fl.native`; other `torch.backends`
    entry points are reported too. Returns chip name -> BackendInfo.
    `chips`: the generated chips to register (the others are probed, not registered). Without
    it, a chip registers unless torch drives a native accelerator in this process, where a
    registered chip would break autograd on it (torch_fl.coexistence): there it is reported
    unavailable with that reason until asked for by name.
    Installs the autograd device check (torch_fl.autograd_check) unless `check_autograd` is
    False or TORCH_FL_AUTOGRAD_CHECK=0. Steps are logged at DEBUG on logger "torch_fl".
    """
    from . import coexistence

    if verbose:
        logging.basicConfig(level=logging.DEBUG)
    generated = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    log.debug("torch_fl: entry points %s: %s", ENTRY_POINT_GROUP, [e.name for e in generated] or "none")
    if chips is not None:
        unknown = sorted(set(chips) - {e.name for e in generated})
        if unknown:
            raise ValueError(f"torch_fl.init(chips=...): no generated backend named {', '.join(unknown)}; "
                             f"installed: {sorted(e.name for e in generated) or 'none'} "
                             "(build one with torchfl-gen build SPEC)")
    for entry in generated:
        if entry.name in _backends and _backends[entry.name].available:
            continue
        registered = torch._C._get_privateuse1_backend_name() == entry.name
        if chips is not None:
            wanted, why = entry.name in chips, "not among init(chips=...)"
        else:
            wanted, why = coexistence.autoload_decision(entry.name)
        if registered or wanted:
            _backends[entry.name] = _probe(entry)
        else:
            log.debug("torch_fl: %s not registered: %s", entry.name, why)
            _backends[entry.name] = BackendInfo(entry.name, entry.value, False, 0, None, f"not registered: {why}")
    others = [e for e in metadata.entry_points(group="torch.backends") if e.name not in {g.name for g in generated}]
    log.debug("torch_fl: other torch.backends entry points: %s", [e.name for e in others] or "none")
    for entry in others:
        _backends[entry.name] = _probe_out_of_tree(entry)
    for entry in sorted(metadata.entry_points(group="torch_fl.native"), key=lambda e: e.name):
        _backends[entry.name] = _probe_native(entry)
    if check_autograd:
        from . import autograd_check

        autograd_check.install()
    return dict(_backends)


def set_default_device(device: str | torch.device) -> torch.device:
    """Make `device` the default for tensor creation; a generated chip named here is registered
    first (where torch drives a native accelerator too, this is how a chip is asked for:
    torch_fl.coexistence). Errors if it is unusable."""
    text = str(device)
    kind = text.split(":", 1)[0]   # torch.device() cannot parse a chip's name before it registers
    if kind not in ("cpu", "cuda", "meta"):
        generated = {e.name for e in metadata.entry_points(group=ENTRY_POINT_GROUP)}
        info = (init(chips=[kind]) if kind in generated else init()).get(kind)
        if info is None:
            raise RuntimeError(f"no torch_fl backend provides device '{kind}'; "
                               f"installed: {sorted(init()) or 'none'} (build one with torchfl-gen build SPEC)")
        if not info.available:
            raise RuntimeError(f"device '{kind}' is not available: {info.error or 'no devices'}")
    device = torch.device(text)
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
