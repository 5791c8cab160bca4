"""Pointwise Triton kernels launched from C++ (compile mode, on a chip whose driver is the
CUDA runtime Triton targets, e.g. `nvgpu`).

A Triton op's kernel is Python: every call crosses the dispatcher into Python, prepares
its operands and launches, 25-35 us of host time against torch.cuda's 6-7 us per op
(docs/benchmarks.md). `front` puts a C++ kernel (csrc/src/triton_launch.cpp) in front of
each pointwise op at the chip's dispatch key. It keys a call on everything the Python
preparation reads (argument kinds, dtypes, devices, 0-dim-ness, shapes equal or not,
contiguity, 16-byte alignment, scalar values, the element count's specialisation) and
replays, for a key seen before, the launch the Python kernel made for it. A call with a
new key goes to the Python kernel, registered under a mirror op with the same schema
(`torchfl_<chip>_triton::<op>`); when that call was one dense launch
(`_common.launch_pointwise`), the launch is recorded for the key: which parameter is which
argument's data pointer, the output's, the element count, or a constant. A key whose call was
not one dense launch (broadcast, strided) goes to a program replay of the op instead (a second
mirror, `<op>_program`, recording programs as the families of PROGRAM_FAMILIES do).

`TORCH_FL_TRITON_CPP_LAUNCH=0` turns it off (every call takes the Python kernel). Replays
do not call Triton's launch hooks: profile with a hook-based tool (proton) with it off;
torch.profiler sees the replays' `cuLaunchKernel` and their kernels as usual.
"""
from __future__ import annotations

import logging
import struct
import threading
from typing import Callable, Iterable

from . import env

log = logging.getLogger("torch_fl")

ENV = "TORCH_FL_TRITON_CPP_LAUNCH"
# torch_fl::LaunchArgSource (triton_launch.h)
_STACK_TENSOR, _OUT, _NUMEL, _CONSTANT = 0, 1, 2, 3
# Triton's integer parameter types and their sizes in bytes (its launcher's ty_to_cpp).
_INT_BYTES = {"i1": 1, "i8": 1, "u1": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8}


def replayable(op: str) -> bool:
    """Ops whose whole Python kernel is the pointwise preparation and one launch (their
    functional and in-place variants; `out=` variants may resize their output)."""
    from .triton_ops import _pointwise

    entry = _pointwise.POINTWISE.get(op)
    return entry is not None and entry.mode in ("func", "inplace")


def replayable_foreach(op: str) -> bool:
    """Foreach ops whose Python kernel's preparation depends on the call's scalar lists' types
    only, never their values (pow with a list of exponents picks its kernel by each value), and
    the fused optimizers (one table launch too)."""
    from .triton_ops import _FAMILY_OF

    if _FAMILY_OF.get(op) == "optim":
        return True
    from .triton_ops import _foreach

    return op in _foreach.OPS and op not in _foreach.VALUE_DEPENDENT


# Families whose ops' Python kernels allocate, make views and launch through FastKernel: their
# programs are recorded and replayed (csrc/src/triton_program_launch.cpp), and a kernel that does
# anything else for a key (reads a value back, runs another op, launches outside FastKernel) is
# seen doing it and never replayed for that key. The random family too: a replay reserves the
# default generator's counters again (a call given a generator is never replayed). The matmul and
# linalg families too (fixed blocks, full-precision products: nothing but the key decides a
# launch; a linalg kernel that reads a pivot or an info value back is seen doing it). Not fft or
# complex (compositions of other chip ops).
PROGRAM_FAMILIES = ("reductions", "softmax_norm", "rnn", "creation", "nn", "index", "gather", "select", "special",
                    "random", "attention", "matmul", "linalg")


def replayable_program(op: str) -> bool:
    """Ops of PROGRAM_FAMILIES whose returns are tensors and integers (at most 12, as
    triton_program_launch.cpp keeps; `equal` returns a bool). An integer return (attention's
    max_q) is replayed as recorded: the family's kernels return only sizes the key holds."""
    from .triton_ops import _FAMILY_OF

    if _FAMILY_OF.get(op) not in PROGRAM_FAMILIES:
        return False
    import torch

    name, _, overload = op.partition(".")
    schema = torch._C._get_schema("aten::" + name, overload)
    return len(schema.returns) <= 12 and all(str(r.type) in ("Tensor", "SymInt", "int") for r in schema.returns)


