"""torch_fl._triton_fast and csrc/src/triton_program_launch.cpp: the programs of reductions,
softmax and the norms, the fused RNN cells, creation ops, matrix products and the other
program families replayed from C++.

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

import copy

import pytest
import torch

from e2e_helpers import compile_stand_in_driver, nvgpu_backend, run_with_stand_in_driver

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
/* counter(out, n, seed_lo, seed_hi, offset): out[i] = offset + i, the Philox counter of element i */
void counter(void** params) {
  float* out = *(float**)params[0];
  int32_t n = *(int32_t*)params[1];
  int64_t offset = *(int64_t*)params[4];
  for (int32_t i = 0; i < n; ++i) out[i] = (float)(offset + i);
}
uintptr_t counter_address(void) { return (uintptr_t)&counter; }
/* iota(out, n, start): out[i] = start + i */
void iota(void** params) {
  float* out = *(float**)params[0];
  int32_t n = *(int32_t*)params[1], start = *(int32_t*)params[2];
  for (int32_t i = 0; i < n; ++i) out[i] = (float)(start + i);
}
uintptr_t iota_address(void) { return (uintptr_t)&iota; }
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
/* The kernels as Triton 3.6 compiles them: their parameters, then the global and profile
   scratch pointers. */
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* bytes) {
  static const size_t sizes[] = {8, 8, 4, 4, 8, 8};
  static const size_t counter_sizes[] = {8, 4, 4, 4, 8, 8, 8};
  static const size_t iota_sizes[] = {8, 4, 4, 8, 8};
  int is_counter = f == (void*)&counter, is_iota = f == (void*)&iota;
  if (index >= (is_counter ? 7 : is_iota ? 5 : 6)) return 1;
  *bytes = is_counter ? counter_sizes[index] : is_iota ? iota_sizes[index] : sizes[index];
  *offset = 0;
  return 0;
}
"""

