"""torch_fl._triton_fast and csrc/src/triton_launch.cpp: pointwise Triton launches replayed
from C++.

Without a GPU the C++ side runs for real on the simulated NPU against a stand-in for the
CUDA driver (a `libcuda.so.1` compiled here, found first through LD_LIBRARY_PATH): its
cuLaunchKernel calls the "function", a host routine adding float32 arrays in the NPU's
host-addressable memory, and logs the launch configuration and parameters it was given.
So the keys, the recording, the output allocation and the parameter packing are checked
end to end through `torch.add`. On the H200 the same path launches the compiled Triton
kernels: the last test, against native CUDA (scripts/nvgpu_device_run.sh, stage `fast`).
"""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from e2e_helpers import (compile_stand_in_driver, last_json_line, npu_backend_built, nvgpu_backend, run_python,
                          run_with_stand_in_driver)

from torch_fl import _triton_fast

# ---------------------------------------------------------- parameters ---


class _Compiled:
    """Stands in for triton.compiler.CompiledKernel: what _parameters reads."""

    def __init__(self, signature, **meta):
        self.src = SimpleNamespace(signature=signature)
        fields = dict(num_warps=4, shared=0, num_ctas=1, launch_cooperative_grid=False, launch_pdl=False,
                      global_scratch_size=0, profile_scratch_size=0)
        fields.update(meta)
        self.metadata = SimpleNamespace(**fields)
        self.function = 0x1234


def _launch(kernel, values, numel_index=3):
    from torch_fl.triton_ops._common import DenseLaunch

    return DenseLaunch(kernel, values, numel_index, 1024)


SIGNATURE = {"out": "*fp32", "a": "*fp32", "b": "*fp16", "N": "i32", "V0": "i64", "V1": "constexpr",
             "P0": "u64", "OP": "constexpr"}


def test_parameters_follow_the_compiled_signature():
    """Pointers become the output or the argument they are (by identity, positional or
    keyword), the element count its own source, other integers constants sized by their
    type; compile-time constants are no parameters."""
    out, a, b = torch.empty(4), torch.ones(4), torch.ones(4).half()
    kernel = _Compiled(SIGNATURE)
    values = (out, a, b, 4, -7, 1, 2**64 - 1, 3)
    params = _triton_fast._parameters(_launch(kernel, values), out, (a,), {"other": b}, {"self": 0, "other": 1})
    assert params == [(1, 0, 8), (0, 0, 8), (0, 1, 8), (2, 0, 4), (3, -7, 8), (3, -1, 8)]


def test_parameters_refuse_what_a_replay_cannot_remake():
    out, a = torch.empty(4), torch.ones(4)
    made = torch.ones(4)  # a tensor the preparation made: not an argument of the call
    kernel = _Compiled(SIGNATURE)
    assert _triton_fast._parameters(_launch(kernel, (out, a, made, 4, 0, 1, 0, 3)), out, (a,), {}, {}) is None
    # one tensor passed twice (a + a, a.add_(a)): which argument a pointer is stays unknown
    assert _triton_fast._parameters(_launch(kernel, (out, a, a, 4, 0, 1, 0, 3)), out, (a, a), {}, {}) is None
    assert _triton_fast._parameters(_launch(kernel, (a, a, a, 4, 0, 1, 0, 3)), a, (a, a), {}, {}) is None
    # in place: the output is the first argument, found as that argument
    b = torch.ones(4).half()
    assert _triton_fast._parameters(_launch(kernel, (a, a, b, 4, 0, 1, 0, 3)), a, (a, b), {}, {})[:3] == \
        [(0, 0, 8), (0, 0, 8), (0, 1, 8)]
    float_param = _Compiled({"out": "*fp32", "x": "fp32"})
    assert _triton_fast._parameters(_launch(float_param, (out, 2.5), numel_index=9), out, (), {}, {}) is None
    for meta in ({"num_ctas": 2}, {"global_scratch_size": 64}, {"launch_pdl": True}):
        kernel = _Compiled(SIGNATURE, **meta)
        assert _triton_fast._parameters(_launch(kernel, (out, a, a, 4, 0, 1, 0, 3)), out, (a,), {}, {}) is None


