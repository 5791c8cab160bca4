#include <torch_fl/cuda_launch.h>

#include <torch_fl/driver.h>

#include <c10/util/Exception.h>

#include <dlfcn.h>

namespace torch_fl {

namespace {

// The CUDA driver entry points a replay needs.
struct CudaDriver {
  using LaunchKernel = int (*)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                               unsigned block_y, unsigned block_z, unsigned shared_bytes, void* stream,
                               void** params, void** extra);
  using GetErrorString = int (*)(int status, const char** text);
  using CtxGetCurrent = int (*)(void** context);
  using FuncGetParamInfo = int (*)(void* function, size_t index, size_t* offset, size_t* bytes);
  LaunchKernel launch_kernel = nullptr;
  GetErrorString get_error_string = nullptr;
  CtxGetCurrent ctx_get_current = nullptr;
  FuncGetParamInfo func_get_param_info = nullptr;  // CUDA 12.4+: a kernel's parameter sizes
  std::string load_error;
};

const CudaDriver& cuda_driver() {
  static const CudaDriver* driver = [] {
    auto* d = new CudaDriver();
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      d->load_error = std::string("cannot load libcuda.so.1: ") + (why ? why : "unknown error");
      return d;
    }
    d->launch_kernel = reinterpret_cast<CudaDriver::LaunchKernel>(dlsym(library, "cuLaunchKernel"));
    d->get_error_string = reinterpret_cast<CudaDriver::GetErrorString>(dlsym(library, "cuGetErrorString"));
    d->ctx_get_current = reinterpret_cast<CudaDriver::CtxGetCurrent>(dlsym(library, "cuCtxGetCurrent"));
    d->func_get_param_info = reinterpret_cast<CudaDriver::FuncGetParamInfo>(dlsym(library, "cuFuncGetParamInfo"));
    if (!d->launch_kernel || !d->get_error_string || !d->ctx_get_current || !d->func_get_param_info) {
      d->load_error =
          "libcuda.so.1 lacks cuLaunchKernel, cuGetErrorString, cuCtxGetCurrent or cuFuncGetParamInfo (CUDA 12.4+)";
      d->launch_kernel = nullptr;
    }
    return d;
  }();
  return *driver;
}

}  // namespace

bool cuda_launch_available(std::string* why_not) {
  const CudaDriver& driver = cuda_driver();
  if (driver.launch_kernel == nullptr && why_not != nullptr) *why_not = driver.load_error;
  return driver.launch_kernel != nullptr;
}

bool kernel_parameter_sizes(uintptr_t function, size_t max_parameters, std::vector<int>* sizes) {
  const CudaDriver& driver = cuda_driver();
  if (driver.launch_kernel == nullptr) return false;
  sizes->clear();
  for (size_t index = 0;; ++index) {
    size_t offset = 0;
    size_t bytes = 0;
    if (driver.func_get_param_info(reinterpret_cast<void*>(function), index, &offset, &bytes) != 0) return true;
    if (index >= max_parameters) return false;
    sizes->push_back(static_cast<int>(bytes));
  }
}

bool launch_context_ready(c10::DeviceIndex device) {
  void* context = nullptr;
  return current_device() == device && cuda_driver().ctx_get_current(&context) == 0 && context != nullptr;
}

void launch_compiled_kernel(const std::string& op, void* function, int64_t programs, unsigned threads,
                            unsigned shared_bytes, void* stream, void** params) {
  launch_compiled_kernel_grid(op, function, {static_cast<unsigned>(programs), 1, 1}, threads, shared_bytes, stream,
                              params);
}

void launch_compiled_kernel_grid(const std::string& op, void* function, const std::array<unsigned, 3>& grid,
                                 unsigned threads, unsigned shared_bytes, void* stream, void** params) {
  const CudaDriver& driver = cuda_driver();
  const int status = driver.launch_kernel(function, grid[0], grid[1], grid[2], threads, 1, 1, shared_bytes, stream,
                                          params, nullptr);
  if (status == 0) return;
  const char* text = nullptr;
  driver.get_error_string(status, &text);
  TORCH_CHECK(false, "torch_fl: launching the Triton kernel of aten::", op, " from C++ failed: ",
              text ? text : "unknown error", " (CUDA error ", status, "; TORCH_FL_TRITON_CPP_LAUNCH=0 launches from Python)");
}

}  // namespace torch_fl