REPLAY_SCRIPT = r"""
import ctypes, json, os
import torch
import torch_fl_npu
from torch_fl import _triton_fast
from torch_fl.triton_ops import _random
from torch_fl.triton_ops import _common
from torch_fl.triton_ops._launch import RECORDER

C = torch_fl_npu._C
driver = ctypes.CDLL(os.path.join(os.environ["STAND_IN_DIR"], "libcuda.so.1"))
for name in ("scale_address", "rowsum_address", "counter_address", "iota_address"):
    getattr(driver, name).restype = ctypes.c_uint64
SCALE, ROWSUM, COUNTER, IOTA = (driver.scale_address(), driver.rowsum_address(), driver.counter_address(),
                                driver.iota_address())
log = (ctypes.c_uint64 * 6 * 64).in_dll(driver, "launch_log")

class Compiled:  # what FastKernel reports of a compiled kernel
    def __init__(self, function, signature):
        self.function = function
        self.src = type("Src", (), {"signature": signature})()
    metadata = type("Meta", (), {"num_warps": 4, "shared": 0})()

SCALE_SIG = {"out": "*fp32", "x": "*fp32", "n": "i32", "factor": "fp32", "BLOCK": "constexpr"}
ROWSUM_SIG = {"out": "*fp32", "x": "*fp32", "m": "i32", "k": "i32"}
IOTA_SIG = {"out": "*fp32", "n": "i32", "start": "i32"}
COUNTER_SIG = {"out": "*fp32", "n": "i32", "seed_lo": "i32", "seed_hi": "i32", "offset": "i64"}

def launch(function, signature, grid, *values):
    # as FastKernel does while a call records: Triton's launch, then the report
    torch.npu.synchronize()
    slots = []
    for kind, v in zip(signature.values(), values):
        if kind.startswith("*"):
            slots.append(ctypes.c_uint64(v.data_ptr()))
        elif kind == "fp32":
            slots.append(ctypes.c_float(v))
        elif kind == "i64":
            slots.append(ctypes.c_int64(v))
        else:
            slots.append(ctypes.c_int32(v))
    slots += [ctypes.c_uint64(0), ctypes.c_uint64(0)]
    params = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
    driver.cuLaunchKernel(ctypes.c_void_p(function), grid, 1, 1, 128, 1, 1, 0, None, params, None)
    if RECORDER.report is not None:  # None: a pointwise call (its launches are captured otherwise)
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

    def joined(tensors, dim=0):
        python_calls.append(op)
        out = torch.empty(sum(t.numel() for t in tensors), device=tensors[0].device)
        start = 0
        for t in tensors:   # each into a view of the output: a pointer at an offset in an allocation
            launch(SCALE, SCALE_SIG, 1, out[start:start + t.numel()], t, t.numel(), 1.0)
            start += t.numel()
        return out

    def counters(x, p, train):   # as the random family draws: counters reserved, then one launch
        python_calls.append(op)
        n = x.numel()
        seed, offset = _random.philox_seed_offset(None, x.device, n)
        out, kept = torch.empty(x.shape, device=x.device), torch.empty(x.shape, device=x.device)
        launch(COUNTER, COUNTER_SIG, 1, out, n, seed & 0xFFFFFFFF, seed >> 32, offset)
        launch(SCALE, SCALE_SIG, 1, kept, x, n, 1.0)
        return out, kept

    def iota(start, end, step=1, *, out):   # resizes its `out=` argument first, as arange does
        python_calls.append(op)
        out.resize_((int(end) - int(start),))
        launch(IOTA, IOTA_SIG, 1, out, out.numel(), int(start))
        return out

    def scaled(x, other):   # a pointwise op's strided kernel: no dense launch, so a program replay's
        python_calls.append(op)
        if _common.CAPTURE.launches is not None:
            _common.CAPTURE.launches.append(None)
        # a host scalar's value, in the key (a wrapped Python number arrives as one)
        factor = other.item() if isinstance(other, torch.Tensor) else other
        out = torch.empty(x.shape, device=x.device)
        launch(SCALE, SCALE_SIG, 1, out, x, x.numel(), float(factor))
        return out

    def attention(q, k, v, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        # as the attention family returns: tensors, undefined tensors, sizes; no dropout: no counters
        python_calls.append(op)
        seed, offset = _random.philox_seed_offset(None, q.device, 0)
        lse = torch.empty(q.shape[:-1], device=q.device)
        launch(COUNTER, COUNTER_SIG, 1, lse, lse.numel(), seed & 0xFFFFFFFF, seed >> 32, offset)
        out = torch.empty(q.shape, device=q.device)
        launch(SCALE, SCALE_SIG, 1, out, q, q.numel(), 2.0)
        seed_out, offset_out = (torch.empty((), dtype=torch.int64, device=q.device) for _ in range(2))
        return out, lse, None, None, q.shape[-2], k.shape[-2], seed_out, offset_out, None

    if op == "_scaled_dot_product_fused_attention_overrideable":
        return attention
    if op == "mul.Tensor":
        return scaled
    if op == "native_dropout":
        return counters
    if op == "arange.start_out":
        return iota
    if op == "tril_":
        return doubled_in_place
    if op == "cat":
        return joined
    if op in ("amax", "prod.dim_int"):
        return lambda x, dim, keepdim=False, **_: twice_row_sums(x, dim, keepdim)
    return twice_row_sums

ops = ["sum.dim_IntList", "mean.dim", "amax", "prod.dim_int", "tril_", "cat", "native_dropout", "arange.start_out",
       "equal", "mul.Tensor", "_scaled_dot_product_fused_attention_overrideable"]
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
parts = [[torch.arange(5.0) + 10 * i, torch.arange(7.0) - i] for i in range(3)]
joins = [torch.cat([p.to("npu") for p in pair]) for pair in parts]   # a tensor list: its elements' own pointers
checks["tensor_list"] = all(torch.equal(host(j), torch.cat(pair)) for j, pair in zip(joins, parts))
def draws():
    torch.npu.manual_seed(7)
    return [host(torch.native_dropout(torch.ones(1000).to("npu"), 0.5, True)[0]) for _ in range(3)]
first_draws, again = draws(), draws()   # Python, then replays; then all replays after re-seeding
starts = [int(d[0]) for d in first_draws]
checks["counters_advance"] = starts[0] < starts[1] < starts[2] and all(
    torch.equal(d, d[0] + torch.arange(1000.0)) for d in first_draws)
checks["counters_reproducible"] = all(torch.equal(a, b) for a, b in zip(first_draws, again))
torch.npu.manual_seed((1 << 31) + 5)   # a seed Triton passes as i64, not i32: Python once, then replayed
big_seed = [host(torch.native_dropout(torch.ones(1000).to("npu"), 0.5, True)[0]) for _ in range(3)]
checks["seed_of_another_type"] = [int(d[0]) for d in big_seed] == [0, 1000, 2000]
ranges = [torch.arange(5.0, 12.0, device="npu") for _ in range(3)]   # out= resized: replayed resized
checks["resized_out"] = all(torch.equal(host(r), torch.arange(5.0, 12.0)) for r in ranges)
whole = torch.arange(4 * 48.0).view(4, 3, 16)
# pointwise, not dense: Python, then programs; by a Python number, then by a 0-dim host tensor
products = [big[i] * f for f in (3.0, torch.tensor(4.0)) for i in (1, 2, 3)]
checks["strided_pointwise"] = all(torch.equal(host(p), whole[i] * f)
                                  for p, (f, i) in zip(products, [(f, i) for f in (3.0, 4.0) for i in (1, 2, 3)]))
queries, keys = torch.arange(24.0).view(1, 2, 3, 4), torch.ones(1, 2, 5, 4)
attended = [torch.ops.aten._scaled_dot_product_fused_attention_overrideable(queries.to("npu"), keys.to("npu"),
                                                                            keys.to("npu")) for _ in range(3)]
# nine returns (the tensors' own, undefined ones as None, the two sizes) on every call, replays too
checks["int_and_undefined_returns"] = all(
    torch.equal(host(a[0]), 2 * queries) and a[2] is None and a[3] is None and a[8] is None and a[4:6] == (3, 5)
    and a[1].shape == (1, 2, 3) and a[6].dtype == torch.int64 for a in attended)
result["checks"] = checks
result["stats"] = {k: v for k, v in C._fast_triton_stats().items() if k in ops}
result["voids"] = C._fast_program_voids()
result["python_calls"] = {op: python_calls.count(op) for op in ops if python_calls.count(op)}
result["outside_a_call"] = list(C._record_program_launch(SCALE, (1, 1, 1), 128, 0, []))
print(json.dumps(result))
"""



