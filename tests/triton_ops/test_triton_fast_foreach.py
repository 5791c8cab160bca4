"""torch_fl._triton_fast and csrc/src/triton_foreach_launch.cpp: foreach ops' table launches
replayed from C++.

Without a GPU the C++ side runs for real on the simulated NPU against a stand-in for the CUDA
driver (a `libcuda.so.1` compiled here, first on LD_LIBRARY_PATH). Its one "kernel" walks the
table as foreach_pointwise_kernel does, over float32: out = a * b per row, b an immediate
double or a pointer, and it logs each launch with the table's first row. The Python kernel
of the test computes on the host and reports the table `_foreach._table` builds, so the keys,
the working-out of each row field, the outputs, the per-call table and its reuse are checked
end to end through torch._foreach_*. On the GPU the same path launches the compiled Triton
kernel: the tests at the end, against the Python launch and native CUDA
(scripts/nvgpu_device_run.sh, stage `fast`).
"""
from __future__ import annotations

import copy

import pytest
import torch

from e2e_helpers import compile_stand_in_driver, nvgpu_backend, run_with_stand_in_driver


STAND_IN_DRIVER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
/* The launch log: grid, block, shared bytes, the table's address, its first row. */
uint64_t launch_log[64][12];
int launches = 0;
/* The "kernel": per table row (out, a, b, c, d, start, end, unused), out[j] = a[j] * b over
   float32, b the double whose bits are field b (P0 == 0) or b[j] (P0 == 1: field b a pointer). */
void foreach_f32(unsigned rows, void** params) {
  const int64_t* table = *(const int64_t**)params[0];
  int32_t pointer = *(int32_t*)params[1];
  for (unsigned r = 0; r < rows; ++r) {
    const int64_t* row = table + 8 * r;
    float* out = (float*)row[0];
    const float* a = (const float*)row[1];
    double s;
    memcpy(&s, &row[2], 8);
    for (int64_t j = row[5]; j < row[6]; ++j) out[j] = a[j] * (pointer ? ((const float*)row[2])[j] : (float)s);
  }
}
uintptr_t foreach_f32_address(void) { return (uintptr_t)&foreach_f32; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  /* Stream order, as the GPU keeps it: the table upload queued before the launch has landed. */
  int (*stream_synchronize)(void*) = (int (*)(void*))dlsym(RTLD_DEFAULT, "simnpuStreamSynchronize");
  if (stream_synchronize) stream_synchronize(stream);
  uint64_t* entry = launch_log[launches++ % 64];
  entry[0] = gx; entry[1] = bx; entry[2] = shared;
  memcpy(&entry[3], params[0], 8);
  memcpy(&entry[4], *(void**)params[0], 64);
  ((void (*)(unsigned, void**))f)(gx, params);
  (void)gy; (void)gz; (void)by; (void)bz; (void)extra;
  return 0;
}
int cuGetErrorString(int status, const char** text) { *text = "stand-in error"; (void)status; return 0; }
int cuCtxGetCurrent(void** context) { static int c; *context = &c; return 0; }
/* foreach_pointwise_kernel's parameters as Triton 3.6 compiles it with P0..P2 32-bit: the
   table, P0, P1, P2, then the global and profile scratch pointers. */
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* bytes) {
  static const size_t sizes[] = {8, 4, 4, 4, 8, 8};
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
from torch_fl.triton_ops import _common, _foreach

C = torch_fl_npu._C
driver = ctypes.CDLL(os.path.join(os.environ["STAND_IN_DIR"], "libcuda.so.1"))
driver.foreach_f32_address.restype = ctypes.c_uint64
log = (ctypes.c_uint64 * 12 * 64).in_dll(driver, "launch_log")

class Compiled:  # foreach_pointwise_kernel's parameter list, P0..P2 32-bit
    src = type("Src", (), {"signature": {"table": "*i64", "P0": "i32", "P1": "i32", "P2": "i32",
                                         "OP": "constexpr", "BLOCK": "constexpr"}})()
    metadata = type("Meta", (), {"num_warps": 4, "shared": 0})()
    function = driver.foreach_f32_address()

python_calls = []
def fused_adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, **options):
    # A stand-in for the fused optimizer's kernel: its table has the real layout (parameter,
    # gradient, two states, the step), the "kernel" computes params = grads * exp_avgs.
    python_calls.append("_fused_adamw_")
    ints = []
    for p, g, m, v, step in zip(params, grads, exp_avgs, exp_avg_sqs, state_steps):
        p.copy_((g.cpu() * m.cpu()).to(p.device))
        ints += [p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr(), step.data_ptr(), p.numel()]
    table, rows, host = _foreach._table(ints, torch.device("cpu"))
    _common.CAPTURE.launches.append(_common.TableLaunch(Compiled(), (table, 1, 0, 0), host, _foreach._CHUNK))