def front(chip: str, ops: Iterable[str], backend, kernel_of: Callable[[str], Callable]):
    """Puts the C++ kernel in front of each replayable op of `ops` (pointwise, foreach, and
    the program families).

    `backend` is the chip's extension module; `kernel_of(op)` the Python kernel the
    mirror op runs. Returns (the ops fronted, the mirror libraries to keep alive, why
    none were, or "")."""
    if env.get("TRITON_CPP_LAUNCH", "1") == "0":
        return set(), [], f"{ENV}=0"
    if not hasattr(backend, "_register_fast_triton_op"):
        return set(), [], "the backend has no C++ launch"
    available, why = backend._triton_launch_available()
    if not available:
        return set(), [], why
    import torch

    from ._outside_dynamo import outside_dynamo
    from ._triton_route import define_mirror
    from .triton_ops import _pointwise

    namespace = f"torchfl_{chip}_triton"
    definitions = torch.library.Library(namespace, "DEF")
    implementations = torch.library.Library(namespace, "IMPL")
    fronted = set()

    def mirror_of(op: str, recording: Callable, suffix: str = "") -> str:
        """A mirror op of `op` with `recording` as its chip kernel: its qualified name."""
        mirror, _ = define_mirror(definitions, op, suffix)
        implementations.impl(mirror, outside_dynamo(recording), "PrivateUse1")
        return f"{namespace}::{mirror}"

    def mount(op: str, recording: Callable, register: Callable, **extra) -> None:
        """The mirror op with `recording` as its chip kernel, and `register`'s C++ kernel in
        front of the aten op."""
        name, _, overload = op.partition(".")
        register(name, overload, mirror_of(op, recording), **extra)
        fronted.add(op)

    # A pointwise op's broadcast and strided calls (not one dense launch) replay as programs.
    programs = hasattr(backend, "_register_fast_program_op")
    for op in sorted(o for o in ops if replayable(o)):
        name, _, overload = op.partition(".")
        arg_names = [argument.name for argument in torch._C._get_schema("aten::" + name, overload).arguments]
        inplace = _pointwise.POINTWISE[op].mode == "inplace"
        strided = mirror_of(op, _recording_program(kernel_of(op), backend), "_program") if programs else ""
        mount(op, _recording(kernel_of(op), arg_names, inplace, backend), backend._register_fast_triton_op,
              strided_mirror=strided)
    if hasattr(backend, "_register_fast_foreach_op"):
        for op in sorted(o for o in ops if replayable_foreach(o)):
            mount(op, _recording_foreach(kernel_of(op), backend), backend._register_fast_foreach_op)
    if programs:
        for op in sorted(o for o in ops if o not in fronted and replayable_program(o)):
            mount(op, _recording_program(kernel_of(op), backend), backend._register_fast_program_op)
    log.debug("torch_fl: %s: %d op(s) launched from C++", chip, len(fronted))
    return fronted, [definitions, implementations], ""


def _recording(kernel: Callable, arg_names: list[str], inplace: bool, backend) -> Callable:
    """The mirror op's kernel: `kernel`, recording its launch for the C++ kernel's replay
    when it made exactly one dense launch."""
    from .triton_ops._common import CAPTURE as capture

    positions = {name: i for i, name in enumerate(arg_names)}

    def run(*args, **kwargs):
        outer = capture.launches
        capture.launches = launches = []
        try:
            result = kernel(*args, **kwargs)
        finally:
            capture.launches = outer
            if outer is not None:
                outer.append(None)  # a caller collecting launches: this call's are not its one
        if len(launches) == 1 and launches[0] is not None:
            out = args[0] if inplace else result
            params = _parameters(launches[0], out, args, kwargs, positions)
            if params is not None:
                launch = launches[0]
                meta = launch.kernel.metadata
                recorded, why = backend._record_triton_launch(
                    out, inplace, launch.kernel.function, 32 * meta.num_warps, meta.shared,
                    launch.elements_per_program, params)
                if not recorded:
                    log.debug("torch_fl: launch not recorded for C++ replay: %s", why)
        elif launches and hasattr(backend, "_mark_triton_call_strided"):
            backend._mark_triton_call_strided()  # the strided kernel, a fill: the program replay's
        return result

    run.__name__ = getattr(kernel, "__name__", "triton_kernel") + "_recorded"
    return run


