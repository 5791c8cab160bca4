"""Kernel launches without Triton's per-call binding (GPU compile mode).

`kernel[grid](*args, **constexprs)` on a `triton.JITFunction` binds every argument,
specialises it (dtype, 16-byte alignment, "== 1", divisibility by 16, integer width),
hashes the result and looks the compiled kernel up, on every call: the largest part
of a small op's host cost on the GPU (bench/results/h200/profile-nvgpu.txt). A
`FastKernel` keeps, per call site signature, the kernel Triton compiled and calls its
launcher directly. Its cache key is at least as fine as Triton's specialisation (see
`_arg_key`), so a hit always names the kernel Triton itself would have chosen; a miss
goes through Triton's own path, which compiles and launches, and remembers the result.

In interpreter mode (TRITON_INTERPRET=1) kernels are returned unwrapped: the
interpreter has no compiled launcher to call.
"""
from __future__ import annotations

import functools
import os
import threading

import torch
import triton
from triton import knobs

# Where Triton itself takes the device and stream of a launch (its CUDA driver asks torch).
_current_device = torch.cuda.current_device
_current_stream = torch._C._cuda_getCurrentRawStream if hasattr(torch._C, "_cuda_getCurrentRawStream") else None
_UINT64_FROM = 1 << 63
# Compile options a call may pass beside the kernel's parameters (part of the cache key).
_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _arg_key(a):
    """What Triton specialises an argument on (runtime/jit.py, specialize_impl), or finer."""
    kind = type(a)
    if kind is int:  # the most common argument: sizes, strides, scalars by value
        # "== 1" becomes a constant, "% 16 == 0" an alignment attribute; width by range.
        return a == 1, (a & 15) == 0, -0x80000000 <= a <= 0x7FFFFFFF, a >= _UINT64_FROM
    if isinstance(a, torch.Tensor):
        return a.dtype, (a.data_ptr() & 15) == 0
    if kind is float or kind is bool or a is None:
        return kind
    return kind, a  # a constexpr-like value (tl.dtype, str): compared by value


def _hooked(runtime) -> bool:
    """Whether a launch hook is set (a profiler such as proton): such launches take Triton's
    own path, which builds the launch metadata the hooks read. Triton 3.6 keeps hooks in
    chains that are present but empty when nobody listens."""
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return True
    return False


class _Recorder(threading.local):
    """While the C++ kernel of a program op records a call on this thread
    (torch_fl._triton_fast): `report(kernel, grid, values)` takes each launch made through a
    FastKernel, `refuse(why)` one it cannot describe, `rng(generator, device, increment, seed,
    offset)` each reservation of Philox counters (_random.philox_seed_offset), kept as (seed,
    offset) in `reservations`; `inside` is set
    while a FastKernel launches, so that a launch seen by Triton's launch hook without it is one
    made elsewhere."""
    report = None
    refuse = None
    rng = None
    reservations: list = []
    inside = False


RECORDER = _Recorder()


class FastKernel:
    """`kernel[grid](...)` with a launch cache in front of a `triton.JITFunction`."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self._names = tuple(fn.arg_names)
        self._cache: dict[tuple, object] = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def run(self, grid, args, kwargs):
        if RECORDER.report is not None:
            return self._run_reported(grid, args, kwargs)
        names = self._names
        extra = len(args) + len(kwargs) - len(names)
        if extra and extra != sum(1 for option in _OPTIONS if option in kwargs):
            return self.fn[grid](*args, **kwargs)  # a default left out: Triton's own path
        if callable(grid) or _hooked(knobs.runtime):
            return self.fn[grid](*args, **kwargs)  # a grid function, a profiler's hooks
        device = _current_device()
        key = (device, tuple(map(_arg_key, args)), tuple(kwargs.items()))
        kernel = self._cache.get(key)
        if kernel is None:
            kernel = self.fn[grid](*args, **kwargs)
            self._cache[key] = kernel
            return kernel
        try:
            full = args + tuple(kwargs[n] for n in names[len(args):])
        except KeyError:
            return self.fn[grid](*args, **kwargs)
        stream = _current_stream(device)
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        kernel.run(grid[0], g1, g2, stream, kernel.function, kernel.packed_metadata, None, None, None, *full)
        return kernel

    def _run_reported(self, grid, args, kwargs):
        """A launch while a call records: Triton's own path (the recording's launch hook is
        set), then the launch with its parameter values in the kernel's order to the recorder."""
        report = RECORDER.report
        RECORDER.inside = True
        try:
            kernel = self.fn[grid](*args, **kwargs)
        finally:
            RECORDER.inside = False
        names = self._names
        if callable(grid) or any(n not in kwargs for n in names[len(args):]):
            RECORDER.refuse(f"{self.__name__}: a launch with a grid function or a defaulted parameter")
        else:
            report(kernel, tuple(grid), args + tuple(kwargs[n] for n in names[len(args):]))
        return kernel

    def __repr__(self):
        return f"FastKernel({self.fn!r})"


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_interpreter_lock = threading.RLock()


def serialize_interpreter() -> None:
    """One launch at a time in Triton's interpreter. It keeps the launch being run (its grid,
    the program id) in process-wide state: two threads launching at once ran with each other's
    grid, so blocks of a kernel were skipped (a tensor partly written, silently) or the launch
    failed with `x >= grid_dim[0]` (seen with one thread per npu device). The lock is reentrant:
    a launch may copy its arguments through the chip, which may launch again."""
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    if getattr(executor, "_torch_fl_serialized", False):
        return
    launch = executor.__call__

    @functools.wraps(launch)
    def serialized(self, *args, **kwargs):
        with _interpreter_lock:
            return launch(self, *args, **kwargs)

    executor.__call__ = serialized
    executor._torch_fl_serialized = True


def install(namespace: dict) -> None:
    """Replace every `*_kernel` JITFunction of a kernel module by its FastKernel (compile
    mode only). Helpers called from kernel bodies keep their names free of `_kernel`."""
    if interpreting():
        return
    for name, value in list(namespace.items()):
        if name.endswith("_kernel") and isinstance(value, triton.runtime.JITFunction):
            namespace[name] = FastKernel(value)
