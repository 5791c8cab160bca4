"""torch_fl._triton_fast and csrc/src/triton_program_launch.cpp: the programs of reductions,
softmax and the norms, the fused RNN cells and creation ops replayed from C++.

Without a GPU the C++ side runs for real on the simulated NPU against a stand-in for the CUDA
driver (a `libcuda.so.1` compiled here, first on LD_LIBRARY_PATH) with two float32 "kernels",
`scale` (out = in * factor) and `rowsum` (out[r] = the sum of row r), and a launch log. The
test's Python kernels allocate through torch, make views, report each launch to the recorder
as FastKernel does, and launch through the same stand-in driver: so the keys, the guard on
the ops a recording runs, the re-basing of pointers on the call's arguments and allocations,
and the outputs are checked end to end through torch's own ops. On the GPU the replays of the
real kernels are checked against the Python launch and native CUDA (the tests at the end;
scripts/nvgpu_device_run.sh, stage `fast`).
"""
from __future__ import annotations

import os
import subprocess

import pytest
import torch

from e2e_helpers import last_json_line, run_python

STAND_IN_DRIVER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
/* The launch log: function, grid x, block, shared bytes, the first two parameters. */
uint64_t launch_log[64][6];
int launches = 0;
/* scale(out, in, n, factor) and rowsum(out, in, m, k), over float32. */
void scale(void** params) {
  float* out = *(float**)params[0];
  const float* in = *(const float**)params[1];
  int32_t n = *(int32_t*)params[2];
  float factor = *(float*)params[3];
  for (int32_t i = 0; i < n; ++i) out[i] = in[i] * factor;
}
void rowsum(void** params) {
  float* out = *(float**)params[0];
  const float* in = *(const float**)params[1];
  int32_t m = *(int32_t*)params[2], k = *(int32_t*)params[3];
  for (int32_t r = 0; r < m; ++r) {
    float s = 0;
    for (int32_t j = 0; j < k; ++j) s += in[(int64_t)r * k + j];
    out[r] = s;
  }
}
uintptr_t scale_address(void) { return (uintptr_t)&scale; }
uintptr_t rowsum_address(void) { return (uintptr_t)&rowsum; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  /* Stream order, as the GPU keeps it: work queued before the launch has landed. */
  int (*stream_synchronize)(void*) = (int (*)(void*))dlsym(RTLD_DEFAULT, "simnpuStreamSynchronize");
  if (stream_synchronize) stream_synchronize(stream);
  uint64_t* entry = launch_log[launches++ % 64];
  entry[0] = (uintptr_t)f; entry[1] = gx; entry[2] = bx; entry[3] = shared;
  memcpy(&entry[4], params[0], 8);
  memcpy(&entry[5], params[1], 8);
  ((void (*)(void**))f)(params);
  (void)gy; (void)gz; (void)by; (void)bz; (void)extra;
  return 0;
}
int cuGetErrorString(int status, const char** text) { *text = "stand-in error"; (void)status; return 0; }
int cuCtxGetCurrent(void** context) { static int c; *context = &c; return 0; }
/* Both kernels as Triton 3.6 compiles them: two pointers, two 32-bit values, then the global
   and profile scratch pointers. */
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* bytes) {
  static const size_t sizes[] = {8, 8, 4, 4, 8, 8};
  if (index >= 6) return 1;
  *bytes = sizes[index];
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
from torch_fl.triton_ops._launch import RECORDER

C = torch_fl_npu._C
driver = ctypes.CDLL(os.path.join(os.environ["STAND_IN_DIR"], "libcuda.so.1"))
for name in ("scale_address", "rowsum_address"):
    getattr(driver, name).restype = ctypes.c_uint64
SCALE, ROWSUM = driver.scale_address(), driver.rowsum_address()
log = (ctypes.c_uint64 * 6 * 64).in_dll(driver, "launch_log")

class Compiled:  # what FastKernel reports of a compiled kernel
    def __init__(self, function, signature):
        self.function = function
        self.src = type("Src", (), {"signature": signature})()
    metadata = type("Meta", (), {"num_warps": 4, "shared": 0})()

SCALE_SIG = {"out": "*fp32", "x": "*fp32", "n": "i32", "factor": "fp32", "BLOCK": "constexpr"}
ROWSUM_SIG = {"out": "*fp32", "x": "*fp32", "m": "i32", "k": "i32"}

def launch(function, signature, grid, *values):
    # as FastKernel does while a call records: Triton's launch, then the report
    torch.npu.synchronize()
    slots = []
    for kind, v in zip(signature.values(), values):
        if kind.startswith("*"):
            slots.append(ctypes.c_uint64(v.data_ptr()))
        elif kind == "fp32":
            slots.append(ctypes.c_float(v))
        else:
            slots.append(ctypes.c_int32(v))
    slots += [ctypes.c_uint64(0), ctypes.c_uint64(0)]
    params = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
    driver.cuLaunchKernel(ctypes.c_void_p(function), grid, 1, 1, 128, 1, 1, 0, None, params, None)
    RECORDER.report(Compiled(function, signature), (grid,), values + (128,))

outside = torch.zeros(4096).to("npu")  # memory no call allocated
python_calls = []

def kernel_of(op):
    def twice_row_sums(x, dim, keepdim=False, *, dtype=None):
        python_calls.append(op)
        if op == "mean.dim":
            x = x.abs()   # an op a replay would not run: never recorded
        if op == "amax":
            _triton_fast._unreported_launch()  # a Triton launch outside FastKernel
        n, k = x.numel(), x.shape[-1]
        m = n // k
        scratch = torch.empty(n, device=x.device)       # scratch: allocated again at each replay
        launch(SCALE, SCALE_SIG, (n + 127) // 128, scratch, x, n, 2.0)
        out = torch.empty(m, device=x.device)
        source = outside if op == "prod.dim_int" else scratch  # a pointer into memory of no argument
        launch(ROWSUM, ROWSUM_SIG, m, out, source, m, k)
        return out.view(*x.shape[:-1], 1) if keepdim else out.view(x.shape[:-1])

    def doubled_in_place(x, diagonal=0):
        python_calls.append(op)
        launch(SCALE, SCALE_SIG, 1, x, x, x.numel(), 2.0)
        return x

    if op == "tril_":
        return doubled_in_place
    if op in ("amax", "prod.dim_int"):
        return lambda x, dim, keepdim=False, **_: twice_row_sums(x, dim, keepdim)
    return twice_row_sums

ops = ["sum.dim_IntList", "mean.dim", "amax", "prod.dim_int", "tril_", "equal"]
fronted, libraries, why = _triton_fast.front("npu", ops, C, kernel_of)
result = {"fronted": sorted(fronted), "why": why}

def host(t):
    torch.npu.synchronize()
    return t.cpu()

checks = {}
a = torch.arange(48.0).view(3, 16)
first = torch.sum(a.to("npu"), -1)
b = torch.arange(48.0).view(3, 16).flip(0)
second = torch.sum(b.to("npu"), -1)     # the same key: replayed, with its own input and output
checks["first"] = torch.equal(host(first), 2 * a.sum(-1))
checks["replayed"] = torch.equal(host(second), 2 * b.sum(-1))
checks["new_output"] = second.data_ptr() != first.data_ptr()
entry = [int(v) for v in log[(ctypes.c_int.in_dll(driver, "launches").value - 1) % 64]]
checks["rowsum_launch"] = entry[0] == ROWSUM and entry[1] == 3 and entry[2] == 128 and entry[4] == second.data_ptr()
kept = [torch.sum(t.to("npu"), -1, keepdim=True) for t in (a, b)]   # a view of the allocation
checks["keepdim"] = [list(kept[1].shape), torch.equal(host(kept[1]), 2 * b.sum(-1, keepdim=True))]
big = torch.arange(4 * 48.0).view(4, 3, 16).to("npu")
rows = [torch.sum(big[i], -1) for i in (1, 2, 3)]  # arguments at an offset in their storage
checks["offsets"] = all(torch.equal(host(r), 2 * torch.arange(4 * 48.0).view(4, 3, 16)[i].sum(-1))
                        for r, i in zip(rows, (1, 2, 3)))
wide = torch.ones(5, 32)
checks["other_shape"] = [torch.equal(host(torch.sum(wide.to("npu"), -1)), torch.full((5,), 64.0))
                         for _ in range(2)]
for _ in range(3):
    torch.mean(a.to("npu"), -1)     # ran abs: Python every time
    torch.amax(a.to("npu"), -1)     # an unreported launch: Python every time
    torch.prod(a.to("npu"), -1)     # a pointer outside: Python every time
checks["voided_still_right"] = torch.equal(host(torch.mean(-a.to("npu"), -1)), 2 * a.sum(-1))
y = a.to("npu")
for _ in range(3):
    y.tril_()                       # returns its argument: replayed in place
checks["in_place"] = torch.equal(host(y), 8 * a)
result["checks"] = checks
result["stats"] = {k: v for k, v in C._fast_triton_stats().items() if k in ops}
result["voids"] = C._fast_program_voids()
result["python_calls"] = {op: python_calls.count(op) for op in ops if python_calls.count(op)}
result["outside_a_call"] = list(C._record_program_launch(SCALE, (1, 1, 1), 128, 0, []))
print(json.dumps(result))
"""


def _npu_backend_built() -> bool:
    proc = run_python("import torch_fl_npu, torch; torch.zeros(1, device='npu')", timeout=120)
    return proc.returncode == 0


@pytest.fixture(scope="module")
def stand_in_driver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stand_in_cuda_program")
    source = folder / "libcuda.c"
    source.write_text(STAND_IN_DRIVER)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(folder / "libcuda.so.1"), str(source), "-ldl"],
                   check=True)
    return folder


def _run_replay_script(stand_in_driver, script=REPLAY_SCRIPT):
    assert _npu_backend_built(), "build the npu backend first (scripts/quickstart.sh)"
    library_path = os.pathsep.join(p for p in (str(stand_in_driver), os.environ.get("LD_LIBRARY_PATH")) if p)
    proc = run_python(script, env={"LD_LIBRARY_PATH": library_path, "STAND_IN_DIR": str(stand_in_driver)},
                      timeout=300)
    assert proc.returncode == 0, proc.stderr
    return last_json_line(proc.stdout)


def test_npu_program_replay_from_cpp_through_the_dispatcher(stand_in_driver):
    """torch.sum on the NPU, fronted by the C++ kernel: the first call of a key runs the Python
    kernel (a scratch allocation, two launches, a view returned) and records its program; later
    calls with that key are replayed in C++ with their own input (also at an offset in its
    storage), a fresh scratch and output, the recorded grid and constants. A recording whose
    kernel ran another op, launched outside FastKernel or passed a pointer into memory the call
    neither got nor allocated is void: those calls always take Python, and answer right. An op
    returning its argument is replayed in place; `equal` (a bool) is not fronted."""
    r = _run_replay_script(stand_in_driver)
    assert r["fronted"] == ["amax", "mean.dim", "prod.dim_int", "sum.dim_IntList", "tril_"], r["why"]
    checks = r["checks"]
    assert checks.pop("keepdim") == [[3, 1], True]
    assert checks.pop("other_shape") == [True, True]
    assert [name for name, ok in checks.items() if not ok] == [], checks
    # sum: Python for the first of each key (3x16, keepdim, 5x32), replayed otherwise (the
    # rows of `big` have the 3x16 key)
    assert r["stats"] == {
        "sum.dim_IntList": {"replayed": 6, "to_python": 3, "recipes": 3},
        "mean.dim": {"replayed": 0, "to_python": 4, "recipes": 0},
        "amax": {"replayed": 0, "to_python": 3, "recipes": 0},
        "prod.dim_int": {"replayed": 0, "to_python": 3, "recipes": 0},
        "tril_": {"replayed": 2, "to_python": 1, "recipes": 1},
    }, r["stats"]
    assert r["python_calls"] == {"sum.dim_IntList": 3, "mean.dim": 4, "amax": 3, "prod.dim_int": 3, "tril_": 1}
    assert r["voids"] == {
        "mean.dim": {"the Python kernel ran aten::abs, which a replay would not run": 1},
        "amax": {"a Triton launch not made through FastKernel (autotuned, or an unwrapped JITFunction)": 1},
        "prod.dim_int": {"a pointer outside the arguments' views and the call's own allocations": 1},
    }, r["voids"]
    assert r["outside_a_call"][0] is False and "no call" in r["outside_a_call"][1]