@pytest.fixture(scope="module")
def stand_in_driver(tmp_path_factory):
    return compile_stand_in_driver(tmp_path_factory.mktemp("stand_in_cuda_program"), STAND_IN_DRIVER)


def test_npu_program_replay_from_cpp_through_the_dispatcher(stand_in_driver):
    """torch.sum on the NPU, fronted by the C++ kernel: the first call of a key runs the Python
    kernel (a scratch allocation, two launches, a view returned) and records its program; later
    calls with that key are replayed in C++ with their own input (also at an offset in its
    storage), a fresh scratch and output, the recorded grid and constants. A recording whose
    kernel ran another op, launched outside FastKernel or passed a pointer into memory the call
    neither got nor allocated is void: those calls always take Python, and answer right. An op
    returning its argument is replayed in place, one taking a tensor list with each element's own
    pointer; a random op's replays reserve the generator's counters anew (its draws advance and
    repeat after manual_seed; a seed Triton would type otherwise goes to Python once); one
    resizing its `out=` argument first is replayed resizing the call's own; a pointwise op whose
    call was not one dense launch goes to a program replay (a host scalar's value in its key);
    an op returning integers and undefined tensors beside its tensors (attention's nine returns)
    is replayed with them; `equal` (a bool) is not fronted."""
    r = run_with_stand_in_driver(REPLAY_SCRIPT, stand_in_driver)
    assert r["fronted"] == ["_scaled_dot_product_fused_attention_overrideable", "amax", "arange.start_out", "cat",
                            "mean.dim", "mul.Tensor", "native_dropout", "prod.dim_int", "sum.dim_IntList",
                            "tril_"], r["why"]
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
        "cat": {"replayed": 2, "to_python": 1, "recipes": 1},
        "native_dropout": {"replayed": 7, "to_python": 2, "recipes": 1},
        "arange.start_out": {"replayed": 2, "to_python": 1, "recipes": 1},
        # per factor: the pointwise kernel's Python call (not one dense launch), the program
        # replay's recording, then a replay
        "mul.Tensor": {"replayed": 2, "to_python": 4, "recipes": 2},
        # integer and undefined returns, nine in all
        "_scaled_dot_product_fused_attention_overrideable": {"replayed": 2, "to_python": 1, "recipes": 1},
    }, r["stats"]
    assert r["python_calls"] == {"sum.dim_IntList": 3, "mean.dim": 4, "amax": 3, "prod.dim_int": 3, "tril_": 1,
                                 "cat": 1, "native_dropout": 2, "arange.start_out": 1, "mul.Tensor": 4,
                                 "_scaled_dot_product_fused_attention_overrideable": 1}
    assert r["voids"] == {
        "mean.dim": {"the Python kernel ran aten::abs, which a replay would not run": 1},
        "amax": {"a Triton launch not made through FastKernel (autotuned, or an unwrapped JITFunction)": 1},
        "prod.dim_int": {"a pointer outside the arguments' views and the call's own allocations": 1},
    }, r["voids"]
    assert r["outside_a_call"][0] is False and "no call" in r["outside_a_call"][1]


