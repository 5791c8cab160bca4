"""Triton's interpreter as the target of Inductor's Triton code, for a chip whose Triton step is
interpreted (`fallback.triton: interpret`, the simulated chips).

Inductor's Triton code asks Triton's active driver for a target and the device's limits before
it writes a kernel, and makes a GPU backend active before it loads one; under the interpreter
no backend is active (there is no GPU). `InterpreterDriver` answers for the interpreter: a
nominal target (`TARGET`: Inductor writes the same code as for an sm_80 GPU; the interpreter
runs any of it) and nominal limits. Inductor's kernels then run in Triton's interpreter, which
runs each program of the grid in numpy on host copies of the chip's tensors, as the chip's own
interpreted Triton kernels do.

Inductor's kernels call `libdevice.<fn>` (erf, tanh, pow, ...), stubs that Triton's compiler
binds to the target's device library and the interpreter does not bind at all (each returns
None). `install()` fills the stubs with host implementations computed by torch's CPU kernels,
so a compiled graph's special functions give what torch gives. They are installed only in a
process whose Triton interprets every kernel (TRITON_INTERPRET=1 before Triton was imported).
"""
from __future__ import annotations

import os
import threading

import numpy as np
import torch

__all__ = ["TARGET", "install", "interprets", "repair_atomics"]

# What Inductor is told it writes for: an sm_80 CUDA GPU with 32-lane warps.
TARGET = ("cuda", 80, 32)
# An A100's limits (Inductor sizes grids and picks matmul templates by them); the interpreter has none.
_LIMITS = {"multiprocessor_count": 108, "max_num_regs": 65536, "max_shared_mem": 166912, "warpSize": 32,
           "max_threads_per_multiprocessor": 2048}


def interprets() -> bool:
    """Whether this process's Triton runs every kernel in its interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


class _Limits:
    @staticmethod
    def get_device_properties(index: int) -> dict:
        return dict(_LIMITS)


def _make_driver(chip: str):
    """Triton's active driver where every kernel runs in its interpreter."""
    from triton.backends.driver import DriverBase

    class InterpreterDriver(DriverBase):
        torch_fl_interpreter = True
        utils = _Limits()

        @classmethod
        def is_active(cls) -> bool:
            return interprets()

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError("Triton's interpreter launches kernels from Python, without a C++ launcher")

        def get_current_target(self):
            from triton.backends.compiler import GPUTarget

            return GPUTarget(*TARGET)

        def get_active_torch_device(self):
            return torch.device(chip, getattr(torch, chip).current_device())

        def get_current_device(self) -> int:
            return getattr(torch, chip).current_device()

        def set_current_device(self, index: int) -> None:
            getattr(torch, chip).set_device(index)

        def get_current_stream(self, index=None) -> int:
            return 0   # the interpreter runs each kernel at once, on the host

        def get_benchmarker(self):
            from triton.testing import do_bench

            return do_bench

        def get_device_interface(self):
            return getattr(torch, chip)

    return InterpreterDriver


_installed: list[str] = []
_lock = threading.Lock()


def install(chip: str) -> None:
    """Make the interpreter Triton's active driver (where no GPU backend is active), keep it so
    when Inductor asks for a GPU backend, and give libdevice host implementations. Once."""
    with _lock:
        if _installed:
            return
        from triton.backends import backends
        from triton.runtime import driver
        from torch._inductor.runtime import triton_helpers

        gpu_active = any(backend.driver.is_active() for name, backend in backends.items() if name != "cpu")
        if not gpu_active:
            driver.set_active(_make_driver(chip)())
            to_gpu = triton_helpers.set_driver_to_gpu

            def set_driver_to_gpu():
                # Inductor's kernels and launcher ask for a GPU backend: the interpreter is one here.
                if not getattr(driver.active, "torch_fl_interpreter", False):
                    to_gpu()

            triton_helpers.set_driver_to_gpu = set_driver_to_gpu
        _fill_libdevice()
        repair_atomics()
        _installed.append(chip)


