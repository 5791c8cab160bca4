// What the C++ replays of Triton launches share (triton_launch.cpp for the pointwise ops,
// triton_foreach_launch.cpp for the foreach family, triton_program_launch.cpp for the rest):
// the key a call is looked up by, the alignment Triton specialises pointers on, and the
// registry of the kernels put in front of aten ops.
#pragma once

#include <torch_fl/cuda_launch.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torch_fl::replay {

// Appends the raw bytes of values to a key.
struct KeyWriter {
  std::string bytes;
  template <typename T>
  void put(T value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_ints(c10::IntArrayRef values) {
    put(static_cast<int64_t>(values.size()));
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  }
};

// Triton specialises a pointer parameter on its 16-byte alignment.
inline bool aligned16(const void* pointer) { return (reinterpret_cast<uintptr_t>(pointer) & 15) == 0; }

// The one library every replaying kernel is registered through (aten, PrivateUse1), alive for
// the process as the kernels it holds.
inline torch::Library& fronting_library() {
  static auto* library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                            __LINE__);
  return *library;
}

// The kernels of one family put in front of aten ops, kept for their statistics. `Kernel` is
// a boxed c10::OperatorKernel constructed from (the op's name, its mirror op's handle).
template <typename Kernel>
class FrontedKernels {
 public:
  // The family's one registry, alive for the process (as the kernels it lists).
  static FrontedKernels& instance() {
    static auto* all = new FrontedKernels();
    return *all;
  }

  // Puts a new Kernel in front of aten `name.overload` at PrivateUse1; calls it does not
  // replay go to `mirror` ("namespace::name", the same schema, the Python kernel). `extra`:
  // further arguments of the Kernel's constructor.
  template <typename... Extra>
  void front(const std::string& name, const std::string& overload, const std::string& mirror, Extra&&... extra) {
    auto kernel = make(name, overload, mirror, std::forward<Extra>(extra)...);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kernels_.push_back(kernel.get());
    }
    fronting_library().impl(kernel_op(name, overload).c_str(),
                            torch::CppFunction::makeFromBoxedFunctor(std::move(kernel)));
  }

  // A new Kernel for aten `name.overload` that fronts nothing itself (another kernel hands it
  // calls), kept with the fronted ones and alive for the process.
  Kernel* adopt(const std::string& name, const std::string& overload, const std::string& mirror) {
    auto kernel = make(name, overload, mirror);
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_.push_back(kernel.get());
    return kernel.release();
  }

  template <typename F>
  void each(F&& visit) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Kernel* kernel : kernels_) visit(*kernel);
  }

 private:
  static std::string kernel_op(const std::string& name, const std::string& overload) {
    return overload.empty() ? name : name + "." + overload;
  }

  template <typename... Extra>
  static std::unique_ptr<Kernel> make(const std::string& name, const std::string& overload, const std::string& mirror,
                                      Extra&&... extra) {
    std::string why;
    TORCH_CHECK(cuda_launch_available(&why), "torch_fl: cannot launch Triton kernels from C++: ", why);
    auto mirror_op = c10::Dispatcher::singleton().findSchemaOrThrow(mirror.c_str(), "");
    return std::make_unique<Kernel>(kernel_op(name, overload), mirror_op, std::forward<Extra>(extra)...);
  }

  std::mutex mutex_;
  std::vector<Kernel*> kernels_;
};

}  // namespace torch_fl::replay