# ----------------------------------------------------- on the GPU (nvgpu) ---

needs_nvgpu = pytest.mark.skipif(nvgpu_backend() is None, reason="needs the nvgpu backend on a GPU: "
                                 "scripts/nvgpu_device_run.sh OUTDIR setup install fast")

_A = torch.ops.aten
# case -> (the aten op fronted, a call on tensors made by `make(shape, dtype)` on one device)
PROGRAM_CASES = {
    "sum last dim": ("sum.dim_IntList", lambda t: torch.sum(t((4, 37, 65)), -1)),
    "sum dims 0, 2 keepdim": ("sum.dim_IntList", lambda t: torch.sum(t((4, 37, 65)), (0, 2), keepdim=True)),
    "sum float64 of strided": ("sum.dim_IntList", lambda t: torch.sum(t((64, 33)).t(), 0, dtype=torch.float64)),
    "mean": ("mean.dim", lambda t: torch.mean(t((8, 300)), 1)),
    "amax": ("amax", lambda t: torch.amax(t((8, 300)), -1)),
    "argmax": ("argmax", lambda t: torch.argmax(t((8, 301)), 1)),
    "var": ("var.correction", lambda t: torch.var(t((16, 129)), 1)),
    "vector norm": ("linalg_vector_norm", lambda t: torch.linalg.vector_norm(t((16, 129)), dim=-1)),
    "max full": ("max", lambda t: torch.max(t((300,)))),
    "softmax": ("_softmax", lambda t: torch.softmax(t((6, 8, 77)), -1)),
    "log_softmax dim 1": ("_log_softmax", lambda t: torch.log_softmax(t((6, 8, 77)), 1)),
    "softmax backward": ("_softmax_backward_data",
                         lambda t: _A._softmax_backward_data(t((6, 77)), torch.softmax(t((6, 77)), -1), -1,
                                                             t((1,)).dtype)),
    "layer norm": ("native_layer_norm",
                   lambda t: _A.native_layer_norm(t((5, 7, 96)), [96], t((96,)), t((96,)), 1e-5)),
    "layer norm backward": ("native_layer_norm_backward", lambda t: _layer_norm_backward(t, [True, True, True])),
    "layer norm backward input only": ("native_layer_norm_backward",
                                       lambda t: _layer_norm_backward(t, [True, False, False])),
    "lstm cell": ("_thnn_fused_lstm_cell",
                  lambda t: _A._thnn_fused_lstm_cell(t((4, 64)), t((4, 64)), t((4, 16)), t((64,)), t((64,)))),
    "gru cell": ("_thnn_fused_gru_cell",
                 lambda t: _A._thnn_fused_gru_cell(t((4, 48)), t((4, 48)), t((4, 16)), t((48,)), t((48,)))),
    "tril": ("tril", lambda t: torch.tril(t((33, 40)), 1)),
    # the matmul family where nvgpu has no vendor kernel
    "dot": ("dot", lambda t: torch.dot(t((300,)), t((300,)))),
    "addmv": ("addmv", lambda t: torch.addmv(t((40,)), t((40, 33)), t((33,)), beta=0.5, alpha=2.0)),
    "addbmm": ("addbmm", lambda t: torch.addbmm(t((17, 20)), t((3, 17, 9)), t((3, 9, 20)))),
    "triu_": ("triu_", lambda t: t((33, 40)).triu_(-2)),
}


