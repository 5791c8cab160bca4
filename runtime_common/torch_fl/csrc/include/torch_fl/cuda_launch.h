// Compiled Triton kernels launched through the CUDA driver, for the C++ replays of
// triton_launch.cpp (pointwise ops) and triton_foreach_launch.cpp (the foreach family).
// The driver is loaded on first use from libcuda.so.1, the library Triton itself launches
// through: no link-time dependency, chips that never launch compiled kernels never load it.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_fl {

// Whether the CUDA driver could be loaded; the reason when not.
bool cuda_launch_available(std::string* why_not);

// The compiled kernel's parameter sizes in bytes, in order (cuFuncGetParamInfo); false when
// the driver cannot say.
bool kernel_parameter_sizes(uintptr_t function, size_t max_parameters, std::vector<int>* sizes);

// Whether a kernel loaded for `device` can be launched now: that device is the chip's
// current one and a CUDA context is current (the Python path launches on the current
// device, and would make it so).
bool launch_context_ready(c10::DeviceIndex device);

// Launches `function` on a one-dimensional grid of `programs`; `params` point at each
// parameter's value. A failure raises, naming `op`.
void launch_compiled_kernel(const std::string& op, void* function, int64_t programs, unsigned threads,
                            unsigned shared_bytes, void* stream, void** params);

// The same on a grid of up to three dimensions.
void launch_compiled_kernel_grid(const std::string& op, void* function, const std::array<unsigned, 3>& grid,
                                 unsigned threads, unsigned shared_bytes, void* stream, void** params);

}  // namespace torch_fl
