"""A chip in torch.compile: what Dynamo and Inductor learn about it.

Dynamo asks `get_interface_for_device(<chip>)` for the chip's devices, streams and properties;
Inductor asks for the chip's code generation (device op overrides, scheduling, wrapper code).
Importing either costs most of a second, so `import torch` imports neither: an import hook
registers every chip when torch first imports `torch._dynamo.device_interface` or
`torch._inductor.codegen.common` (torch.compile does), or at once where they are imported.

What Inductor makes of a chip's graphs is the spec's `compile.inductor`:

- `triton`: Inductor's own Triton code generation and Python wrapper, the graph kept on the
  chip: its buffers are the chip's tensors (its allocator), its kernels are compiled by Triton's
  active backend (for the target that backend reports) and launched on the chip's current
  stream. The chip joins Inductor's GPU types, and is the process's GPU type for Inductor's
  passes, as it is torch's accelerator. Graph replay (`mode="reduce-overhead"`) is refused by
  name: CUDA graphs would need capture pools in the chip's allocator.
- `none`: unregistered, Inductor failed deep in its wrapper code (`KeyError: 'npu'`); registered
  so, `torch.compile(model)` over chip tensors raises `ChipCompileError` naming the chip and
  what works: `backend="aot_eager"`, Dynamo's and AOTAutograd's graphs run by the chip's own
  kernels (the chip suites' test_compile.py).
"""
from __future__ import annotations

import importlib.abc
import functools
import sys
import threading
import warnings
from types import ModuleType

__all__ = ["ChipCompileError", "register"]

_DYNAMO = "torch._dynamo.device_interface"
_EVAL_FRAME = "torch._dynamo.eval_frame"
_INDUCTOR = "torch._inductor.codegen.common"
_HOOKED = (_DYNAMO, _EVAL_FRAME, _INDUCTOR)
_chips: dict[str, tuple[ModuleType, tuple[str, ...], str]] = {}   # chip -> (torch.<chip>, spec dtypes, compile.inductor)
_lock = threading.Lock()


class ChipCompileError(RuntimeError):
    """torch.compile asked for a compiler stage the chip does not have."""


def inductor_refusal(chip: str) -> str:
    return (f"torch.compile: Inductor does not generate code for chip '{chip}' (its spec's compile.inductor is "
            f"'none'; docs/compile.md). Compile with backend=\"aot_eager\" (Dynamo and AOTAutograd graphs run by "
            f"{chip}'s own kernels), or run the model eagerly.")


def graph_replay_refusal(chip: str) -> str:
    return (f"torch.compile(mode=\"reduce-overhead\") on chip '{chip}': graph replay records CUDA graphs, which "
            f"need capture pools in the chip's caching allocator, and no generated chip has them yet "
            f"(docs/compile.md). Compile with mode=\"default\" or \"max-autotune-no-cudagraphs\".")