def repair_atomics() -> None:
    """Triton 3.6's interpreter hands an atomic's arrays to its C++ loop as raw buffers, but a
    mask or value broadcast to the pointers' shape is a numpy view with zero strides: from a
    [1, 1] mask (a one-row block, Inductor's scatter-add with XBLOCK=1) the loop read past the
    one element, skipping updates silently (an embedding's gradient went wrong). The arrays are
    made whole first. Idempotent; the interpreter only."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder, "_torch_fl_whole_atomics", False):
        return
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def whole(handle, shape):
        return interpreter.TensorHandle(np.ascontiguousarray(np.broadcast_to(handle.data, shape)), handle.dtype)

    def create_atomic_rmw(self, op, ptr, val, mask, sem, scope):
        shape = np.shape(ptr.data)
        return rmw(self, op, whole(ptr, shape), whole(val, shape), whole(mask, shape), sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        shape = np.shape(ptr.data)
        return cas(self, whole(ptr, shape), whole(cmp, shape), whole(val, shape), sem, scope)

    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas
    builder._torch_fl_whole_atomics = True


# ---- libdevice on the host ------------------------------------------------------------------

def _same(op):
    return op, None


_FLOAT_FUNCTIONS = {
    # name: (torch function on CPU tensors, result dtype: None = the argument's)
    "abs": _same(torch.abs), "acos": _same(torch.acos), "acosh": _same(torch.acosh),
    "asin": _same(torch.asin), "asinh": _same(torch.asinh), "atan": _same(torch.atan),
    "atanh": _same(torch.atanh), "cos": _same(torch.cos), "cosh": _same(torch.cosh),
    "sin": _same(torch.sin), "sinh": _same(torch.sinh), "tan": _same(torch.tan),
    "tanh": _same(torch.tanh), "fast_tanhf": _same(torch.tanh), "exp": _same(torch.exp),
    "exp2": _same(torch.exp2), "expm1": _same(torch.expm1), "log": _same(torch.log),
    "log2": _same(torch.log2), "log10": _same(torch.log10), "log1p": _same(torch.log1p),
    "sqrt": _same(torch.sqrt), "rsqrt": _same(torch.rsqrt), "cbrt": _same(lambda x: torch.sign(x) * x.abs().pow(1 / 3)),
    "floor": _same(torch.floor), "ceil": _same(torch.ceil), "trunc": _same(torch.trunc),
    "nearbyint": _same(torch.round), "rint": _same(torch.round),   # both round half to even
    "round": _same(lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5)),  # half away from zero
    "erf": _same(torch.erf), "erfc": _same(torch.erfc), "erfinv": _same(torch.erfinv),
    "erfcinv": _same(lambda x: torch.erfinv(1 - x)), "lgamma": _same(torch.lgamma),
    "tgamma": _same(lambda x: torch.exp(torch.lgamma(x)) * torch.where(
        (x < 0) & (torch.floor(x) % 2 == 1), -1.0, 1.0).to(x.dtype)),
    "j0": _same(torch.special.bessel_j0), "j1": _same(torch.special.bessel_j1),
    "y0": _same(torch.special.bessel_y0), "y1": _same(torch.special.bessel_y1),
    "isnan": (torch.isnan, torch.bool), "isinf": (torch.isinf, torch.bool),
    "signbit": (torch.signbit, torch.bool), "isfinited": (torch.isfinite, torch.bool),
    "finitef": (torch.isfinite, torch.bool),
    "llrint": (lambda x: torch.round(x).to(torch.int64), torch.int64),
    "ilogb": (lambda x: torch.frexp(x).exponent - 1, torch.int32),
    # two and three arguments, of one dtype (ldexp: an integer exponent)
    "pow": _same(torch.pow), "atan2": _same(torch.atan2), "hypot": _same(torch.hypot),
    "fmod": _same(torch.fmod), "copysign": _same(torch.copysign), "nextafter": _same(torch.nextafter),
    "fmax": _same(torch.fmax), "fmin": _same(torch.fmin), "ldexp": _same(torch.ldexp),
    "fma": _same(lambda x, y, z: x * y + z), "div_rn": _same(torch.div), "fdiv_rn": _same(torch.div),
}


def _fill_libdevice() -> None:
    import triton.language as tl
    from triton.language.extra import libdevice

    to_torch = {tl.float16: torch.float16, tl.bfloat16: torch.bfloat16, tl.float32: torch.float32,
                tl.float64: torch.float64, tl.int1: torch.bool, tl.int8: torch.int8, tl.int16: torch.int16,
                tl.int32: torch.int32, tl.int64: torch.int64, tl.uint8: torch.uint8}
    for name, (op, result) in _FLOAT_FUNCTIONS.items():
        if hasattr(libdevice, name):
            setattr(libdevice, name, _host_function(tl, to_torch, name, op, result))
    # Every other stub fails by name, not with `None` flowing into the next operation.
    for name in dir(libdevice):
        if not name.startswith("_") and name not in _FLOAT_FUNCTIONS and callable(getattr(libdevice, name)):
            setattr(libdevice, name, _missing_function(name))


def _missing_function(name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"libdevice.{name} has no host implementation for Triton's interpreter in torch_fl "
                                  f"(torch_fl/_triton_interpreter.py); the kernel needs it")

    missing.__name__ = name
    return missing


def _host_function(tl, to_torch: dict, name: str, op, result):
    """libdevice.<name> on the host: `op` over CPU tensors of the kernel values' dtype (`to_torch`:
    Triton's dtypes to torch's), its result of `result` dtype (None: the arguments')."""
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    to_triton = {value: key for key, value in to_torch.items()}

    def host_values(value):
        """A kernel value as a CPU tensor: tl.tensor data, or a Python number."""
        if isinstance(value, tl.constexpr):
            value = value.value
        if isinstance(value, tl.tensor):
            element = value.type.scalar
            data = np.asarray(value.handle.data)
            if element == tl.bfloat16:   # the interpreter keeps bfloat16 bits as uint16
                return torch.from_numpy(data.copy()).view(torch.bfloat16), element, value.type.is_block()
            return torch.from_numpy(np.array(data, copy=True)), element, value.type.is_block()
        return torch.tensor(value), None, False

    def run(*args, **kwargs):
        kwargs.pop("_semantic", None)
        values = [host_values(arg) for arg in args]
        element = next((element for _, element, _ in values if element is not None), None)
        if element is None:
            raise TypeError(f"libdevice.{name} called without a tensor argument")
        dtype = to_torch[element]
        tensors = [value.to(dtype) for value, _, _ in values]
        if name == "ldexp":   # its exponent is an integer
            tensors[1] = values[1][0].to(torch.int32)
        out = op(*tensors)
        out_element = element if result is None else to_triton[result]
        out = out.to(dtype if result is None else result)
        block = any(is_block for _, _, is_block in values)
        data = out.view(torch.uint16).numpy() if out.dtype == torch.bfloat16 else out.numpy()
        data = data.astype(_get_np_dtype(out_element), copy=False)
        if block:
            return tl.tensor(TensorHandle(data, out_element), tl.block_type(out_element, list(data.shape)))
        return tl.tensor(TensorHandle(data.reshape(()) if data.ndim else data, out_element), out_element)

    run.__name__ = name
    return run
