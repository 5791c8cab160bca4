// Streams of a driver-hook chip, as c10::Streams. Stream id 0 is the device's
// default stream; ids 1..kPoolSize are pool streams, created lazily and handed
// out round-robin (CUDA's scheme), so torch.Stream objects stay cheap. Every
// id maps to a driver stream handle created with the owning device current.
#pragma once

#include <c10/core/Stream.h>

namespace torch_fl {

constexpr int kStreamPoolSize = 8;

// The driver's handle for a stream (created on first use).
void* native_stream(const c10::Stream& stream);

c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);  // per host thread
void set_current_stream(const c10::Stream& stream);
c10::Stream stream_from_pool(c10::DeviceIndex device);

bool query_stream(const c10::Stream& stream);
void synchronize_stream(const c10::Stream& stream);

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