def kernel_of(op):
    if op == "_fused_adamw_":
        return fused_adamw
    inplace = op.startswith("_foreach_mul_")
    pointer = op.endswith(".List")
    def run(xs, other):  # the Python kernel: computes on the host, reports the table it would launch
        python_calls.append(op)
        n = len(xs)
        factors = other if isinstance(other, (list, tuple)) else [other] * n
        outs = xs if inplace else [torch.empty_like(x) for x in xs]
        ints = []
        for x, out, factor in zip(xs, outs, factors):
            out.copy_((x.cpu() * (factor.cpu() if pointer else factor)).to(x.device))
            # as _common.dense_operands passes an operand: an address, an integer, a double's bits
            b = factor.data_ptr() if pointer else factor if isinstance(factor, int) else \
                _common.scalar_bits(factor, torch.float64)[0]
            ints += [out.data_ptr(), x.data_ptr(), b, 0, 0, x.numel()]
        table, rows, host = _foreach._table(ints, torch.device("cpu"))
        _common.CAPTURE.launches.append(_common.TableLaunch(Compiled(), (table, int(pointer), 0, 0), host,
                                                            _foreach._CHUNK))
        return None if inplace else outs
    return run

ops = ["_foreach_mul_.Scalar", "_foreach_mul.Scalar", "_foreach_mul_.ScalarList", "_foreach_mul.List",
       "_foreach_pow.ScalarList", "_fused_adamw_"]
fronted, libraries, why = _triton_fast.front("npu", ops, C, kernel_of)
result = {"fronted": sorted(fronted), "why": why}
host = [torch.arange(40000, dtype=torch.float32) / 1000, torch.full((5,), 2.0), torch.arange(17.0).view(1, 17)]
xs = [t.to("npu") for t in host]

def same(tensors, wanted):
    torch.npu.synchronize()
    return all(torch.equal(t.cpu(), w) for t, w in zip(tensors, wanted))

checks = {}
tables = []
for step in range(3):   # in place, one scalar: Python once, then replayed, reusing its table
    torch._foreach_mul_(xs, 2.5)
    torch.npu.synchronize()
    launched = ctypes.c_int.in_dll(driver, "launches").value
    tables.append(int(log[launched - 1][3]) if launched else 0)
checks["inplace"] = same(xs, [t * 2.5 * 2.5 * 2.5 for t in host])
first = [int(v) for v in log[0]]
checks["launch"] = {"grid": first[0], "block": first[1], "shared": first[2],
                    "row0": [first[4] == xs[0].data_ptr(), first[5] == xs[0].data_ptr(), first[9], first[10]]}
checks["table_reused"] = tables[1] == tables[2] != 0

base = [t.clone() for t in xs]
outs = [torch._foreach_mul(base, 3.0) for _ in range(2)]    # out of place: new outputs each call
scaled = [t * 2.5 * 2.5 * 2.5 for t in host]
checks["outofplace"] = same(outs[1], [t * 3.0 for t in scaled]) and same(base, scaled)
checks["new_outputs"] = all(a.data_ptr() != b.data_ptr() for a, b in zip(outs[0], outs[1]))

ys = [t.to("npu") for t in host]
torch._foreach_mul_(ys, [0.5, 1.5, 3.0])
torch._foreach_mul_(ys, [2.0, 0.25, 4.0])   # the same key, other values: replayed, each row its own value
checks["scalarlist"] = same(ys, [host[0] * 1.0, host[1] * 0.375, host[2] * 12.0])
torch._foreach_mul_(ys, [2, 1, 1])        # integers: another key
checks["scalarlist_int"] = same(ys, [host[0] * 2.0, host[1] * 0.375, host[2] * 12.0])