class _Backend:
    def __init__(self):
        self.records = []

    def _record_triton_launch(self, *args):
        self.records.append(args)
        return True, ""


def test_recording_takes_a_call_with_one_dense_launch_only():
    """The mirror op's kernel records a call that made exactly one dense launch; a call
    with a second launch, a strided launch (None) or none records nothing, and a call
    nested in a collecting caller spoils the caller's recording."""
    from torch_fl.triton_ops import _common

    out, a = torch.empty(4), torch.ones(4)
    kernel = _Compiled(SIGNATURE)

    def making(*launches):
        def run(x):
            for launch in launches:
                _common.CAPTURE.launches.append(launch)
            return out
        return run

    one = _launch(kernel, (out, x := a, a, 4, 0, 1, 0, 3))
    for launches, recorded in (((one,), 1), ((one, one), 0), ((None,), 0), ((), 0), ((one, None), 0)):
        backend = _Backend()
        assert _triton_fast._recording(making(*launches), ["self"], False, backend)(x) is out
        assert len(backend.records) == recorded, launches
        assert _common.CAPTURE.launches is None
    backend = _Backend()
    nested = _triton_fast._recording(making(one), ["self"], False, backend)
    outer_launches = []
    _common.CAPTURE.launches = outer_launches
    try:
        nested(x)
    finally:
        _common.CAPTURE.launches = None
    assert outer_launches == [None] and len(backend.records) == 1
    backend = _Backend()
    assert out is _triton_fast._recording(making(one), ["self"], False, backend)(x)
    (recorded_out, inplace, function, threads, shared, per_program, params), = backend.records
    assert (recorded_out, inplace, function, threads, shared, per_program) == (out, False, 0x1234, 128, 0, 1024)


def test_front_is_off_by_environment_or_backend(monkeypatch):
    monkeypatch.setenv(_triton_fast.ENV, "0")
    assert _triton_fast.front("chip", ["add.Tensor"], object(), lambda op: None) == (set(), [], f"{_triton_fast.ENV}=0")
    monkeypatch.delenv(_triton_fast.ENV)
    fronted, libraries, why = _triton_fast.front("chip", ["add.Tensor"], object(), lambda op: None)
    assert (fronted, libraries) == (set(), []) and "no C++ launch" in why
    assert _triton_fast.replayable("add_.Tensor") and _triton_fast.replayable("relu")
    assert not _triton_fast.replayable("add.out") and not _triton_fast.replayable("mm")


# ------------------------------------------- C++ replay on the simulated NPU ---

STAND_IN_DRIVER = r"""
#include <stdint.h>
#include <string.h>
/* The launch log: grid, block, shared bytes, the parameter count and each parameter's low bytes. */
uint64_t launch_log[64][20];
int launches = 0;
/* The "kernel": out[i] = a[i] + b[i] over float32, parameters laid out as pointwise_dense_kernel's. */
void add_f32(unsigned programs, void** params) {
  float* out = *(float**)params[0];
  const float* a = *(float**)params[1];
  const float* b = *(float**)params[2];
  int32_t n = *(int32_t*)params[5];
  for (int32_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  (void)programs;
}
uintptr_t add_f32_address(void) { return (uintptr_t)&add_f32; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  uint64_t* entry = launch_log[launches++ % 64];
  entry[0] = gx; entry[1] = bx; entry[2] = shared;
  for (int i = 0; i < 15; ++i) { entry[3 + i] = 0; memcpy(&entry[3 + i], params[i], i == 5 ? 4 : 8); }
  ((void (*)(unsigned, void**))f)(gx, params);
  (void)gy; (void)gz; (void)by; (void)bz; (void)stream; (void)extra;
  return 0;
}
int cuGetErrorString(int status, const char** text) { *text = "stand-in error"; (void)status; return 0; }
int cuCtxGetCurrent(void** context) { static int c; *context = &c; return 0; }
/* add_f32's parameters as Triton 3.6 compiles pointwise_dense_kernel: the 13 of its
   signature (N 32-bit), then the global and profile scratch pointers. */
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* bytes) {
  if (index >= 15) return 1;
  *bytes = index == 5 ? 4 : 8;
  *offset = 0;
  (void)f;
  return 0;
}
"""