def _recording_foreach(kernel: Callable, backend) -> Callable:
    """The mirror op's kernel for a foreach op: `kernel`, reporting its launch to the C++
    kernel when it made exactly one table launch (which the C++ side checks row by row
    against the call's arguments before it replays it)."""
    from .triton_ops._common import CAPTURE as capture, TableLaunch

    def run(*args, **kwargs):
        outer = capture.launches
        capture.launches = launches = []
        try:
            result = kernel(*args, **kwargs)
        finally:
            capture.launches = outer
            if outer is not None:
                outer.append(None)
        if len(launches) == 1 and isinstance(launches[0], TableLaunch):
            launch = launches[0]
            params = _table_parameters(launch)
            if params is not None:
                meta = launch.kernel.metadata
                recorded, why = backend._record_foreach_launch(
                    launch.kernel.function, 32 * meta.num_warps, meta.shared, launch.rows, launch.chunk, params)
                if not recorded:
                    log.debug("torch_fl: foreach launch not recorded for C++ replay: %s", why)
        return result

    run.__name__ = getattr(kernel, "__name__", "triton_kernel") + "_recorded"
    return run


def _recording_program(kernel: Callable, backend) -> Callable:
    """The mirror op's kernel for a program op: `kernel`, each launch it makes through a
    FastKernel reported to the C++ kernel recording the call (which voids the recording for
    a launch made any other way, seen by Triton's launch hook)."""
    from .triton_ops._launch import RECORDER

    def report(compiled, grid, values):
        params = _program_parameters(compiled, values, RECORDER.reservations)
        if params is None:
            refuse(f"{getattr(getattr(compiled.src, 'fn', None), '__name__', 'a kernel')}: launch features, "
                   "parameter types or a seed and offset a replay does not set up")
            return
        meta = compiled.metadata
        grid = tuple(grid) + (1,) * (3 - len(grid))
        recorded, why = backend._record_program_launch(compiled.function, grid, 32 * meta.num_warps, meta.shared,
                                                       params)
        if not recorded:
            log.debug("torch_fl: program not recorded for C++ replay: %s", why)

    def rng(generator, device, increment, seed, offset):
        if generator is not None:
            refuse("counters of a generator given to the call")  # a replay reserves the default one's
            return
        RECORDER.reservations.append((seed, offset))
        backend._record_program_rng(device.index, increment, seed, offset)

    refuse = backend._refuse_program_recording

    def run(*args, **kwargs):
        outer = RECORDER.report, RECORDER.refuse, RECORDER.rng, RECORDER.reservations
        RECORDER.report, RECORDER.refuse, RECORDER.rng, RECORDER.reservations = report, refuse, rng, []
        _launch_hook(True)
        try:
            return kernel(*args, **kwargs)
        finally:
            _launch_hook(False)
            RECORDER.report, RECORDER.refuse, RECORDER.rng, RECORDER.reservations = outer

    run.__name__ = getattr(kernel, "__name__", "triton_kernel") + "_recorded"
    return run


_hook_lock = threading.Lock()
_hook_users = 0


def _unreported_launch(*_metadata):
    """Triton's launch hook while a call records: a launch not made through a FastKernel
    (autotuned, an unwrapped JITFunction) voids the recording of this thread's call."""
    from .triton_ops._launch import RECORDER

    if RECORDER.refuse is not None and not RECORDER.inside:
        RECORDER.refuse("a Triton launch not made through FastKernel (autotuned, or an unwrapped JITFunction)")


def _launch_hook(on: bool) -> None:
    """Adds the hook while any thread records (it sends every launch through Triton's own
    path, which calls hooks), removes it when none does."""
    global _hook_users
    from triton import knobs

    with _hook_lock:
        _hook_users += 1 if on else -1
        if on and _hook_users == 1:
            knobs.runtime.launch_enter_hook.add(_unreported_launch)
        elif not on and _hook_users == 0:
            knobs.runtime.launch_enter_hook.remove(_unreported_launch)


# torch_fl::ProgramParamSource (triton_launch.h)
_POINTER, _VALUE, _SEED_LOW, _SEED_HIGH, _OFFSET = 0, 1, 2, 3, 4
# The parameters through which a random kernel takes its Philox seed and offset (_random.py).
_COUNTER_PARAMS = {"seed_lo": _SEED_LOW, "seed_hi": _SEED_HIGH, "offset": _OFFSET}