def _layer_norm_backward(t, mask):
    x, w, b = t((5, 96)), t((96,)), t((96,))
    _, mean, rstd = _A.native_layer_norm(x, [96], w, b, 1e-5)
    return _A.native_layer_norm_backward(t((5, 96)), x, [96], mean, rstd, w, b, mask)


def _outputs(result):
    return [r for r in (result if isinstance(result, (tuple, list)) else (result,))]


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_program_replays_match_the_python_launch_and_native_cuda(dtype):
    """Each program op on nvgpu, three calls per case: the first (a new key) runs the Python
    kernel and records, the second (the same values in new tensors) is replayed in C++ and
    bitwise equal to it, the third (new values) is replayed too; the first and third are close
    to native CUDA's. Every fronted op of the cases was replayed (else the reasons its keys
    were void are shown)."""
    backend = nvgpu_backend()
    C = backend._C
    before = C._fast_triton_stats()
    g = torch.Generator().manual_seed(0)
    tol = {} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}

    def run(call, device, state):
        g.set_state(state)
        out = call(lambda shape: torch.randn(shape, generator=g).to(dtype).to(device))
        return [None if o is None else o.cpu() for o in _outputs(out)]

    for case, (op, call) in PROGRAM_CASES.items():
        first_values = g.get_state()
        torch.randn(1 << 16, generator=g)
        other_values = g.get_state()
        python, replayed = run(call, "nvgpu", first_values), run(call, "nvgpu", first_values)
        newer = run(call, "nvgpu", other_values)
        native, native_newer = run(call, "cuda", first_values), run(call, "cuda", other_values)
        for i, (a, b) in enumerate(zip(python, replayed)):
            assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), (case, i)
        for i, (got, want) in enumerate(list(zip(python, native)) + list(zip(newer, native_newer))):
            if got is None or (op == "_thnn_fused_lstm_cell" and i % 3 == 2):
                continue  # (the LSTM cell's workspace layout is the backend's own)
            torch.testing.assert_close(got, want, msg=lambda m: f"{case}, output {i}: {m}", **tol)
    after = C._fast_triton_stats()
    voids = C._fast_program_voids()
    fronted_ops = {op for op, _ in PROGRAM_CASES.values() if op in after}
    # (softmax and log_softmax are nvgpu's vendor kernels: not fronted there)
    assert {"sum.dim_IntList", "amax", "native_layer_norm", "native_layer_norm_backward", "tril", "dot", "addmv",
            "addbmm"} <= fronted_ops
    for op in sorted(fronted_ops):
        replayed = after[op]["replayed"] - before.get(op, {}).get("replayed", 0)
        assert replayed >= 2, (op, after[op], voids.get(op))


# Pointwise calls that are not one dense launch (broadcast, strided, a host 0-dim operand) and
# cat, as Llama's rotary embedding and RMS norm make them: program replays.
STRIDED_CASES = {
    "mul broadcast": ("mul.Tensor", lambda t: t((2, 4, 16, 32)) * t((1, 1, 16, 32))),
    "mul by a row statistic": ("mul.Tensor", lambda t: t((2, 16, 64)) * t((2, 16, 1))),
    "neg of a slice": ("neg", lambda t: -t((2, 4, 16, 64))[..., 32:]),
    "add to a transpose": ("add.Tensor", lambda t: t((64, 33)).t() + t((33, 64))),
    "div of a transpose by a host 0-dim": ("div.Tensor", lambda t: t((8, 33)).t() / torch.tensor(3.0)),
    "cat of two": ("cat", lambda t: torch.cat([t((2, 4, 16, 32)), t((2, 4, 16, 32))], -1)),
    "cat of three along a middle dim": ("cat", lambda t: torch.cat([t((2, 3, 8)), t((2, 1, 8)), t((2, 5, 8))], 1)),
    "cat of ten (two launches)": ("cat", lambda t: torch.cat([t((4, k + 1)) for k in range(10)], 1)),
}


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_strided_pointwise_calls_replay_as_programs(dtype):
    """Each case four times with the same values on nvgpu: a pointwise op's first call of a key
    runs Python (not one dense launch), the second records its program, the others replay it;
    all four bitwise equal, and close to native CUDA's."""
    backend = nvgpu_backend()
    C = backend._C
    before = C._fast_triton_stats()
    g = torch.Generator().manual_seed(0)
    for case, (op, call) in STRIDED_CASES.items():
        state = g.get_state()

        def run(device):
            g.set_state(state)
            return call(lambda shape: torch.randn(shape, generator=g).to(dtype).to(device)).cpu()

        results = [run("nvgpu") for _ in range(4)]
        for other in results[1:]:
            assert torch.equal(other, results[0]), case
        torch.testing.assert_close(results[0], run("cuda"), msg=lambda m: f"{case}: {m}")
    after = C._fast_triton_stats()
    voids = C._fast_program_voids()
    for op in {op for op, _ in STRIDED_CASES.values()}:
        assert after[op]["replayed"] - before.get(op, {}).get("replayed", 0) >= 2, (op, after[op], voids.get(op))