def register(chip: str, device_module: ModuleType, dtypes: tuple[str, ...], inductor: str = "none") -> None:
    """Tell Dynamo and Inductor about `chip` (its device module, spec dtypes and
    compile.inductor) once torch imports them (now, if it has)."""
    if inductor not in ("triton", "none"):
        raise ValueError(f"chip '{chip}': compile.inductor {inductor!r} is neither 'triton' nor 'none'")
    from . import conv_layout

    conv_layout.install(chip)   # traced convolutions' strides, for every compile backend
    with _lock:
        _chips[chip] = (device_module, tuple(dtypes), inductor)
        if not any(isinstance(finder, _ThenRegister.Finder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _ThenRegister.Finder())
    for name in _HOOKED:
        module = sys.modules.get(name)
        if module is not None:
            _register_in(name, module)
            if name == _INDUCTOR:   # imported before: modules hold its unwrapped registration
                _register_pending_triton(module)


def _register_in(name: str, module: ModuleType) -> None:
    # A failure here must not fail torch's import: torch.compile then reports what it lacks.
    try:
        if name == _EVAL_FRAME:
            # The chips' kernels turn Dynamo's frame hook off (torch_fl._outside_dynamo), but
            # the hook sees the frame that does so: Dynamo is told to skip that frame.
            from ._outside_dynamo import WRAPPER_CODE

            module.skip_code(WRAPPER_CODE)
            return
        for chip, (device_module, dtypes, inductor) in list(_chips.items()):
            if name == _DYNAMO:
                module.register_interface_for_device(chip, _interface(module, chip, device_module, dtypes, inductor))
            else:
                module.register_device_op_overrides(chip, _op_overrides(module, chip)())
                if inductor == "none":
                    module.register_backend_for_device(chip, _refusing(chip), _refusing(chip), _refusing(chip))
        if name == _INDUCTOR:
            triton_chips = [chip for chip, (_, _, inductor) in _chips.items() if inductor == "triton"]
            if triton_chips:
                _join_gpu_types(triton_chips)
            _after_backend_registration(module)
    except Exception as error:  # noqa: BLE001
        warnings.warn(f"torch_fl: could not register {sorted(_chips)} with {name}: {type(error).__name__}: {error}",
                      stacklevel=2)


def _after_backend_registration(common: ModuleType) -> None:
    """Inductor registers its own backends in `init_backend_registration()`, importing its Triton
    code generation there; the Triton chips are registered right after it, once, when their
    classes exist. Every caller (Inductor's modules import the name after this hook ran, and
    common's own functions look it up) gets the wrapped function."""
    original = common.init_backend_registration
    if getattr(original, "_torch_fl_chips", False):
        return

    def init_backend_registration():
        original()
        _register_pending_triton(common)

    init_backend_registration._torch_fl_chips = True
    common.init_backend_registration = init_backend_registration


_triton_registered: set[str] = set()


def _register_pending_triton(common: ModuleType) -> None:
    pending = [chip for chip, (_, _, inductor) in list(_chips.items())
               if inductor == "triton" and chip not in _triton_registered]
    if not pending:
        return
    try:
        _register_triton(common, pending)
    except Exception as error:  # noqa: BLE001 - torch.compile then reports what it lacks
        warnings.warn(f"torch_fl: could not register {pending} with Inductor's Triton code generation: "
                      f"{type(error).__name__}: {error}", stacklevel=2)


def _register_triton(common: ModuleType, chips: list[str]) -> None:
    """Inductor's Triton scheduling and Python wrapper for `chips`, which join its GPU types."""
    from torch._inductor import config, scheduler
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    _triton_driver()   # where Triton interprets (a simulated chip), the interpreter's, installed now
    _triton_for_chips(scheduler)
    for chip in chips:
        class ChipTritonScheduling(TritonScheduling):
            _chip = chip

            def __init__(self, scheduler):
                if scheduler is not None and config.triton.cudagraphs:
                    _no_graph_replay(self._chip)
                super().__init__(scheduler)

        ChipTritonScheduling.__name__ = ChipTritonScheduling.__qualname__ = f"{chip.capitalize()}TritonScheduling"
        try:
            common.register_backend_for_device(chip, ChipTritonScheduling, PythonWrapperCodegen,
                                               device_custom_pass=_cache_key_pass(chip))
        except TypeError:  # a torch without custom backend passes: its caches key on torch alone
            common.register_backend_for_device(chip, ChipTritonScheduling, PythonWrapperCodegen)
        _no_gemm_templates(chip)
        _triton_registered.add(chip)


def _no_gemm_templates(chip: str) -> None:
    """Inductor's Triton GEMM templates (max-autotune's matmul candidates) come with per-device
    config heuristics; the chip gets the base heuristics, which offer none: its matmuls stay the
    chip's own kernels (extern; docs/compile.md), and Inductor logs no error per matmul."""
    try:
        import torch._inductor.template_heuristics  # noqa: F401 - registers torch's own
        from torch._inductor.template_heuristics import registry
        from torch._inductor.template_heuristics.base import TemplateConfigHeuristics
    except ImportError:   # a torch without per-device template heuristics
        return
    for template, device, op in list(registry._TEMPLATE_HEURISTIC_REGISTRY):
        if device == "cuda" and registry.get_registered_heuristic_class(template, chip, op) is None:
            registry.register_template_heuristic(template, chip, op_name=op)(TemplateConfigHeuristics)


def _triton_for_chips(scheduler: ModuleType) -> None:
    """Inductor's scheduler asks `has_triton()` whether Triton runs on one of the devices torch
    names (cuda, xpu, cpu, mtia); a Triton chip's code is Triton's too: yes where one is present."""
    has_triton = scheduler.has_triton
    if getattr(has_triton, "_torch_fl_chips", False):
        return

    def has_triton_or_chip() -> bool:
        if has_triton():
            return True
        from torch.utils._triton import has_triton_package

        return has_triton_package() and any(
            inductor == "triton" and module.is_available() for module, _, inductor in _chips.values())

    has_triton_or_chip._torch_fl_chips = True
    scheduler.has_triton = has_triton_or_chip


def _cache_key_pass(chip: str):
    """A graph pass that changes nothing: Inductor puts its uuid() in the key of its on-disk
    caches, which know nothing of this module's registration (the wrapper's stream and device
    calls it writes): code compiled under another torch_fl is not served again."""
    import hashlib
    from pathlib import Path

    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    key = (chip, "triton", hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16])

    class TorchFlRegistration(CustomGraphModulePass):
        def __call__(self, gm) -> None:
            return None

        def uuid(self):
            return key

    return TorchFlRegistration()


