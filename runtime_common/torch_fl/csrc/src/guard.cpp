#include <torch_fl/caching_allocator.h>
#include <torch_fl/core_ops.h>
#include <torch_fl/driver.h>
#include <torch_fl/guard.h>
#include <torch_fl/streams.h>

namespace torch_fl {

DeviceGuardImpl::DeviceGuardImpl(c10::DeviceType type) {
  TORCH_INTERNAL_ASSERT(type == static_type);
}

c10::Device DeviceGuardImpl::exchangeDevice(c10::Device device) const {
  TORCH_INTERNAL_ASSERT(device.type() == static_type);
  const auto previous = current_device();
  if (previous != device.index()) set_current_device(device.index());
  return c10::Device(static_type, previous);
}

c10::Device DeviceGuardImpl::getDevice() const { return c10::Device(static_type, current_device()); }

void DeviceGuardImpl::setDevice(c10::Device device) const {
  TORCH_INTERNAL_ASSERT(device.type() == static_type);
  set_current_device(device.index());
}

// Every guard's destructor restores its device through here, mostly the device already
// current: asking first spares a set-device call on every op (CUDA's own guard does the same).
void DeviceGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  try {
    int current = -1;
    if (Driver::instance().ok(driver().get_device(&current)) && current == device.index()) return;
    driver().set_device(device.index());
  } catch (...) {
  }
}

c10::Stream DeviceGuardImpl::getStream(c10::Device device) const { return current_stream(device.index()); }

c10::Stream DeviceGuardImpl::getDefaultStream(c10::Device device) const {
  return default_stream(device.index());
}

c10::Stream DeviceGuardImpl::getStreamFromGlobalPool(c10::Device device, bool) const {
  return stream_from_pool(device.index());
}

c10::Stream DeviceGuardImpl::getNewStream(c10::Device device, int) const {
  return stream_from_pool(device.index());
}

c10::Stream DeviceGuardImpl::exchangeStream(c10::Stream stream) const {
  const auto previous = current_stream(stream.device_index());
  set_current_stream(stream);
  return previous;
}

void* DeviceGuardImpl::getStreamNativeHandle(const c10::Stream stream) const { return native_stream(stream); }

c10::DeviceIndex DeviceGuardImpl::deviceCount() const noexcept { return device_count(); }

void DeviceGuardImpl::destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept {
  if (!event) return;
  try {
    DeviceScope scope(device_index);
    driver().event_destroy(event);
  } catch (...) {
  }
}

void DeviceGuardImpl::record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
                             const c10::EventFlag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event device index ",
              static_cast<int>(device_index), " does not match the recording stream's device ",
              static_cast<int>(stream.device_index()));
  DeviceScope scope(stream.device_index());
  if (!*event) TORCH_FL_DRIVER_CHECK(driver().event_create(event));
  TORCH_FL_DRIVER_CHECK(driver().event_record(*event, native_stream(stream)));
}

void DeviceGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (!event) return;
  DeviceScope scope(stream.device_index());
  TORCH_FL_DRIVER_CHECK(driver().stream_wait_event(native_stream(stream), event, /*flags=*/0));
}

bool DeviceGuardImpl::queryEvent(void* event) const {
  if (!event) return true;
  auto& d = Driver::instance();
  const int status = driver().event_query(event);
  if (d.ok(status)) return true;
  if (status == d.description().status_not_ready) return false;
  d.fail(status, "event_query");
}

void DeviceGuardImpl::synchronizeEvent(void* event) const {
  if (!event) return;
  synchronize_event(event);
}

double DeviceGuardImpl::elapsedTime(void* start, void* end, const c10::DeviceIndex) const {
  TORCH_CHECK(start && end, "both events must be recorded before computing elapsed time");
  float ms = 0;
  TORCH_FL_DRIVER_CHECK(driver().event_elapsed_time(&ms, start, end));
  return static_cast<double>(ms);
}

bool DeviceGuardImpl::queryStream(const c10::Stream& stream) const { return query_stream(stream); }

void DeviceGuardImpl::synchronizeStream(const c10::Stream& stream) const { synchronize_stream(stream); }

void DeviceGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  synchronize_device(device_index);
}

void DeviceGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const {
  CachingDeviceAllocator::instance().recordStream(data_ptr, stream);
}

#if __has_include(<c10/core/DeviceCapability.h>)
c10::DeviceCapability DeviceGuardImpl::getDeviceCapability(c10::Device device) const {
  c10::DeviceCapability capability;
#define TORCH_FL_SET_DTYPE(_, name) \
  capability.capability_data.supported_scalar_types.has_##name = dtype_supported(c10::ScalarType::name, device.index());
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TORCH_FL_SET_DTYPE)
#undef TORCH_FL_SET_DTYPE
  return capability;
}
#endif

}  // namespace torch_fl
