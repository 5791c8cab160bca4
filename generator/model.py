"""The validated chip spec as frozen dataclasses: the single truth the templates format.

Nothing here reads YAML or knows about locations; `generator.spec.load_spec` builds a
`ChipSpec` only from a document that passed schema and semantic validation.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path

from .triton_catalog import TritonCatalog

# Driver hooks every privateuse1 chip must provide, in the order the generated
# code declares them. The C signature of each is fixed (the hook ABI, see
# docs/spec.md): a CUDA-runtime-shaped C API with int status codes.
REQUIRED_HOOKS = (
    "driver_version", "error_string", "device_count", "set_device", "get_device",
    "device_synchronize", "malloc", "free", "mem_get_info", "host_malloc", "host_free",
    "memcpy", "memcpy_async", "memset_async",
    "stream_create", "stream_destroy", "stream_synchronize", "stream_query", "stream_wait_event",
    "event_create", "event_destroy", "event_record", "event_query", "event_synchronize",
    "event_elapsed_time",
)

# driver.version_encoding -> (major scale, minor scale) of the driver_version hook's integer
VERSION_SCALES = {"cuda": (1000, 10), "hip": (10_000_000, 100_000)}

FALLBACK_STEPS = ("triton", "cpu")
# Floating dtypes, in the order the generated tests prefer one to compute in.
FLOATING_DTYPES = ("float32", "float16", "bfloat16", "float64")
TRITON_MODES = ("compile", "interpret")
WARN_POLICIES = ("once", "always", "never")


@dataclass(frozen=True)
class Chip:
    name: str             # torch device type string, e.g. "npu"
    vendor: str
    integration: str      # "privateuse1", "native" or "composite"
    description: str
    capability: tuple[int, int] = (0, 0)  # MAJOR, MINOR (chip.capability)

    def __post_init__(self):
        # The name becomes a Python package, a C++ string and torch's device type.
        if not (self.name.isidentifier() and self.name.isascii() and self.name.islower()):
            raise ValueError(f"chip name {self.name!r} is not a lowercase ASCII identifier")
        if self.integration not in ("privateuse1", "native", "composite"):
            raise ValueError(f"integration {self.integration!r} is not privateuse1, native or composite")

    @property
    def package(self) -> str:
        """Python package of the generated backend, e.g. torch_fl_npu."""
        return f"torch_fl_{self.name}"

    @property
    def distribution(self) -> str:
        return f"torch-fl-{self.name}"


@dataclass(frozen=True)
class DriverStatus:
    success: int
    not_ready: int
    out_of_memory: int
    # Optional: statuses torch_fl raises as named exceptions (torch_fl.KernelError, ...).
    launch_failure: int | None = None
    device_lost: int | None = None
    timeout: int | None = None


@dataclass(frozen=True)
class MemcpyKinds:
    host_to_host: int
    host_to_device: int
    device_to_host: int
    device_to_device: int


# Native device types a driver may share memory with, and their c10::DeviceType names: cuda
# only, whose events (cudaEvent_t) a CUDA-shaped driver's event hooks take as they are.
SHARED_MEMORY_DEVICES = {None: None, "cuda": "CUDA"}


@dataclass(frozen=True)
class Driver:
    libraries: tuple[str, ...]          # file names, dlopen'ed in order
    search_paths: tuple[Path, ...]      # absolute, resolved against the spec's folder
    home_env: str | None                # env var naming a folder that overrides search_paths
    version: str                        # "2.1": the driver version the backend is built for
    status: DriverStatus
    memcpy_kinds: MemcpyKinds
    hooks: tuple[tuple[str, str], ...]  # (hook, symbol) in REQUIRED_HOOKS order
    # Every version the spec builds: driver.version first, then driver.versions in order.
    versions: tuple[str, ...] = ()
    version_encoding: str = "cuda"      # how driver_version encodes it: VERSION_SCALES' key
    # The native torch device type whose runtime this driver is ("cuda"): copies
    # between the chip and that device run device to device. None: through the host.
    shares_memory_with: str | None = None

    def __post_init__(self):
        if tuple(hook for hook, _ in self.hooks) != REQUIRED_HOOKS:
            raise ValueError("driver hooks must be REQUIRED_HOOKS, in order")
        if self.version_encoding not in VERSION_SCALES:
            raise ValueError(f"unknown driver version encoding {self.version_encoding!r}")
        if self.versions and self.versions[0] != self.default_version:
            raise ValueError("Driver.versions starts with the default version")
        if self.shares_memory_with not in SHARED_MEMORY_DEVICES:
            raise ValueError(f"unknown native device type {self.shares_memory_with!r}")

    @property
    def default_version(self) -> str:
        return self.versions[0] if self.versions else self.version

    @property
    def version_scales(self) -> tuple[int, int]:
        return VERSION_SCALES[self.version_encoding]

    @property
    def version_code(self) -> int:
        """The driver's integer encoding of `version` (patch 0): major*1000 + minor*10 for CUDA's."""
        major, _, minor = self.version.partition(".")
        major_scale, minor_scale = self.version_scales
        return int(major) * major_scale + int(minor or 0) * minor_scale

    @property
    def shared_memory_device_type(self) -> str | None:
        """The c10::DeviceType enumerator of `shares_memory_with` ("CUDA"), None without."""
        return SHARED_MEMORY_DEVICES[self.shares_memory_with]

    def symbol(self, hook: str) -> str:
        return dict(self.hooks)[hook]


@dataclass(frozen=True)
class Kernels:
    namespace: str                      # C++ namespace, e.g. "simnpu::ops"
    headers: tuple[str, ...]            # as written in #include <...>
    include_dirs: tuple[Path, ...]      # absolute
    libraries: tuple[str, ...]          # linker names (-l)
    library_dirs: tuple[Path, ...]      # absolute
    sources: tuple[Path, ...] = ()      # absolute; compiled into the backend
    toolkit: str = "none"               # "none" or "cuda"


@dataclass(frozen=True)
class Argument:
    name: str
    cpp_type: str                       # dispatcher C++ type, e.g. "const at::Tensor &"

    @property
    def _bare_type(self) -> str:
        return self.cpp_type.replace(" ", "")

    @property
    def reads_tensor(self) -> bool:
        """A tensor the op only reads (an input, possibly optional)."""
        return self._bare_type in ("constat::Tensor&", "const::std::optional<at::Tensor>&")

    @property
    def writes_tensor(self) -> bool:
        """A tensor the op writes (self of an in-place op, an out= argument)."""
        return self._bare_type == "at::Tensor&"

    @property
    def lists_tensors(self) -> bool:
        """A list of tensors the op reads (cat's `tensors`)."""
        return self._bare_type in ("constat::ITensorListRef&", "at::TensorList", "constat::TensorList&")


@dataclass(frozen=True)
class OpSignature:
    """An aten op's dispatcher signature, taken from the installed torch."""
    schema: str                         # "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    returns: str                        # C++ return type
    arguments: tuple[Argument, ...]

    def decl(self, name: str) -> str:
        args = ", ".join(f"{a.cpp_type} {a.name}" for a in self.arguments)
        return f"{self.returns} {name}({args})"

    def call_args(self) -> str:
        return ", ".join(a.name for a in self.arguments)

    def kernel_call_args(self) -> tuple[str, ...]:
        """The arguments a vendor kernel is called with. Kernels read raw memory, so an input
        that is a lazily conjugated or negated view (torch's math bits, which torch lets through
        to the backend for mm, addmm, bmm, dot, copy_, ...) is materialised first."""
        return tuple(f"torch_fl::resolve_math_bits({a.name})" if a.reads_tensor else a.name
                     for a in self.arguments)

    @property
    def written_tensors(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments if a.writes_tensor)


@dataclass(frozen=True)
class OpEntry:
    name: str                           # "add.Tensor"
    kernel: str | None                  # vendor kernel name in Kernels.namespace, or None
    fallback: tuple[str, ...]           # chain tried when there is no kernel; () = error
    require_vendor: bool
    signature: OpSignature
    line: int                           # line in the spec, for error messages pointing back
    dtypes: tuple[str, ...] | None = None  # the kernel's dtypes; others take `fallback`; None: all

    def __post_init__(self):
        if any(step not in FALLBACK_STEPS for step in self.fallback):
            raise ValueError(f"{self.name}: unknown fallback step in {self.fallback}")
        if self.require_vendor and (self.kernel is None or self.fallback):
            raise ValueError(f"{self.name}: 'require: vendor' needs a kernel and no fallback")
        if self.dtypes is not None and (self.kernel is None or not self.dtypes):
            raise ValueError(f"{self.name}: 'dtypes' needs a kernel and at least one dtype")

    @property
    def cpp_ident(self) -> str:
        """A C++ identifier for this op, e.g. add_Tensor, add__Tensor."""
        return self.name.replace(".", "_")


@dataclass(frozen=True)
class Route:
    """Where one aten op runs on the chip. Decided once, by `ChipSpec.route`; the generated
    C++ fallback, the Python Triton router, the generated tests, `matrix` and `coverage` read
    it (through the `ROUTES` table of the generated spec.py, or from the model)."""
    op: str
    kernel: str | None                  # vendor kernel tried first, or None
    chain: tuple[str, ...]              # steps after (or instead of) it: triton | cpu; () = error
    triton: bool                        # the Triton step serves the op when the chain reaches it
    line: int | None = None             # the spec line naming the op; None: fallback.default

    def __post_init__(self):
        if any(step not in FALLBACK_STEPS for step in self.chain):
            raise ValueError(f"{self.op}: unknown fallback step in {self.chain}")
        if self.triton and self.chain[:1] != ("triton",):
            raise ValueError(f"{self.op}: Triton serves only a chain that starts with triton")

    @property
    def path(self) -> str:
        """What the spec declares the op runs on: vendor | triton | cpu | error."""
        if self.kernel is not None:
            return "vendor"
        for step in self.chain:
            if step == "triton" and self.triton:
                return "triton"
            if step == "cpu":
                return "cpu"
        return "error"


@dataclass(frozen=True)
class FallbackPolicy:
    default: tuple[str, ...]            # chain for ops the spec does not name
    warn: str                           # once | always | never
    triton: str                         # how the triton step runs: compile | interpret

    def __post_init__(self):
        if any(step not in FALLBACK_STEPS for step in self.default):
            raise ValueError(f"unknown fallback step in {self.default}")
        if self.warn not in WARN_POLICIES or self.triton not in TRITON_MODES:
            raise ValueError(f"fallback warn {self.warn!r} / triton {self.triton!r} out of range")


INDUCTOR_CODEGENS = ("triton", "none")
# The matrix products Inductor's graphs call as extern kernels, with out= (`mm(a, b, out=buf)`).
INDUCTOR_OUT_FORMS = (("mm", "mm.out"), ("addmm", "addmm.out"), ("bmm", "bmm.out"), ("baddbmm", "baddbmm.out"))


@dataclass(frozen=True)
class Compile:
    inductor: str = "none"              # how Inductor makes the chip's kernels: triton | none

    def __post_init__(self):
        if self.inductor not in INDUCTOR_CODEGENS:
            raise ValueError(f"compile inductor {self.inductor!r} out of range")


@dataclass(frozen=True)
class Amp:
    dtypes: tuple[str, ...]             # torch dtype names, e.g. ("float16", "bfloat16")
    default: str
    # aten ops ("conv2d", "pow.Tensor_Scalar") per casting policy; the spec's lists or,
    # where it gives none, PyTorch's CUDA lists of the installed torch
    lower_precision_ops: tuple[str, ...] = ()
    fp32_ops: tuple[str, ...] = ()
    promote_ops: tuple[str, ...] = ()

    def __post_init__(self):
        if self.default not in self.dtypes:
            raise ValueError(f"amp default {self.default!r} is not one of {self.dtypes}")


@dataclass(frozen=True)
class CollectiveStatus:
    success: int
    in_progress: int
    remote_error: int | None = None
    timeout: int | None = None


@dataclass(frozen=True)
class CollectiveLibrary:
    """The chip's collective library (`distributed.library`): NCCL-shaped hooks (collective_abi)."""
    libraries: tuple[str, ...]          # file names, dlopen'ed in order (searched as the driver's)
    unique_id_bytes: int                # size of the library's communicator id struct
    status: CollectiveStatus
    dtypes: tuple[tuple[str, int], ...]     # (torch dtype, the library's code), in `dtypes:` order
    reduce_ops: tuple[tuple[str, int], ...]  # (ReduceOp name, the library's code), in REDUCE_OPS order
    hooks: tuple[tuple[str, str], ...]  # (hook, symbol) in COLLECTIVE_HOOKS order; all_to_all may be absent
    # (variable, value) the library reads, set at load where the process has not set it
    environment: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        from .collective_abi import COLLECTIVE_HOOKS, REDUCE_OPS, REQUIRED_COLLECTIVE_HOOKS

        named = tuple(hook for hook, _ in self.hooks)
        if named[:len(REQUIRED_COLLECTIVE_HOOKS)] != REQUIRED_COLLECTIVE_HOOKS or not set(named) <= set(COLLECTIVE_HOOKS):
            raise ValueError("collective hooks must be REQUIRED_COLLECTIVE_HOOKS, in order, then optional ones")
        if "sum" not in dict(self.reduce_ops) or not set(dict(self.reduce_ops)) <= set(REDUCE_OPS):
            raise ValueError("reduce_ops must name sum and only torch's reductions")

    def symbol(self, hook: str) -> str | None:
        return dict(self.hooks).get(hook)


@dataclass(frozen=True)
class Distributed:
    backend: str                        # torch.distributed backend name, e.g. "npuccl"
    replaces: tuple[str, ...]           # names scripts pass that mean this backend here, e.g. ("nccl",)
    unsupported_options: tuple[str, ...]  # options the library does not accept
    init_method: str                    # tcp | env | file
    staging: str                        # without a library: how collectives move data ("gloo", host memory)
    library: CollectiveLibrary | None = None  # the chip's collective library, when it has one


@dataclass(frozen=True)
class ChipSpec:
    spec_version: int
    source: Path                        # the spec file, absolute
    source_display: str                 # as given on the command line, for messages
    spec_sha256: str                    # of the file's bytes: headers and build-cache keys
    chip: Chip
    driver: Driver
    kernels: Kernels | None
    dtypes: tuple[str, ...]
    fallback: FallbackPolicy            # the spec's `fallback`, its defaults filled from the schema
    ops: tuple[OpEntry, ...] = field(default=())
    amp: Amp | None = None
    distributed: Distributed | None = None
    compile: Compile = Compile()
    # The shared Triton library's ops (runtime data, passed in: the model imports no runtime).
    triton_catalog: TritonCatalog = TritonCatalog(ops=frozenset(), compiled_only=frozenset())

    def __post_init__(self):
        names = [op.name for op in self.ops]
        if len(names) != len(set(names)):
            raise ValueError("an op is named twice in ops")
        # autograd, optimizers and the generated suite compute in a floating dtype
        if not set(self.dtypes) & set(FLOATING_DTYPES):
            raise ValueError(f"dtypes {self.dtypes} hold no floating dtype")
        if self.amp is not None and not set(self.amp.dtypes) <= set(self.dtypes):
            raise ValueError(f"amp dtypes {self.amp.dtypes} are not all in dtypes {self.dtypes}")

    def route(self, name: str) -> Route:
        """The one routing decision. A named op keeps its kernel and its own chain (a vendor
        op's chain applies when the library lacks its kernel at load time); any other op takes
        `fallback.default`. The Triton step serves an op its library has when the chain starts
        with triton; for ops the spec does not name, the foreach family (`compiled_only`) only
        where Triton compiles: interpreted, torch's per-tensor decomposition is faster."""
        entry = self.op(name)
        chain = entry.fallback if entry is not None else self.fallback.default
        triton = chain[:1] == ("triton",) and name in self.triton_catalog
        if entry is None and self.fallback.triton == "interpret" and name in self.triton_catalog.compiled_only:
            triton = False
        if entry is None:
            return Route(op=name, kernel=None, chain=chain, triton=triton)
        return Route(op=name, kernel=entry.kernel, chain=chain, triton=triton, line=entry.line)

    @property
    def default_route(self) -> Route:
        """The route of every op outside `routes`."""
        return Route(op="*", kernel=None, chain=self.fallback.default, triton=False)

    @functools.cached_property
    def routes(self) -> tuple[Route, ...]:
        """The routing table the generated package carries: every op the spec names and every
        op the Triton step serves, sorted by name. Any other op takes `fallback.default`."""
        names = {op.name for op in self.ops}
        if self.fallback.default[:1] == ("triton",):
            names |= self.triton_catalog.ops
        return tuple(route for route in map(self.route, sorted(names)) if route.line is not None or route.triton)

    def without_triton(self) -> "ChipSpec":
        """This chip with the Triton step taken out of every chain, and Inductor's Triton code
        generation with it (a composite member written `{spec: <file>, triton: skip}`: one
        process runs Triton one way). An op whose chain was Triton alone has no step left: it
        raises, naming the op and the chip."""
        def skip(chain: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(step for step in chain if step != "triton")

        return dataclasses.replace(
            self, fallback=dataclasses.replace(self.fallback, default=skip(self.fallback.default)),
            ops=tuple(dataclasses.replace(op, fallback=skip(op.fallback)) for op in self.ops),
            compile=dataclasses.replace(self.compile, inductor="none"))

    @property
    def vendor_ops(self) -> tuple[OpEntry, ...]:
        return tuple(op for op in self.ops if op.kernel is not None)

    @property
    def inductor_out_forms(self) -> tuple[str, ...]:
        """The out= forms Inductor's graphs call (INDUCTOR_OUT_FORMS), for the generated suite."""
        return tuple(out for _, out in INDUCTOR_OUT_FORMS)

    @property
    def compiled_ops_off_vendor(self) -> tuple[tuple[str, str], ...]:
        """(functional op, its out= form) pairs where the functional op has a vendor kernel and
        the out= form has none, among the ops Inductor calls with out= (its extern kernels):
        a compiled graph's calls of these take the fallback chain. Empty without Inductor."""
        if self.compile.inductor == "none":
            return ()
        return tuple((op, out) for op, out in INDUCTOR_OUT_FORMS
                     if (entry := self.op(op)) is not None and entry.kernel is not None
                     and ((out_entry := self.op(out)) is None or out_entry.kernel is None))

    def op(self, name: str) -> OpEntry | None:
        return self._ops_by_name.get(name)

    @functools.cached_property
    def _ops_by_name(self) -> dict[str, OpEntry]:
        return {op.name: op for op in self.ops}


# ------------------------------------------------------------------ composite chips

@dataclass(frozen=True)
class CompositeSpec:
    """Privateuse1 chips of different vendors behind one device type (`chip.integration:
    composite`): device indices are the members' devices in member order, and each op runs on
    its device's chip as that member's spec routes it. What the one device type can hold once
    (autocast's dtype, the Triton mode, Inductor's code generation) is derived from the members
    here; the rest stays each member's."""
    spec_version: int
    source: Path
    source_display: str
    spec_sha256: str                    # of the composite file and every member's, in order
    chip: Chip
    members: tuple[ChipSpec, ...]

    def __post_init__(self):
        if self.chip.integration != "composite" or len(self.members) < 2:
            raise ValueError("a composite needs integration: composite and at least two members")
        names = [member.chip.name for member in self.members]
        if len(set(names)) != len(names) or self.chip.name in names:
            raise ValueError(f"member names {names} repeat or repeat the composite's {self.chip.name!r}")
        if len({mode for mode in map(_triton_mode, self.members) if mode}) > 1:
            raise ValueError("members run Triton in different modes")

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Every member's dtypes, each once (a tensor's own chip refuses the others)."""
        return tuple(dict.fromkeys(dtype for member in self.members for dtype in member.dtypes))

    @property
    def amp(self) -> Amp | None:
        """torch's autocast holds one dtype per device type: the dtypes every member autocasts
        to, the first member's op lists; None where a member has no AMP or they share no dtype."""
        if any(member.amp is None for member in self.members):
            return None
        first = self.members[0].amp
        shared = tuple(d for d in first.dtypes if all(d in m.amp.dtypes for m in self.members[1:]))
        if not shared:
            return None
        default = first.default if first.default in shared else shared[0]
        return Amp(dtypes=shared, default=default, lower_precision_ops=first.lower_precision_ops,
                   fp32_ops=first.fp32_ops, promote_ops=first.promote_ops)

    @property
    def triton_mode(self) -> str | None:
        """How the members that route ops to Triton run it (one mode: checked), or None."""
        return next((mode for mode in map(_triton_mode, self.members) if mode), None)

    @property
    def compile(self) -> Compile:
        """Inductor generates Triton code for the device type only where every member takes it."""
        inductor = "triton" if all(m.compile.inductor == "triton" for m in self.members) else "none"
        return Compile(inductor=inductor)


def _triton_mode(spec: ChipSpec) -> str | None:
    """The member's fallback.triton where any of its routes uses the Triton step."""
    uses = spec.default_route.chain[:1] == ("triton",) or any(route.triton for route in spec.routes)
    return spec.fallback.triton if uses else None


# ------------------------------------------------------------------ native chips

@dataclass(frozen=True)
class Collective:
    backend: str                        # torch.distributed's name, e.g. "nccl" (RCCL too, on ROCm)
    library: str                        # what implements it: "nccl", "rccl"
    init_method: str                    # tcp | env | file
    unsupported_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Monitor:
    command: tuple[str, ...]            # tool file name, then its arguments (run without a shell)
    parser: str                         # "nvidia-smi-csv" | "rocm-smi-json"
    visible_devices_env: str | None     # e.g. "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class NativeSpec:
    """A GPU torch integrates itself (`chip.integration: native`): no dispatch code, only the
    facts torch_fl reads (AMP dtypes, the collective backend, the monitor tool)."""
    spec_version: int
    source: Path
    source_display: str
    spec_sha256: str
    chip: Chip
    device_type: str                    # torch's device type for the chip's tensors: "cuda"
    torch_build: str                    # "cuda" or "hip": which torch.version attribute a matching build sets
    dtypes: tuple[str, ...]
    collective: Collective
    monitor: Monitor | None = None
    amp: Amp | None = None
