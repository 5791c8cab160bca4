// Triton kernels launched from C++ (compile mode on a CUDA chip, e.g. `nvgpu`): the
// pointwise ops (triton_launch.cpp) and the foreach family (triton_foreach_launch.cpp).
//
// An op on the `triton` step is a Python kernel: each call crosses into Python, prepares
// its operands and launches the compiled kernel, 25-35 us of host time where torch.cuda
// spends 6-7 us (docs/benchmarks.md). For the pointwise ops this file puts a C++ kernel
// in front at the chip's dispatch key. It keys each call on what the Python preparation
// depends on (the argument types, dtypes, layouts and scalar values; see `call_key`) and,
// for a key it has seen, replays the launch the Python kernel made for it: the output
// allocated as then, the compiled kernel (its CUfunction) launched through the CUDA
// driver with the call's own data pointers and element count. A key not seen yet goes to
// the Python kernel (registered under a mirror op, `fast_ops` below), which records its
// launch for the key when it was a single dense launch (torch_fl/_triton_route.py).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

namespace torch_fl {

// Where a recorded launch argument comes from at replay.
enum class LaunchArgSource : int64_t {
  kStackTensor = 0,  // the data pointer of the call's argument `value`
  kOut = 1,          // the data pointer of the output
  kNumel = 2,        // the output's element count
  kConstant = 3,     // `value` itself (a scalar of the call, fixed by its key)
};

struct LaunchArg {
  LaunchArgSource source;
  int64_t value;
  int bytes;  // the kernel parameter's size: 1, 2, 4 or 8
};

// Puts the C++ kernel in front of aten `name.overload` at PrivateUse1; calls it cannot
// replay go to `mirror` (a "namespace::name" op with the same schema, whose PrivateUse1
// kernel is the Python one). With a `strided_mirror` (the same Python kernel, recording for a
// program replay), a key whose call was not one dense launch (broadcast or strided operands)
// goes to a program replay of the op (`program_replay`) rather than to Python every time.
void register_fast_triton_op(const std::string& name, const std::string& overload, const std::string& mirror,
                             const std::string& strided_mirror = "");

// Called by the Python kernel during a call the C++ kernel sent it: its launch, to be
// replayed for calls with the same key. Returns false when no such call is in progress
// on this thread or the launch cannot be replayed (the reason in `why_not`).
bool record_triton_launch(const at::Tensor& out, bool inplace, uintptr_t function, int64_t threads,
                          int64_t shared_bytes, int64_t elements_per_program, const std::vector<LaunchArg>& args,
                          std::string* why_not);

// Called by the Python kernel of a pointwise call the C++ kernel sent it when it made no single
// dense launch (broadcast or strided operands), which its key decides: with a program replay,
// the key's later calls go to it.
void mark_triton_call_strided();

// The foreach family (triton_foreach_launch.cpp): a C++ kernel in front of aten `name.overload`
// replays the one table launch (torch_fl/triton_ops/_foreach.py) its Python kernel made for a
// call with the same key, building the table for the call's own tensors.
void register_fast_foreach_op(const std::string& name, const std::string& overload, const std::string& mirror);

// Called by the Python kernel of a foreach call the C++ kernel sent it: its table launch.
// `rows` is the table on the host (int64, one row of kForeachRowFields per chunk of
// `chunk` elements of a tensor: output, four operand fields, start, end, unused);
// `params` the kernel's parameters, the first the table's pointer (its source kOut), the
// others constants. What each row field is made of is worked out from the call's
// arguments when the call returns; a launch it cannot be worked out for is not replayed.
constexpr int64_t kForeachRowFields = 8;
bool record_foreach_launch(uintptr_t function, int64_t threads, int64_t shared_bytes, const at::Tensor& rows,
                           int64_t chunk, const std::vector<LaunchArg>& params, std::string* why_not);

// Ops whose Python kernel allocates, makes views and launches several kernels (reductions,
// softmax and the norms, the fused RNN cells, creation; triton_program_launch.cpp): a C++
// kernel in front of aten `name.overload` replays the program its Python kernel ran for a
// call with the same key (shapes, strides, dtypes, scalars), recorded while that kernel ran.
void register_fast_program_op(const std::string& name, const std::string& overload, const std::string& mirror);

// A program replay of aten `name.overload` that fronts nothing itself: a kernel in front of the
// op hands it the calls it cannot replay; the calls the program replay cannot replay either go
// to `mirror`. Its statistics count under the op's name with the fronting kernel's.
using BoxedCall = std::function<void(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*)>;
BoxedCall program_replay(const std::string& name, const std::string& overload, const std::string& mirror);

// One parameter of a launch a recorded Python kernel made, of `bytes` bytes: a pointer (`value`
// its address), a constant (an integer, or a float's bits), or part of a reservation of Philox
// counters the call made (`value` the reservation's index; record_program_rng).
enum class ProgramParamSource : int { kPointer = 0, kConstant = 1, kSeedLow = 2, kSeedHigh = 3, kOffset = 4 };
struct ProgramLaunchParam {
  ProgramParamSource source;
  int64_t value;
  int bytes;
};

// Called when the Python kernel of a recorded call reserves `increment` Philox counters of
// `device`'s default generator (the random family): a replay reserves as many again and
// passes the seed and offset it gets where the recorded launches took these.
void record_program_rng(int64_t device, int64_t increment, uint64_t seed, uint64_t offset);

// Called for every launch the Python kernel of a recorded call makes (through FastKernel).
// Returns false when no call is recording on this thread or the launch cannot be replayed,
// which voids the call's recording (the reason in `why_not`).
bool record_program_launch(uintptr_t function, const std::array<int64_t, 3>& grid, int64_t threads,
                           int64_t shared_bytes, const std::vector<ProgramLaunchParam>& params, std::string* why_not);

// Voids the recording in progress on this thread (a launch the Python side cannot report).
void refuse_program_recording(const std::string& why);

// Per op: calls replayed in C++ and calls sent to the Python kernel.
struct FastTritonStats {
  std::string op;
  int64_t replayed;
  int64_t to_python;
  int64_t recipes;
};
std::vector<FastTritonStats> fast_triton_stats();  // every family
std::vector<FastTritonStats> fast_foreach_stats();
std::vector<FastTritonStats> fast_program_stats();
// Per program op: why its void keys were never replayed, (op, reason, keys).
std::vector<std::tuple<std::string, std::string, int64_t>> fast_program_voids();

}  // namespace torch_fl
