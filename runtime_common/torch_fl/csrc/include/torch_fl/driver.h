// Driver hooks: the C entry points a chip's spec names (driver.hooks), with the
// fixed hook ABI documented in docs/spec.md. Every generated backend fills one
// DriverApi by dlsym and hands it to the shared runtime, which reaches the chip
// only through it.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_fl {

struct DriverApi {
  int (*driver_version)(int* version) = nullptr;
  const char* (*error_string)(int status) = nullptr;
  int (*device_count)(int* count) = nullptr;
  int (*set_device)(int device) = nullptr;
  int (*get_device)(int* device) = nullptr;
  int (*device_synchronize)() = nullptr;
  int (*malloc)(void** ptr, size_t size) = nullptr;
  int (*free)(void* ptr) = nullptr;
  int (*mem_get_info)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  int (*host_malloc)(void** ptr, size_t size) = nullptr;
  int (*host_free)(void* ptr) = nullptr;
  int (*memcpy)(void* dst, const void* src, size_t count, int kind) = nullptr;
  int (*memcpy_async)(void* dst, const void* src, size_t count, int kind, void* stream) = nullptr;
  int (*memset_async)(void* dst, int value, size_t count, void* stream) = nullptr;
  int (*stream_create)(void** stream) = nullptr;
  int (*stream_destroy)(void* stream) = nullptr;
  int (*stream_synchronize)(void* stream) = nullptr;
  int (*stream_query)(void* stream) = nullptr;
  int (*stream_wait_event)(void* stream, void* event, unsigned int flags) = nullptr;
  int (*event_create)(void** event) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_synchronize)(void* event) = nullptr;
  int (*event_elapsed_time)(float* ms, void* start, void* end) = nullptr;
};

// One hook to resolve: the field it fills and the symbol the spec names.
struct HookBinding {
  const char* hook;
  const char* symbol;
  void** slot;
};

// What the spec says about the chip's driver, baked into the generated backend.
struct DriverDescription {
  std::string chip;                        // device name, e.g. "npu"
  std::string spec;                        // the spec file the backend came from
  std::string distribution;                // the backend's package, e.g. "torch-fl-npu"
  std::string generator_version;           // torchfl-gen's version, part of the package version
  std::vector<std::string> libraries;      // file names, dlopen'ed in order
  std::vector<std::string> search_paths;   // folders tried before the loader's own
  std::string home_env;                    // env var naming a folder that overrides them
  std::string built_version;               // "2.1"
  int built_version_code = 0;              // the driver's encoding of it
  int version_major_scale = 1000;          // code = major*major_scale + minor*minor_scale (+ patch)
  int version_minor_scale = 10;
  int status_success = 0;
  int status_not_ready = 0;
  int status_out_of_memory = 0;
  // Statuses raised as named exceptions (torch_fl.KernelError, ...); kNoStatus where the
  // spec declares none.
  static constexpr int kNoStatus = INT_MIN;
  int status_launch_failure = kNoStatus;
  int status_device_lost = kNoStatus;
  int status_timeout = kNoStatus;
  int memcpy_host_to_host = 0;
  int memcpy_host_to_device = 1;
  int memcpy_device_to_host = 2;
  int memcpy_device_to_device = 3;
  // The native device type whose runtime the driver is (its pointers, streams and events are
  // that runtime's): copies between <chip>:N and <native>:N run device to device.
  std::optional<c10::DeviceType> shares_memory_with;
};

// The loaded driver. `load` is called once by the generated backend; every
// failure (missing library, symbol, version mismatch) becomes one error naming
// the library, the symbol, dlerror's text and the spec.
class Driver {
 public:
  static Driver& instance();