REPLAY_SCRIPT = r"""
import ctypes, json, os
import torch
import torch_fl_npu
from torch_fl import _triton_fast
from torch_fl.triton_ops import _common

C = torch_fl_npu._C
driver = ctypes.CDLL(os.path.join(os.environ["STAND_IN_DIR"], "libcuda.so.1"))
driver.add_f32_address.restype = ctypes.c_uint64
log = (ctypes.c_uint64 * 20 * 64).in_dll(driver, "launch_log")

class Compiled:  # pointwise_dense_kernel's parameter list, compiled for float32
    def __init__(self, count_type="i32"):
        self.src = type("Src", (), {"signature": {"out": "*fp32", "a": "*fp32", "b": "*fp32", "c": "*fp32",
            "d": "*fp32", "N": count_type, "V0": "i64", "V1": "i64", "V2": "i64", "V3": "i64", "P0": "i64",
            "P1": "i64", "P2": "i64", "OP": "constexpr"}})()
    metadata = type("Meta", (), {"num_warps": 4, "shared": 0})()
    function = driver.add_f32_address()

python_calls = []
def kernel_of(op):
    def run(a, b, *, alpha=1):  # the Python kernel: computes on the host, reports one dense launch
        python_calls.append(op)
        out = (a.cpu() + alpha * b.cpu()).to(a.device)
        if alpha == 1 and a.is_contiguous() and b.is_contiguous():  # as launch_pointwise's dense branch
            values = (out, a, b, out, out, out.numel(), 0, 0, 0, 0, 7, 0, 0)
            # sub.Tensor misstates the count's type: the driver's parameter sizes refuse its recording
            launch = _common.DenseLaunch(Compiled("i64" if op == "sub.Tensor" else "i32"), values, 5, 1024)
        else:
            launch = None  # the strided kernel, or another op: not replayed
        if _common.CAPTURE.launches is not None:  # None: recording for a program replay
            _common.CAPTURE.launches.append(launch)
        return out
    return run

fronted, libraries, why = _triton_fast.front("npu", ["add.Tensor", "sub.Tensor"], C, kernel_of)
result = {"fronted": sorted(fronted), "why": why}
a = torch.arange(3000, dtype=torch.float32).to("npu")
b = torch.full((3000,), 0.5).to("npu")
first = torch.add(a, b)
torch.npu.synchronize()
second = torch.add(a, b)   # same key: replayed in C++ by the stand-in driver
torch.npu.synchronize()
entry = list(log[0])
result["replayed_correct"] = torch.equal(second.cpu(), torch.arange(3000.0) + 0.5)
result["first_correct"] = torch.equal(first.cpu(), torch.arange(3000.0) + 0.5)
result["second_is_new"] = second.data_ptr() != first.data_ptr()
result["launch"] = {"grid": entry[0], "block": entry[1], "shared": entry[2],
                    "out": entry[3] == second.data_ptr(), "a": entry[4] == a.data_ptr(),
                    "b": entry[5] == b.data_ptr(), "pad": entry[6] == second.data_ptr(),
                    "numel": entry[8], "constant": entry[13], "scratch": [entry[16], entry[17]]}
for _ in range(2):
    torch.sub(a, b); torch.npu.synchronize()  # the kernel "computes" a + b: only ever run in Python here
torch.add(a[:16], b[:16]); torch.npu.synchronize()  # another element count class: Python
matrix = torch.add(a.view(30, 100), b.view(30, 100))  # the same count, another shape: replayed
torch.npu.synchronize()
result["matrix"] = [list(matrix.shape), torch.equal(matrix.cpu().flatten(), torch.arange(3000.0) + 0.5)]
torch.add(a, b, alpha=2); torch.npu.synchronize()  # a scalar's value is in the key: Python
t = a.view(30, 100).t()
torch.add(t, t); torch.npu.synchronize()  # strided operands: Python, not recorded
torch.add(t, t); torch.npu.synchronize()  # and again Python
s1, t1 = torch.tensor([1.5]).to("npu"), torch.tensor([2.0]).to("npu")
torch.add(s1, s1); torch.npu.synchronize()  # one tensor twice: not recorded
r1 = torch.add(s1, t1); torch.npu.synchronize()  # the same key: Python, recorded
r2 = torch.add(s1, t1); torch.npu.synchronize()  # replayed with the second argument's own pointer
result["aliasing"] = [r1.item(), r2.item()]
torch.set_default_dtype(torch.float64)  # promotion with a Python float reads it: another key
torch.add(a, b); torch.npu.synchronize()
torch.set_default_dtype(torch.float32)
a1, b1 = a.to("npu:1"), b.to("npu:1")  # tensors off the current device: never recorded
for _ in range(2):
    torch.add(a1, b1); torch.npu.synchronize()
result["stats"] = C._fast_triton_stats()
result["python_calls"] = len(python_calls)
result["launches"] = ctypes.c_int.in_dll(driver, "launches").value
result["fallback"] = C.fallback_stats().get("add.Tensor")
result["outside_a_call"] = list(C._record_triton_launch(first, False, 1, 128, 0, 1024, []))
print(json.dumps(result))
"""



