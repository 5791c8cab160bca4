"""Registers the shared Triton kernels for a generated chip's ops (the `triton` chain step)."""
from __future__ import annotations

import logging
import os
from typing import Callable, Iterable

log = logging.getLogger("torch_fl")


def enable(chip: str, ops: Iterable[str], note_path: Callable[[str, str], None], mode: str,
           next_step: Callable | None = None, native_stream: Callable[[], int] | None = None,
           backend=None, declined: Iterable[str] = (), serves: Callable | None = None):
    """Route `ops` to Triton at the chip's PrivateUse1 key; returns the torch.library
    handles (keep them alive) or None with the reason logged when Triton is unavailable.

    `next_step(name, overload, *args, **kwargs)` runs a call whose kernel declined its
    inputs (`triton_ops.Unsupported`) through the rest of the op's chain.
    `native_stream()` is the driver handle of the chip's current stream: in compile mode
    each kernel is launched on it (the chip's driver is then the GPU runtime Triton
    targets, e.g. the CUDA runtime for `nvgpu`). `backend`, the chip's extension module:
    in compile mode its C++ kernel fronts the pointwise ops and replays their launches
    (torch_fl._triton_fast). `declined`: vendor ops whose kernel computes in some dtypes only;
    their Triton kernels register as `torchfl_<chip>_declined::<op>` (aten's schema), which the
    vendor wrapper calls for the other dtypes (csrc: torch_fl::vendor_declined). `serves(op, args,
    kwargs)`, for a composite chip: whether the Triton step serves this call's member chip; a call
    it does not goes to `next_step`."""
    if mode == "interpret":
        # The chip is not a Triton target (e.g. a simulated device): run the
        # kernels in Triton's interpreter, which must be chosen before import.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from . import triton_ops

    ops, declined = sorted(set(ops)), sorted(set(declined))
    if not ops and not declined:
        return None, "no ops routed to triton"
    if not triton_ops.available():
        reason = "Triton is not available (not installed, or no GPU and TRITON_INTERPRET unset)"
        log.debug("torch_fl: %s: %s; %d op(s) take the next step of their chain", chip, reason, len(ops))
        return None, reason
    import torch

    library = torch.library.Library("aten", "IMPL")
    on_stream = _on_chip_stream(chip, native_stream) if mode == "compile" and native_stream else None

    def kernel_of(op: str) -> Callable:
        kernel = triton_ops.kernel_for(op)
        if op.partition(".")[0] in MATH_BITS_REACH:
            kernel = _resolving_math_bits(op, kernel)
        if on_stream is not None:
            kernel = on_stream(kernel)
        return _counted(op, kernel, note_path, next_step, serves)

    fronted, mirrors, why_not = set(), [], "interpreted"
    if mode == "compile" and backend is not None:
        from . import _triton_fast

        fronted, mirrors, why_not = _triton_fast.front(chip, ops, backend, kernel_of)
    for op in ops:
        if op not in fronted:
            library.impl(op, kernel_of(op), "PrivateUse1")
    mirrors += _declined_mirrors(chip, declined, kernel_of)
    log.debug("torch_fl: %s: %d op(s) routed to the Triton kernels (%s mode)", chip, len(ops), mode)
    launched = f"{len(fronted)} launched from C++" if fronted else f"none launched from C++: {why_not}"
    extra = f"; {len(declined)} vendor op(s)' other dtypes" if declined else ""
    return [library, *mirrors], f"{len(ops)} op(s) on Triton{extra} ({mode}; {launched})"


def _declined_mirrors(chip: str, ops: list[str], kernel_of: Callable[[str], Callable]) -> list:
    """`torchfl_<chip>_declined::<op>`: the op's schema, its Triton kernel at PrivateUse1."""
    if not ops:
        return []
    import torch

    namespace = f"torchfl_{chip}_declined"
    definitions = torch.library.Library(namespace, "DEF")
    implementations = torch.library.Library(namespace, "IMPL")
    for op in ops:
        mirror, _ = define_mirror(definitions, op)
        implementations.impl(mirror, kernel_of(op), "PrivateUse1")
    return [definitions, implementations]


def define_mirror(definitions, op: str, suffix: str = ""):
    """Defines aten op `op`'s schema in `definitions`' namespace under the name `op` with "." as
    "_" (and `suffix`); returns (that name, aten's schema object)."""
    import torch

    name, _, overload = op.partition(".")
    schema = torch._C._get_schema("aten::" + name, overload)
    text = str(schema)
    mirror = op.replace(".", "_") + suffix
    definitions.define(mirror + text[text.index("("):])
    return mirror, schema


# Ops torch lets through its Conjugate and Negative dispatch keys (the fallthrough lists of
# ATen's ConjugateFallback.cpp and NegateFallback.cpp): their kernels receive lazily
# conjugated or negated views and must apply the flags; every other op's inputs arrive resolved.
MATH_BITS_REACH = frozenset({
    "dot", "vdot", "mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_", "linalg_solve_triangular",
    "repeat_interleave", "clone",
})