def _program_parameters(kernel, values, reservations=()) -> list[tuple[int, int, int]] | None:
    """A launch's parameters as (source, address or value, bytes), in the compiled kernel's
    order; None for what a replay does not set up. A kernel with seed_lo, seed_hi and offset
    parameters must take them from the call's latest reservation of Philox counters."""
    if not _plain_launch(kernel):
        return None
    signature = kernel.src.signature
    counters = _COUNTER_PARAMS.keys() <= signature.keys()
    if counters:
        if not reservations:
            return None
        seed, offset = reservations[-1]
        expected = {"seed_lo": seed & 0xFFFFFFFF, "seed_hi": seed >> 32, "offset": offset}
    params = []
    for position, (name, kind) in enumerate(signature.items()):
        if kind == "constexpr":
            continue
        if position >= len(values) or not isinstance(kind, str):
            return None
        value = values[position]
        if counters and name in _COUNTER_PARAMS:
            if kind not in _INT_BYTES or int(value) != expected[name]:
                return None
            params.append((_COUNTER_PARAMS[name], len(reservations) - 1, _INT_BYTES[kind]))
        elif kind.startswith("*"):
            if not hasattr(value, "data_ptr"):
                return None
            params.append((_POINTER, value.data_ptr(), 8))
        elif kind in _INT_BYTES:
            value = int(value)
            params.append((_VALUE, value - (1 << 64) if value >= 1 << 63 else value, _INT_BYTES[kind]))
        elif kind == "fp32":
            params.append((_VALUE, struct.unpack("<i", struct.pack("<f", float(value)))[0], 4))
        elif kind == "fp64":
            params.append((_VALUE, struct.unpack("<q", struct.pack("<d", float(value)))[0], 8))
        else:
            return None
    return params


def _table_parameters(launch) -> list[tuple[int, int, int]] | None:
    """A table launch's kernel parameters as (source, value, bytes): the table (given the
    output's source code), then integer constants; None for what a replay does not set up."""
    kernel = launch.kernel
    if not _plain_launch(kernel):
        return None
    params = []
    for position, kind in enumerate(kernel.src.signature.values()):
        if kind == "constexpr":
            continue
        if position >= len(launch.values) or not isinstance(kind, str):
            return None
        value = launch.values[position]
        if kind.startswith("*"):
            if position != 0:
                return None
            params.append((_OUT, 0, 8))
        elif kind in _INT_BYTES:
            value = int(value)
            params.append((_CONSTANT, value - (1 << 64) if value >= 1 << 63 else value, _INT_BYTES[kind]))
        else:
            return None
    return params


def _plain_launch(kernel) -> bool:
    """Whether a compiled kernel launches with nothing but its grid, block, shared memory and
    parameters (what both C++ replays set up)."""
    meta = kernel.metadata
    return not (getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_cooperative_grid", False)
                or getattr(meta, "launch_pdl", False) or getattr(meta, "global_scratch_size", 0)
                or getattr(meta, "profile_scratch_size", 0) or not kernel.function)


def _parameters(launch, out, args, kwargs, positions) -> list[tuple[int, int, int]] | None:
    """The launch's kernel parameters as (source, value, bytes), in the order the compiled
    kernel takes them (Triton's launcher: the signature's entries that are not compile-time
    constants), or None when one cannot be replayed from the call's arguments."""
    kernel = launch.kernel
    if not _plain_launch(kernel):
        return None  # launch features the C++ replay does not set up
    params = []
    for position, kind in enumerate(kernel.src.signature.values()):
        if kind == "constexpr":
            continue
        if position >= len(launch.values) or not isinstance(kind, str):
            return None
        value = launch.values[position]
        if kind.startswith("*"):
            found = _argument_indices(value, args, kwargs, positions)
            if len(found) == 1:
                params.append((_STACK_TENSOR, found[0], 8))
            elif not found and value is out:
                params.append((_OUT, 0, 8))  # the output the call allocated
            else:
                # Not an argument (a tensor the preparation made), or several: a call passing one
                # tensor twice says nothing about which argument a later call's pointer is.
                return None
        elif kind in _INT_BYTES:
            if position == launch.numel_index:
                params.append((_NUMEL, 0, _INT_BYTES[kind]))
            else:
                value = int(value)
                params.append((_CONSTANT, value - (1 << 64) if value >= 1 << 63 else value, _INT_BYTES[kind]))
        else:
            return None  # a float parameter: none of the pointwise kernels' take one
    return params


def _argument_indices(value, args, kwargs, positions) -> list[int]:
    """The call's argument positions (schema order) that are `value` itself."""
    found = [i for i, argument in enumerate(args) if argument is value]
    found += [positions.get(name, -1) for name, argument in kwargs.items() if argument is value]
    return found if -1 not in found else [-1, -1]  # a keyword outside the schema: refused