@pytest.fixture(scope="module")
def stand_in_driver(tmp_path_factory):
    return compile_stand_in_driver(tmp_path_factory.mktemp("stand_in_cuda"), STAND_IN_DRIVER)


def test_npu_backend_without_a_cuda_driver_says_why():
    assert npu_backend_built(), "build the npu backend first (scripts/quickstart.sh)"
    proc = run_python("""
        import json, torch, torch_fl_npu
        C = torch_fl_npu._C
        print(json.dumps({"available": C._triton_launch_available(),
                          "record": C._record_triton_launch(torch.empty(1), False, 1, 128, 0, 1024, [])}))
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = last_json_line(proc.stdout)
    (available, why), (recorded, refusal) = r["available"], r["record"]
    assert not available and "libcuda.so.1" in why, why
    assert not recorded and "no call" in refusal


def test_npu_replay_from_cpp_through_the_dispatcher(stand_in_driver):
    """torch.add on the NPU, fronted by the C++ kernel: the first call of a key runs the
    Python kernel and records its launch, a later one is replayed in C++ (a new output of
    the call's shape, the call's pointers, the element count, the grid from it, the
    recorded constant); calls with another key (element count class, scalar value,
    strides) go to Python, and a call whose launch was not dense is never recorded."""
    r = run_with_stand_in_driver(REPLAY_SCRIPT, stand_in_driver)
    assert r["fronted"] == ["add.Tensor", "sub.Tensor"], r["why"]
    assert r["first_correct"] and r["replayed_correct"] and r["second_is_new"]
    assert r["launch"] == {"grid": 3, "block": 128, "shared": 0, "out": True, "a": True, "b": True, "pad": True,
                           "numel": 3000, "constant": 7, "scratch": [0, 0]}
    assert r["matrix"] == [[30, 100], True]
    assert r["aliasing"] == [3.5, 3.5]
    # Python: the first, [:16], alpha=2, transposed twice, s1 + s1, the first s1 + t1, under
    # another default dtype (recorded), twice on npu:1 (refused: not the current device);
    # replayed: the second, the 30x100 and the second s1 + t1.
    # sub.Tensor: a launch whose parameter sizes disagree with the kernel's is not recorded
    assert r["stats"] == {"add.Tensor": {"replayed": 3, "to_python": 10, "recipes": 4},
                          "sub.Tensor": {"replayed": 0, "to_python": 2, "recipes": 0}}, r["stats"]
    assert r["python_calls"] == 12 and r["launches"] == 3
    assert r["fallback"] == {"triton": 3}  # the replays count on the op's triton path
    assert r["outside_a_call"][0] is False and "no call" in r["outside_a_call"][1]


# ----------------------------------------------------- on the GPU (nvgpu) ---

needs_nvgpu = pytest.mark.skipif(nvgpu_backend() is None, reason="needs the nvgpu backend on a GPU: "
                                 "scripts/nvgpu_device_run.sh OUTDIR setup install fast")

POINTWISE_CASES = {
    "add.Tensor": lambda x, y: torch.add(x, y),
    "add.Tensor alpha": lambda x, y: torch.add(x, y, alpha=0.5),
    "add_.Tensor": lambda x, y: x.clone().add_(y),
    "sub.Tensor": lambda x, y: x - y,
    "mul.Tensor scalar": lambda x, y: x * 2.5,
    "mul.Tensor host 0-dim": lambda x, y: x * torch.tensor(3.0),
    "mul.Tensor device 0-dim": lambda x, y: x * y[0],
    "div.Tensor": lambda x, y: x / (y.abs() + 1),
    "relu": lambda x, y: torch.relu(x),
    "relu_": lambda x, y: x.clone().relu_(),
    "threshold_backward": lambda x, y: torch.ops.aten.threshold_backward(y, x, 0.0),
    "sigmoid": lambda x, y: torch.sigmoid(x),
    "maximum": lambda x, y: torch.maximum(x, y),
}


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_replayed_launches_match_the_python_launch_and_native_cuda(dtype):
    """Each pointwise op, three calls per key on nvgpu: the first runs the Python kernel, the
    others are replayed in C++; all are bitwise equal to the first and close to native CUDA,
    at element counts of each Triton specialisation class (1, odd, multiple of 16, several
    programs)."""
    backend = nvgpu_backend()
    assert "launched from C++" in backend.triton_status and "none launched" not in backend.triton_status
    C = backend._C
    before = C._fast_triton_stats()
    g = torch.Generator().manual_seed(0)
    for n in (1, 17, 4096, 3 * 1024 + 5, 1 << 20):
        x, y = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
        xn, yn, xc, yc = x.to("nvgpu"), y.to("nvgpu"), x.to("cuda"), y.to("cuda")
        for name, fn in POINTWISE_CASES.items():
            first = fn(xn, yn)
            again = [fn(xn, yn) for _ in range(2)]
            for other in again:
                assert other.device.type == "nvgpu" and other.dtype == first.dtype
                assert torch.equal(other.cpu(), first.cpu()), (name, n)
            torch.testing.assert_close(first.cpu(), fn(xc, yc).cpu(), msg=lambda m: f"{name}, n={n}: {m}")
    after = C._fast_triton_stats()
    for op in ("add.Tensor", "add_.Tensor", "mul.Tensor", "relu_", "threshold_backward", "sigmoid"):
        replayed = after[op]["replayed"] - before.get(op, {}).get("replayed", 0)
        assert replayed >= 10, (op, after[op])


@needs_nvgpu
def test_replays_on_the_current_stream_and_in_backward():
    """A replay goes to the chip's current stream, and the autograd engine's device thread
    replays too (threshold_backward, add_ for accumulation): gradients match the CPU's.
    (Not native CUDA's: with a PrivateUse1 backend loaded, torch's autograd engine takes it
    as the accelerator and CUDA backward asserts in the same process; bench/resnet50.py.)"""
    backend = nvgpu_backend()
    x = torch.randn(1 << 16)
    stream = torch.nvgpu.Stream()
    xn = x.to("nvgpu")
    torch.nvgpu.synchronize()
    with torch.nvgpu.stream(stream):
        results = [torch.relu(xn) + xn for _ in range(3)]
    stream.synchronize()
    for r in results:
        assert torch.equal(r.cpu(), torch.relu(x) + x)
    before = backend._C._fast_triton_stats().get("threshold_backward", {}).get("replayed", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    data = torch.randn(128, 64)
    grads = {}
    for device in ("cpu", "nvgpu"):
        m = copy.deepcopy(model).to(device)
        for _ in range(3):
            m.zero_grad()
            m(data.to(device)).square().mean().backward()
        grads[device] = [p.grad.cpu() for p in m.parameters()]
    for got, want in zip(grads["nvgpu"], grads["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert backend._C._fast_triton_stats()["threshold_backward"]["replayed"] > before


@needs_nvgpu
def test_turned_off_by_environment():
    proc = run_python("""
        import json, torch, torch_fl_nvgpu
        torch_fl_nvgpu._register()  # beside CUDA the chip registers when asked (torch_fl.coexistence)
        x = torch.randn(1000)
        ok = torch.equal((x.to("nvgpu") + 1).cpu(), x + 1)
        print(json.dumps({"status": torch_fl_nvgpu.triton_status, "ok": ok,
                          "stats": torch_fl_nvgpu._C._fast_triton_stats()}))
    """, env={_triton_fast.ENV: "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = last_json_line(proc.stdout)
    assert r["ok"] and r["stats"] == {} and f"none launched from C++: {_triton_fast.ENV}=0" in r["status"]