zs = [t.to("npu") + 1 for t in host]
products = [torch._foreach_mul(xs, zs) for _ in range(2)]     # lists: replayed with zs' own pointers
want = [x.cpu() * z.cpu() for x, z in zip(xs, zs)]
checks["list"] = same(products[1], want)
squares = [torch._foreach_mul(xs, xs) for _ in range(2)]       # one list twice: its own key, replayed
checks["aliased"] = same(squares[1], [x.cpu() * x.cpu() for x in xs])
mixed = [xs[0], zs[1], zs[2]]   # shares its first tensor only: the key of (xs, xs), not its replay
checks["partly_aliased"] = same(torch._foreach_mul(xs, mixed), [x.cpu() * m.cpu() for x, m in zip(xs, mixed)])

two = [xs[0], xs[1].double()]   # mixed dtypes, a non-contiguous tensor: never keyed
torch._foreach_mul_(two, 1.0)
torch._foreach_mul_([xs[0].view(200, 200).t()], 1.0)

# A fused optimizer's call: an empty list (no AMSGrad) and a list of one-element steps in the key,
# the steps' addresses a row field; replayed with the call's own tensors.
options = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
for step in range(3):
    ps, gs, ms, vs = [[t.to("npu") + k for t in host] for k in range(4)]
    steps = [torch.tensor(float(step + 1), device="npu") for _ in host]
    torch._fused_adamw_(ps, gs, ms, vs, [], steps, **options)
    checks[f"fused_{step}"] = same(ps, [(t + 1) * (t + 2) for t in host])
torch.npu.synchronize()
row = [int(v) for v in log[ctypes.c_int.in_dll(driver, "launches").value - 1][4:12]]
checks["fused_row"] = row[:5] == [ps[0].data_ptr(), gs[0].data_ptr(), ms[0].data_ptr(), vs[0].data_ptr(),
                                  steps[0].data_ptr()] and row[7] == 0

result["checks"] = checks
result["stats"] = {k: v for k, v in C._fast_triton_stats().items() if k.startswith(("_foreach", "_fused"))}
result["python_calls"] = len(python_calls)
result["launches"] = ctypes.c_int.in_dll(driver, "launches").value
result["outside_a_call"] = list(C._record_foreach_launch(1, 128, 0, torch.zeros(1, 8, dtype=torch.long), 16384,
                                                         [(1, 0, 8)]))
