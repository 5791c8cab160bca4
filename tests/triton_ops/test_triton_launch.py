"""torch_fl.triton_ops._launch: the launch cache in front of Triton's JIT (GPU compile mode).

A hit must name the kernel Triton itself would choose: the cache key is checked against
Triton's own argument specialisation, and the cache's hits and misses are checked on a
stand-in for a JITFunction (no GPU here; on the GPU every Triton kernel test runs through
it, scripts/nvgpu_device_run.sh stage `triton`).
"""
import itertools

import pytest
import torch

triton = pytest.importorskip("triton")

from torch_fl.triton_ops import _launch  # noqa: E402


def _values():
    x = torch.zeros(64)
    return [0, 1, 2, 15, 16, 17, 32, -1, -16, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**40, 2**40 + 3,
            2**63, 2**64 - 16, 0.0, 1.0, 2.5, True, False, None,
            x, x[1:], x[4:], x.half(), x.half()[8:], x.double(), x.to(torch.int64)]


def test_key_is_at_least_as_fine_as_tritons_specialisation():
    """Two arguments with one cache key are specialised alike by Triton (dtype, 16-byte
    alignment, == 1, divisibility by 16, integer width)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    def triton_key(a):
        return native_specialize_impl(BaseBackend, a, False, True, True)

    values = _values()
    for a, b in itertools.combinations(values, 2):
        if type(a) is type(b) and _launch._arg_key(a) == _launch._arg_key(b):
            assert triton_key(a) == triton_key(b), (a, b)
    # and it does tell apart what Triton tells apart
    assert _launch._arg_key(1) != _launch._arg_key(2)
    assert _launch._arg_key(16) != _launch._arg_key(17)
    assert _launch._arg_key(2**31) != _launch._arg_key(2**31 - 16)


class _Compiled:
    function = "function-handle"
    packed_metadata = "metadata"

    def __init__(self):
        self.runs = []

    def run(self, *args):
        self.runs.append(args)


class _Jit:
    """Stands in for a triton.JITFunction: `fn[grid](...)` compiles (counted) and launches."""
    arg_names = ["out", "x", "n", "BLOCK"]
    __name__ = "stand_in_kernel"

    def __init__(self):
        self.compiled = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            kernel = _Compiled()
            self.compiled.append((grid, args, kwargs))
            return kernel
        return run


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(_launch, "_current_device", lambda: 0)
    monkeypatch.setattr(_launch, "_current_stream", lambda device: 1234)
    jit = _Jit()
    return jit, _launch.FastKernel(jit)


def test_a_hit_launches_the_compiled_kernel_directly(fast):
    jit, kernel = fast
    out, x = torch.zeros(64), torch.ones(64)
    compiled = kernel[(4,)](out, x, 64, BLOCK=16)
    assert len(jit.compiled) == 1 and compiled.runs == []  # a miss: Triton's own path launched it
    again = kernel[(8, 2)](out, x, 48, BLOCK=16)  # same key: 48 and 64 are both multiples of 16
    assert again is compiled and len(jit.compiled) == 1
    assert compiled.runs == [(8, 2, 1, 1234, "function-handle", "metadata", None, None, None, out, x, 48, 16)]


@pytest.mark.parametrize("change", ["n == 1", "n not a multiple of 16", "n wider than int32",
                                    "misaligned tensor", "dtype", "constexpr", "device"])
def test_what_triton_specialises_on_misses_the_cache(fast, monkeypatch, change):
    jit, kernel = fast
    out, x = torch.zeros(64), torch.ones(64)
    kernel[(4,)](out, x, 64, BLOCK=16)
    args, kwargs = [out, x, 64], {"BLOCK": 16}
    if change == "n == 1":
        args[2] = 1
    elif change == "n not a multiple of 16":
        args[2] = 63
    elif change == "n wider than int32":
        args[2] = 2**32
    elif change == "misaligned tensor":
        args[1] = x[1:]
    elif change == "dtype":
        args[1] = x.half()
    elif change == "constexpr":
        kwargs["BLOCK"] = 32
    else:
        monkeypatch.setattr(_launch, "_current_device", lambda: 1)
    kernel[(4,)](*args, **kwargs)
    assert len(jit.compiled) == 2


def test_grid_functions_and_missing_arguments_take_tritons_path(fast):
    jit, kernel = fast
    out, x = torch.zeros(64), torch.ones(64)
    for _ in range(2):
        kernel[lambda meta: (4,)](out, x, 64, BLOCK=16)
        kernel[(4,)](out, x, 64)  # BLOCK left to a default: not a call the cache understands
    assert len(jit.compiled) == 4


def test_install_wraps_kernels_only_when_compiling(monkeypatch):
    def scale(x):
        pass

    scale_kernel = triton.runtime.JITFunction(scale)
    _helper = triton.runtime.JITFunction(scale)

    for interpret, wrapped in (("1", False), ("0", True)):
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
        namespace = {"scale_kernel": scale_kernel, "_helper": _helper}
        _launch.install(namespace)
        assert isinstance(namespace["scale_kernel"], _launch.FastKernel) is wrapped
        assert namespace["_helper"] is _helper