def _join_gpu_types(chips: list[str]) -> None:
    """The Triton chips join Inductor's GPU types, before its first graph pass (they run as
    soon as torch.compile imports Inductor). Its passes ask get_gpu_type() for "the" GPU: with a
    chip registered that is the chip, as torch's accelerator is (a process with cuda beside it
    refuses cuda backward, and Inductor asserts on two GPU types). That answer is cached: asked
    once with the chip alone. Kernels' DeviceProperties are the Triton target's."""
    from torch._inductor import utils
    from torch._inductor.runtime import hints

    known = [gpu for gpu in utils.GPU_TYPES if gpu not in chips]
    utils.GPU_TYPES[:] = list(chips[:1])
    utils.get_gpu_type.cache_clear()
    try:
        utils.get_gpu_type()
    finally:
        utils.GPU_TYPES[:] = known + list(chips)
    _target_properties.install(hints, chips)


def _no_graph_replay(chip: str) -> None:
    """mode="reduce-overhead" asks for graph replay alone: refused by name. max-autotune asks for it
    beside autotuning: it runs without, said once."""
    from torch._inductor import config

    if not config.max_autotune:
        raise ChipCompileError(graph_replay_refusal(chip))
    if chip not in _warned_replay:
        _warned_replay.add(chip)
        warnings.warn(f"torch.compile(mode=\"max-autotune\") on chip '{chip}' runs without graph replay (CUDA graphs "
                      f"need capture pools in the chip's allocator; docs/compile.md)", stacklevel=2)


_warned_replay: set[str] = set()


class _target_properties:
    """Inductor describes a kernel's device by `DeviceProperties.create(device)`, whose `type`
    becomes the Triton target's backend and whose `cc` its architecture. For a Triton chip both
    are what Triton's active backend compiles for (its current target), with the device's limits
    from Triton's driver, not the chip's spec capability."""

    chips: set[str] = set()

    @staticmethod
    def install(hints: ModuleType, chips: list[str]) -> None:
        _target_properties.chips.update(chips)
        create = hints.DeviceProperties.create
        if getattr(create, "_torch_fl_chips", False):
            return

        def chip_create(cls, device):
            device_type = getattr(device, "type", device)
            if device_type in _target_properties.chips:
                return _target_properties.of(cls, device_type, getattr(device, "index", None) or 0)
            return create(device)

        chip_create._torch_fl_chips = True
        hints.DeviceProperties.create = classmethod(chip_create)

    @staticmethod
    @functools.cache
    def of(cls, chip: str, index: int):
        target = _triton_target()
        limits = _triton_driver().utils.get_device_properties(index)
        return cls(type=target.backend, index=index, multi_processor_count=limits["multiprocessor_count"],
                   cc=target.arch, major=target.arch // 10 if isinstance(target.arch, int) else None,
                   regs_per_multiprocessor=limits.get("max_num_regs"), warp_size=target.warp_size,
                   max_threads_per_block=1024,
                   max_threads_per_multi_processor=_target_properties.threads_per_multiprocessor(
                       target, limits, chip, index))

    @staticmethod
    def threads_per_multiprocessor(target, limits: dict, chip: str, index: int) -> int:
        """Inductor sizes reductions by it (and asserts it is known). Triton's driver does not
        report it; a CUDA or HIP target's runtime does, through torch.cuda (the chip's device
        `index` is that runtime's: the chip drives the same GPUs)."""
        if "max_threads_per_multiprocessor" in limits:
            return limits["max_threads_per_multiprocessor"]
        import torch

        if target.backend in ("cuda", "hip") and torch.cuda.is_available():
            return torch.cuda.get_device_properties(index).max_threads_per_multi_processor
        raise RuntimeError(f"Inductor on chip '{chip}': the Triton target {target.backend} (arch {target.arch}) "
                           "reports no threads per multiprocessor, which Inductor's reduction heuristics need; "
                           "its Triton driver's get_device_properties should give max_threads_per_multiprocessor")


def _triton_driver():
    from triton.runtime import driver

    from . import _triton_interpreter

    if _triton_interpreter.interprets():   # no GPU backend to ask: the interpreter answers
        _triton_interpreter.install(next(chip for chip, (_, _, inductor) in _chips.items() if inductor == "triton"))
    return driver.active


def _triton_target():
    return _triton_driver().get_current_target()


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
            if name not in _HOOKED or getattr(self._searching, "active", False):
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


def _interface(device_interface: ModuleType, chip: str, module: ModuleType, dtypes: tuple[str, ...],
               inductor: str) -> type:
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
        if inductor == "triton":   # what its kernels are compiled for
            return _triton_target().arch
        major, minor = module.get_device_capability(device)
        return major * 10 + minor   # CUDA's encoding: Inductor compares these as integers

    def set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        module.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    def is_dtype_supported(dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return str(dtype).removeprefix("torch.") in dtypes

    def raise_if_triton_unavailable(device=None) -> None:
        if inductor != "triton":
            raise ChipCompileError(inductor_refusal(chip))
        from torch.utils._triton import has_triton

        if not has_triton():
            raise ChipCompileError(f"torch.compile on chip '{chip}': Inductor compiles its kernels with Triton, "
                                   f"which is not installed (or finds no device) in this environment")

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
        "is_triton_capable": staticmethod(lambda device=None: inductor == "triton"),
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