@needs_nvgpu
def test_transformer_training_with_program_replays_matches_the_cpu():
    """A transformer encoder (layer norm, softmax, reductions in its loss) trained five SGD
    steps on nvgpu, its program ops replayed from C++ after the first step: the parameters
    match the CPU's. (SGD: AdamW normalises each gradient, so the attention key bias, whose
    gradient is rounding noise, moves by the learning rate either way.)"""
    backend = nvgpu_backend()
    before = backend._C._fast_triton_stats().get("native_layer_norm_backward", {}).get("replayed", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True),
                                torch.nn.LayerNorm(64))
    data, target = torch.randn(8, 16, 64), torch.randn(8, 16, 64)
    params = {}
    for device in ("cpu", "nvgpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9)
        for _ in range(5):
            opt.zero_grad()
            out = m(data.to(device))
            (out.log_softmax(-1).mean() + (out - target.to(device)).square().sum(-1).mean()).backward()
            opt.step()
        params[device] = [p.detach().cpu() for p in m.parameters()]
    for got, want in zip(params["nvgpu"], params["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)
    stats = backend._C._fast_triton_stats()
    assert stats["native_layer_norm_backward"]["replayed"] >= before + 4, backend._C._fast_program_voids()


RANDOM_CASES = {
    "native_dropout": ("native_dropout", lambda x: torch.nn.functional.dropout(x, 0.25, training=True)),
    "uniform_": ("uniform_", lambda x: x.uniform_(-1.0, 2.0)),
    "normal_": ("normal_", lambda x: x.normal_(0.5, 2.0)),
    "bernoulli_.float": ("bernoulli_.float", lambda x: x.bernoulli_(0.3)),
}


@needs_nvgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_random_replays_draw_what_the_python_kernel_draws(dtype):
    """Each random op on nvgpu, three calls after manual_seed (the first runs the Python kernel,
    the others are replayed with counters reserved again), then three more after the same seed
    (all replayed): the two runs are bitwise equal call by call, each call draws new numbers,
    and dropout keeps about 1 - p of its input, scaled by 1 / (1 - p)."""
    backend = nvgpu_backend()
    before = backend._C._fast_triton_stats()
    for case, (op, call) in RANDOM_CASES.items():
        runs = []
        for _ in range(2):
            torch.nvgpu.manual_seed(1234)
            runs.append([call(torch.ones(4097, dtype=dtype, device="nvgpu")).cpu() for _ in range(3)])
        for first, again in zip(*runs):
            assert torch.equal(first, again), case
        assert not torch.equal(runs[0][0], runs[0][1]) and not torch.equal(runs[0][1], runs[0][2]), case
    torch.nvgpu.manual_seed(0)
    dropped = torch.nn.functional.dropout(torch.ones(1 << 20, dtype=dtype, device="nvgpu"), 0.25, training=True)
    kept = dropped.float().cpu()
    assert abs((kept != 0).float().mean().item() - 0.75) < 0.005
    assert torch.all((kept == 0) | ((kept - 1 / 0.75).abs() < 1e-2))
    after = backend._C._fast_triton_stats()
    voids = backend._C._fast_program_voids()
    for op, _ in RANDOM_CASES.values():
        assert after[op]["replayed"] - before.get(op, {}).get("replayed", 0) >= 4, (op, after[op], voids.get(op))