def _resolving_math_bits(op: str, kernel: Callable) -> Callable:
    """`kernel` (which reads raw memory) with its tensor inputs' conj/neg flags applied first;
    a flagged tensor it would write (an in-place self, `out=`) is refused."""
    import torch

    def flagged(value) -> bool:
        return isinstance(value, torch.Tensor) and (value.is_conj() or value.is_neg())

    def resolved(value):
        return value.resolve_conj().resolve_neg() if flagged(value) else value

    in_place = op.partition(".")[0].endswith("_")

    def run(*args, **kwargs):
        written = [kwargs.get("out")] + ([args[0]] if in_place and args else [])
        if any(flagged(value) for value in written):
            raise RuntimeError(f"aten::{op}: the output is a conjugate or negative view (its conj or neg bit "
                               "is set), which the chip's Triton kernel cannot write; pass a plain tensor "
                               "(resolve_conj()/resolve_neg()) as the output")
        args = tuple(value if in_place and i == 0 else resolved(value) for i, value in enumerate(args))
        kwargs = {key: value if key == "out" else resolved(value) for key, value in kwargs.items()}
        return kernel(*args, **kwargs)

    return run


def _counted(op: str, kernel: Callable, note_path: Callable[[str, str], None],
             next_step: Callable | None, serves: Callable | None = None) -> Callable:
    from ._outside_dynamo import outside_dynamo
    from .triton_ops import Unsupported

    name, _, overload = op.partition(".")
    qualified = "aten::" + name

    def run(*args, **kwargs):
        if serves is not None and next_step is not None and not serves(op, args, kwargs):
            return next_step(qualified, overload, *args, **kwargs)  # another chip's route
        try:
            result = kernel(*args, **kwargs)
        except Unsupported as declined:
            if next_step is None:
                raise
            log.debug("torch_fl: the Triton kernel of aten::%s declined: %s", op, declined)
            try:
                return next_step(qualified, overload, *args, **kwargs)
            except NotImplementedError as error:
                raise NotImplementedError(f"{error}\n(its Triton kernel declined these inputs: {declined})") from None
        note_path(op, "triton")
        return result

    run.__name__ = f"triton_{op.replace('.', '_')}"
    return outside_dynamo(run)


def operands_device(chip: str, args: tuple, kwargs: dict) -> int | None:
    """The index of the device a call's first tensor on `chip` lives on (`out=` first, then the
    arguments, tensor lists included), or None when it has none."""
    import torch

    for value in (kwargs.get("out"), *args, *kwargs.values()):
        for tensor in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == chip:
                return tensor.device.index
    return None


def _on_chip_stream(chip: str, native_stream: Callable[[], int]) -> Callable[[Callable], Callable]:
    """Launch compiled kernels on the chip's current stream, of the operands' device.

    Triton launches on the GPU runtime's current device and stream (`torch.cuda`'s), so each
    call makes the chip's stream current there for its duration and restores the previous
    one: native `cuda` work in the same process keeps its own streams. With several devices, a
    call whose tensors live on another device than the current one first makes theirs current
    (a dispatcher kernel registered from Python gets no device guard): launched on the current
    device's stream, it would be unordered against the work on its tensors' device."""
    import torch

    several: list[bool] = []  # whether the chip has more than one device (asked at the first call)

    raw_current = torch._C._cuda_getCurrentRawStream
    current = torch._C._cuda_getCurrentStream  # (stream id, device index, device type)
    set_current = torch._C._cuda_setStream
    from_external = torch._C._cuda_getStreamFromExternal  # what torch.cuda.ExternalStream wraps
    # (the chip's stream handle, device) -> torch's (stream id, device index, device type) for it:
    # the ids, not torch.cuda.Stream objects, so a launch costs two C calls here.
    external: dict[tuple[int, int], tuple[int, int, int]] = {}

    def bind(kernel: Callable) -> Callable:
        def on_stream(*args, **kwargs):
            device = torch._C._cuda_getDevice()  # the chip's current device: one runtime
            if not several:
                several.append(getattr(torch, chip).device_count() > 1)
            if several[0]:
                wanted = operands_device(chip, args, kwargs)
                if wanted is not None and wanted != device:
                    with getattr(torch, chip).device(wanted):
                        return on_stream(*args, **kwargs)
            handle = native_stream()
            if raw_current(device) == handle:
                return kernel(*args, **kwargs)
            ids = external.get((handle, device))
            if ids is None:
                external[handle, device] = ids = from_external(handle, device)
            previous = current(device)
            set_current(*ids)
            try:
                return kernel(*args, **kwargs)
            finally:
                set_current(*previous)

        return on_stream

    return bind