print(json.dumps(result))
"""



@pytest.fixture(scope="module")
def stand_in_driver(tmp_path_factory):
    return compile_stand_in_driver(tmp_path_factory.mktemp("stand_in_cuda_foreach"), STAND_IN_DRIVER)


def test_npu_foreach_replay_from_cpp_through_the_dispatcher(stand_in_driver):
    """torch._foreach_mul* on the NPU, fronted by the C++ kernel: the first call of a key runs
    the Python kernel and records its table launch; later ones are replayed in C++, with the
    table written for their own tensors (a new value per row from a scalar list, the second
    list's pointers, new outputs out of place), an identical table reused. One list passed
    twice has its own key, and a call whose lists share only their first tensor is not
    replayed under it; mixed dtypes and strided tensors are never keyed; pow with a list of
    exponents is not fronted (its kernel depends on their values). A fused optimizer's call
    (an empty list, a list of one-element step tensors) is keyed and replayed alike."""
    r = run_with_stand_in_driver(REPLAY_SCRIPT, stand_in_driver)
    assert r["fronted"] == ["_foreach_mul.List", "_foreach_mul.Scalar", "_foreach_mul_.Scalar",
                            "_foreach_mul_.ScalarList", "_fused_adamw_"], r["why"]
    checks = r["checks"]
    # 40,000 elements make three rows of 16,384, the others one each; row 0 covers [0, 16384)
    assert checks.pop("launch") == {"grid": 5, "block": 128, "shared": 0, "row0": [True, True, 0, 16384]}
    assert [name for name, ok in checks.items() if not ok] == [], checks
    assert r["stats"] == {
        "_foreach_mul_.Scalar": {"replayed": 2, "to_python": 3, "recipes": 1},
        "_foreach_mul.Scalar": {"replayed": 1, "to_python": 1, "recipes": 1},
        "_foreach_mul_.ScalarList": {"replayed": 1, "to_python": 2, "recipes": 2},
        "_foreach_mul.List": {"replayed": 2, "to_python": 3, "recipes": 2},
        "_fused_adamw_": {"replayed": 2, "to_python": 1, "recipes": 1},
    }, r["stats"]
    assert r["python_calls"] == 10 and r["launches"] == 8
    assert r["outside_a_call"][0] is False and "no call" in r["outside_a_call"][1]


# ----------------------------------------------------- on the GPU (nvgpu) ---

needs_nvgpu = pytest.mark.skipif(nvgpu_backend() is None, reason="needs the nvgpu backend on a GPU: "
                                 "scripts/nvgpu_device_run.sh OUTDIR setup install fast")

# An optimizer's calls and a few others: case -> (the op, its arguments from lists a, b, c).
FOREACH_CASES = {
    "mul_.Scalar": ("_foreach_mul_.Scalar", lambda a, b, c: ((a, 0.9), {})),
    "lerp_.Scalar": ("_foreach_lerp_.Scalar", lambda a, b, c: ((a, b, 0.1), {})),
    "addcmul_.Scalar aliased": ("_foreach_addcmul_.Scalar", lambda a, b, c: ((a, b, b, 0.001), {})),
    "sqrt": ("_foreach_sqrt", lambda a, b, c: (([t.abs() for t in c],), {})),
    "div_.ScalarList": ("_foreach_div_.ScalarList", lambda a, b, c: ((a, [1.5 + i for i in range(len(a))]), {})),
    "add_.Scalar": ("_foreach_add_.Scalar", lambda a, b, c: ((a, 1e-3), {})),
    "addcdiv_.ScalarList": ("_foreach_addcdiv_.ScalarList",
                            lambda a, b, c: ((a, b, [t.abs() + 1 for t in c], [-0.01 * (i + 1) for i in range(len(a))]),
                                             {})),
    "add.List alpha": ("_foreach_add.List", lambda a, b, c: ((a, b), {"alpha": 0.5})),
    "mul_.Tensor device 0-dim": ("_foreach_mul_.Tensor", lambda a, b, c: ((a, b[0].reshape(-1)[0]), {})),
    "zero_": ("_foreach_zero_", lambda a, b, c: ((a,), {})),
    "copy_": ("_foreach_copy_", lambda a, b, c: ((a, b), {})),
}


def _aten(op: str):
    name, _, overload = op.partition(".")
    packet = getattr(torch.ops.aten, name)
    return getattr(packet, overload) if overload else packet.default


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_replays_match_the_python_launch_and_native_cuda(dtype):
    """Each foreach op, three calls per key on nvgpu over lists of tensors of several sizes
    (one element, odd, several table rows), new values each call: the first runs the Python
    kernel, the others are replayed in C++. Every result is bitwise what the Python kernel
    (the op's mirror, called directly) gives for the same inputs, and close to native CUDA's."""
    backend = nvgpu_backend()
    C = backend._C
    before = C._fast_triton_stats()
    g = torch.Generator().manual_seed(0)
    sizes = [(1,), (17,), (300, 129), (4096,)]
    for case, (op, arguments) in FOREACH_CASES.items():
        mirror = getattr(torch.ops.torchfl_nvgpu_triton, op.replace(".", "_"))
        inplace = not _aten(op)._schema.returns
        for _ in range(3):
            host = [[torch.randn(s, generator=g).to(dtype) for s in sizes] for _ in range(3)]
            got = {}
            for where, call in (("fronted", _aten(op)), ("python", mirror), ("cuda", _aten(op))):
                lists = [[t.to("cuda" if where == "cuda" else "nvgpu") for t in lst] for lst in host]
                args, kwargs = arguments(*lists)
                out = call(*args, **kwargs)
                got[where] = [t.cpu() for t in (args[0] if inplace else out)]
            for fronted, python, native in zip(got["fronted"], got["python"], got["cuda"]):
                assert torch.equal(fronted, python), case
                torch.testing.assert_close(fronted, native, msg=lambda m: f"{case}: {m}")
    after = C._fast_triton_stats()
    for op, _ in FOREACH_CASES.values():
        replayed = after[op]["replayed"] - before.get(op, {}).get("replayed", 0)
        assert replayed >= 2, (op, after[op])


@needs_nvgpu
@pytest.mark.parametrize("mode,replayed_op", [("foreach", "_foreach_addcdiv_.ScalarList"), ("fused", "_fused_adamw_")])
def test_adamw_with_replays_matches_the_cpu(mode, replayed_op):
    """torch.optim.AdamW (foreach, or fused) on nvgpu, its calls replayed from C++ after the
    first step: ten steps of a small model give the parameters AdamW gives on the CPU."""
    backend = nvgpu_backend()
    before = backend._C._fast_triton_stats().get(replayed_op, {}).get("replayed", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    data, target = torch.randn(32, 64), torch.randn(32, 10)
    params = {}
    for device in ("cpu", "nvgpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, **{mode: True})
        for _ in range(10):
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(data.to(device)), target.to(device)).backward()
            opt.step()
        params[device] = [p.detach().cpu() for p in m.parameters()]
    for got, want in zip(params["nvgpu"], params["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert backend._C._fast_triton_stats()[replayed_op]["replayed"] >= before + 8


@needs_nvgpu
def test_optimizer_step_replays_never_wait_for_the_stream():
    """AdamW (foreach) steps on nvgpu, their scalar lists new at every step (so a new launch table
    is uploaded each time): no stream synchronisation in the steps, as on CUDA. The
    tables' host buffers once came from CUDA's pinned allocator (torch's choice in a CUDA build),
    which the chip's copy did not know as pinned: it waited for the stream at each upload."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).to("nvgpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    data, target = torch.randn(32, 64, device="nvgpu"), torch.randn(32, 10, device="nvgpu")
    for _ in range(3):   # the keys recorded
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data), target).backward()
        opt.step()
    torch.nvgpu.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(data), target).backward()
            opt.step()
    # (a device synchronisation is the profiler's own, when it stops)
    waits = [e.name for e in prof.events() if "StreamSynchronize" in e.name]
    assert waits == [], waits


