#include <torch_fl/caching_allocator.h>
#include <torch_fl/core_ops.h>
#include <torch_fl/driver.h>
#include <torch_fl/rng.h>
#include <torch_fl/hooks.h>
#include <torch_fl/host_allocator.h>

namespace torch_fl {

void PrivateUse1Hooks::init() const { Driver::instance().ensure_loaded(); }

bool PrivateUse1Hooks::isAvailable() const { return device_count() > 0; }

bool PrivateUse1Hooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return Driver::instance().loaded() && device_index >= 0 && device_index < device_count();
}

c10::DeviceIndex PrivateUse1Hooks::deviceCount() const { return device_count(); }

void PrivateUse1Hooks::setCurrentDevice(c10::DeviceIndex device) const { set_current_device(device); }

c10::DeviceIndex PrivateUse1Hooks::getCurrentDevice() const { return current_device(); }

c10::DeviceIndex PrivateUse1Hooks::exchangeDevice(c10::DeviceIndex device) const {
  const auto previous = current_device();
  if (device != previous) set_current_device(device);
  return previous;
}

c10::DeviceIndex PrivateUse1Hooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  return exchangeDevice(device);
}

bool PrivateUse1Hooks::isPinnedPtr(const void* data) const {
  return Driver::instance().loaded() && PinnedHostAllocator::instance().is_pinned(data);
}

at::Allocator* PrivateUse1Hooks::getPinnedMemoryAllocator() const {
  Driver::instance().ensure_loaded();
  return &PinnedHostAllocator::instance();
}

at::Device PrivateUse1Hooks::getDeviceFromPtr(void* data) const {
  return at::Device(c10::DeviceType::PrivateUse1, CachingDeviceAllocator::instance().device_of(data));
}

const at::Generator& PrivateUse1Hooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return default_generator(device_index);
}

at::Generator PrivateUse1Hooks::getNewGenerator(c10::DeviceIndex device_index) const {
  return new_generator(device_index);
}

void PrivateUse1Hooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  resize_storage_bytes(storage, new_bytes);
}

}  // namespace torch_fl
