// Streams of a driver-hook chip, as c10::Streams. Stream id 0 is the device's
// default stream; ids 1..kPoolSize are pool streams, created lazily and handed
// out round-robin (CUDA's scheme), so torch.Stream objects stay cheap. Every
// id maps to a driver stream handle created with the owning device current.
#pragma once

#include <c10/core/Stream.h>

#include <functional>
#include <string>

namespace torch_fl {

constexpr int kStreamPoolSize = 8;

// The driver's handle for a stream (created on first use).
void* native_stream(const c10::Stream& stream);

c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);  // per host thread
void set_current_stream(const c10::Stream& stream);
c10::Stream stream_from_pool(c10::DeviceIndex device);

bool query_stream(const c10::Stream& stream);
// Waits for the device's work; with TORCH_FL_SYNC_TIMEOUT set, a wait longer than that raises
// torch_fl.StreamTimeoutError (Fault::kTimeout) instead of blocking in the driver.
void synchronize_stream(const c10::Stream& stream);
void synchronize_device(c10::DeviceIndex device);
void synchronize_event(void* event);
// Waits, within TORCH_FL_SYNC_TIMEOUT (raising Fault::kTimeout past it), until no stream of
// `device` has work queued; a stream in a fault counts as idle, its work will not run. Without
// a timeout it returns at once (the driver's own calls then wait as long as they need).
void wait_device_idle(c10::DeviceIndex device);

// Called where a vendor kernel threw: vendor libraries report a launch the driver refused as
// their own error, whatever the cause. When the current stream is in a fault the spec names
// (device lost, launch failure, timeout), raises that fault (torch_fl.DeviceLostError, ...)
// with the kernel's message; otherwise returns, and the caller rethrows the kernel's error.
void raise_vendor_fault(const char* op, const c10::Error& error);
// The polling wait behind them: `query` until it stops returning not-ready (or the timeout
// passes), then `sync` for the final status; a failure raises naming `what`.
void wait_until_done(const std::function<int()>& query, const std::function<int()>& sync, const std::string& what);

// The current stream's driver handle as a vendor kernel's first argument:
// converts to whatever pointer type the vendor's stream handle is.
struct StreamArg {
  void* handle;
  static StreamArg current() { return StreamArg{native_stream(current_stream(-1))}; }
  template <class T>
  operator T*() const {
    return static_cast<T*>(handle);
  }
};

// Makes `device` the driver's current device for the scope.
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
  c10::DeviceIndex device_;
};

}  // namespace torch_fl