  // Called once, at static-initialisation time, by the generated backend: says
  // what to load. Nothing is opened until the chip is first used.
  void configure(DriverDescription description, std::vector<HookBinding> hooks);
  // A composite backend (several chips, docs/multichip.md): no libraries of its own; on
  // first use `load` loads the member drivers and returns the table that routes to them.
  void configure_composite(DriverDescription description, std::function<DriverApi()> load);
  bool composite() const { return static_cast<bool>(composite_load_); }
  // Folders to search for the libraries, set by the Python package from its
  // build record before first use (they are machine-specific, so not compiled in).
  void set_search_paths(std::vector<std::string> paths) { description_.search_paths = std::move(paths); }
  // Opens the libraries and resolves every hook, once. Throws c10::Error on
  // failure and keeps the message, so later calls rethrow the same text.
  void ensure_loaded();
  // Like ensure_loaded, but reports failure as false instead of throwing.
  bool try_load() noexcept;
  bool loaded() const { return loaded_; }
  // True in a process forked after the parent loaded the driver: the driver's threads and
  // streams did not survive the fork, so every use raises instead of hanging (as torch.cuda).
  bool in_bad_fork() const { return forked_; }
  const std::string& load_error() const { return load_error_; }
  // Loads on first use; throws the load error if the driver cannot be loaded.
  const DriverApi& api();
  const DriverDescription& description() const { return description_; }
  DriverApi& mutable_api() { return api_; }
  const std::vector<std::string>& loaded_library_paths() const { return library_paths_; }
  // Where the chip's libraries are looked for: <home_env>/lib and <home_env> when it is set,
  // then the spec's search paths (the collective library is searched there too).
  std::vector<std::string> library_folders() const;
  int runtime_version_code() const { return runtime_version_code_; }

  // Status helpers.
  bool ok(int status) const { return status == description_.status_success; }
  std::string error_text(int status) const;
  // Raises c10::Error "<chip> driver error <status> (<text>) in <what>".
  [[noreturn]] void fail(int status, const char* what) const;

 private:
  DriverApi api_;
  DriverDescription description_;
  std::vector<HookBinding> hooks_;
  std::function<DriverApi()> composite_load_;
  std::mutex load_mutex_;
  std::atomic<bool> loaded_{false};
  std::atomic<bool> forked_{false};
  static void mark_forked();
  [[noreturn]] void raise_bad_fork() const;
  std::string load_error_;
  std::vector<std::string> library_paths_;
  std::vector<void*> handles_;
  int runtime_version_code_ = 0;
};

inline const DriverApi& driver() { return Driver::instance().api(); }

// A member chip of a composite backend: what its spec says about its driver, and its hook
// table (symbol names into the member's own DriverApi).
struct CompositeMember {
  DriverDescription description;
  std::function<std::vector<HookBinding>(DriverApi&)> bind_hooks;
};

// Called once by a composite backend's generated driver.cpp: the process's driver becomes the
// members' drivers behind one table (torch_fl/driver_mux.h), each member loaded and checked
// against its own built version on first use.
void configure_composite_driver(DriverDescription composite, std::vector<CompositeMember> members);
// The members' drivers of a composite backend (empty for a single chip).
const std::vector<Driver*>& member_drivers();

// dlopen of `library` from the first of `folders` holding it, else through the dynamic loader's
// own search; `opened` (optional) gets the path tried. Null on failure (dlerror() says why).
void* open_library(const std::string& library, const std::vector<std::string>& folders, std::string* opened);

// The faults torch_fl names in Python (torch_fl.errors): a failure the driver reports with a
// status the spec declares, or one the runtime detects itself (a wait past its timeout).
enum class Fault { kLaunchFailure, kDeviceLost, kTimeout };

// Raises `fault` with `message`. The Python module installs a thrower that raises the named
// Python exception (a RuntimeError subclass); without one, a c10::Error is thrown.
using FaultThrower = void (*)(Fault fault, int status, const std::string& message);
void set_fault_thrower(FaultThrower thrower);
[[noreturn]] void raise_fault(Fault fault, int status, const std::string& message);

// Seconds a wait on the device may take before it raises Fault::kTimeout
// (TORCH_FL_SYNC_TIMEOUT, read once; 0 when unset: wait as long as the driver does).
double sync_timeout_seconds();

// Call a driver hook and raise a located error unless it returned success.
#define TORCH_FL_DRIVER_CHECK(call)                                       \
  do {                                                                    \
    int torch_fl_status_ = (call);                                        \
    if (C10_UNLIKELY(!::torch_fl::Driver::instance().ok(torch_fl_status_))) \
      ::torch_fl::Driver::instance().fail(torch_fl_status_, #call);       \
  } while (0)

// The chip's device index as the driver's current device.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex device);
c10::DeviceIndex device_count() noexcept;

}  // namespace torch_fl