# The fused optimizers: case -> (the op, its arguments from parameter, gradient, two state lists and steps).
FUSED_CASES = {
    "adamw": ("_fused_adamw_", lambda p, g, m, v, s: ((p, g, m, v, [], s), dict(
        lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False))),
    "adam decay": ("_fused_adam_", lambda p, g, m, v, s: ((p, g, m, v, [], s), dict(
        lr=1e-3, beta1=0.8, beta2=0.99, weight_decay=0.1, eps=1e-6, amsgrad=False, maximize=True))),
    "sgd momentum": ("_fused_sgd_", lambda p, g, m, v, s: ((p, g, m), dict(
        weight_decay=1e-4, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True, maximize=False, is_first_step=False))),
}


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_optimizer_replays_match_the_python_launch_and_native_cuda(dtype):
    """Each fused optimizer step, three calls per key on nvgpu (new values each call): the first
    runs the Python kernel, the others are replayed in C++; every list the step writes is
    bitwise what the Python kernel gives and close to native CUDA's fused kernel."""
    backend = nvgpu_backend()
    C = backend._C
    before = C._fast_triton_stats()
    g = torch.Generator().manual_seed(0)
    sizes = [(1,), (17,), (300, 129), (4096,)]
    for case, (op, arguments) in FUSED_CASES.items():
        mirror = getattr(torch.ops.torchfl_nvgpu_triton, op.replace(".", "_"))
        for call_index in range(3):
            host = [[torch.randn(s, generator=g).to(dtype) for s in sizes] for _ in range(2)]
            host += [[torch.rand(s, generator=g).to(dtype) for s in sizes] for _ in range(2)]
            steps = [torch.tensor(float(call_index + 1)) for _ in sizes]
            got = {}
            for where, call in (("fronted", _aten(op)), ("python", mirror), ("cuda", _aten(op))):
                device = "cuda" if where == "cuda" else "nvgpu"
                lists = [[t.to(device) for t in lst] for lst in host]
                args, kwargs = arguments(*lists, [s.to(device) for s in steps])
                call(*args, **kwargs)
                got[where] = [[t.cpu() for t in lst] for lst in lists]
            for fronted, python, native in zip(got["fronted"], got["python"], got["cuda"]):
                for a, b, c in zip(fronted, python, native):
                    assert torch.equal(a, b), case
                    torch.testing.assert_close(a, c, msg=lambda m: f"{case}: {m}")
    after = C._fast_triton_stats()
    for op, _ in FUSED_CASES.values():
        assert after[op]["replayed"] - before.get(op, {}).get("replayed", 0) >= 2, (op, after[op])
