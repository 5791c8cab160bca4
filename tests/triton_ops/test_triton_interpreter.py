"""torch_fl._triton_interpreter: what Triton's interpreter needs to run Inductor's kernels (a chip
whose Triton step is interpreted, compile.inductor: triton): host libdevice functions that give
torch's answers, a name for every stub without one, and atomics that do not skip updates. The
compiled models themselves are the npu suite's test_compile.py."""
import re
from pathlib import Path

from triton_device import DEVICE  # noqa: I001  (sets TRITON_INTERPRET before triton is imported)

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from torch_fl import _triton_interpreter

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="Triton's interpreter only: on the GPU Triton compiles")


@pytest.fixture(scope="module")
def libdevice():
    _triton_interpreter.install("cpu")
    from triton.language.extra import libdevice

    return libdevice


def _block(values: torch.Tensor):
    from triton.runtime.interpreter import TensorHandle

    element = {torch.float32: tl.float32, torch.float64: tl.float64}[values.dtype]
    return tl.tensor(TensorHandle(values.numpy().copy(), element), tl.block_type(element, list(values.shape)))


def _torch(value) -> torch.Tensor:
    return torch.from_numpy(np.asarray(value.handle.data).copy())


def test_every_libdevice_function_inductor_writes_has_a_host_implementation():
    """Scanned from Inductor's own code generation: a torch upgrade that emits a new one fails here."""
    import torch._inductor.codegen.triton as codegen
    import torch._inductor.runtime.triton_helpers as helpers

    emitted = set()
    for module in (codegen, helpers):
        emitted |= set(re.findall(r"libdevice\.([a-z_0-9]+)\(", Path(module.__file__).read_text()))
    assert {"erf", "tanh", "pow", "lgamma"} <= emitted
    assert emitted <= set(_triton_interpreter._FLOAT_FUNCTIONS), sorted(emitted - set(_triton_interpreter._FLOAT_FUNCTIONS))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name, reference", [
    ("erf", torch.erf), ("erfinv", torch.erfinv), ("tanh", torch.tanh), ("lgamma", torch.lgamma),
    ("log1p", torch.log1p), ("expm1", torch.expm1), ("nearbyint", torch.round),
    ("isnan", torch.isnan), ("signbit", torch.signbit), ("llrint", lambda x: torch.round(x).long()),
])
def test_unary_functions_give_torchs_answers(libdevice, name, reference, dtype):
    x = torch.tensor([-2.5, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5, float("nan")], dtype=dtype)
    if name == "erfinv":
        x = x.clamp(-0.9, 0.9)
    got = getattr(libdevice, name)(_block(x))
    want = reference(x)
    assert got.type.shape == [8]
    torch.testing.assert_close(_torch(got), want, equal_nan=True)


def test_binary_functions_broadcast_a_row_against_a_column(libdevice):
    a, b = torch.rand(4, 1) + 0.5, torch.rand(1, 2) * 2
    got = libdevice.pow(_block(a), _block(b))
    assert got.type.shape == [4, 2]
    torch.testing.assert_close(_torch(got), torch.pow(a, b))
    torch.testing.assert_close(_torch(libdevice.atan2(_block(a), _block(b))), torch.atan2(a, b))


def test_a_stub_without_a_host_implementation_fails_by_name(libdevice):
    with pytest.raises(NotImplementedError, match=r"libdevice\.mul24 has no host implementation"):
        libdevice.mul24(_block(torch.ones(2)), _block(torch.ones(2)))


@triton.jit
def _scatter_add_kernel(index_ptr, value_ptr, out_ptr, rows, XBLOCK: tl.constexpr, R: tl.constexpr):
    # Inductor's scatter-add: a [XBLOCK, R] block, the row mask [XBLOCK, 1] broadcast by tl.atomic_add.
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    r = tl.arange(0, R)[None, :]
    index = tl.load(index_ptr + xindex, xmask)
    value = tl.load(value_ptr + (r + R * xindex), xmask, other=0.0)
    tl.atomic_add(out_ptr + tl.broadcast_to(r + R * index, [XBLOCK, R]), value, xmask, sem="relaxed")


@pytest.mark.parametrize("xblock", [1, 2, 8])
def test_masked_atomic_add_of_a_one_row_block_adds_every_row(xblock):
    """With XBLOCK=1 the mask is a [1, 1] block broadcast to [1, 32]: before repair_atomics the
    interpreter skipped most of these updates, silently (0 of 5 rows right)."""
    _triton_interpreter.repair_atomics()
    torch.manual_seed(0)
    index = torch.tensor([1, 2, 1, 1, 0, 2, 1, 3] * 3)
    values = torch.randn(24, 32)
    out = torch.zeros(5, 32)
    _scatter_add_kernel[(triton.cdiv(24, xblock),)](index, values, out, 24, XBLOCK=xblock, R=32)
    torch.testing.assert_close(out, torch.zeros(5, 32).index_add(0, index, values))


def test_the_interpreter_driver_reports_the_nominal_target():
    _triton_interpreter.install("cpu")
    from triton.runtime import driver

    target = driver.active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == _triton_interpreter.TARGET
    assert driver.active.utils.get_device_properties(0)["multiprocessor_count"] == 108
