#include <torch_fl/driver.h>
#include <torch_fl/rng.h>

#include <deque>
#include <mutex>

namespace torch_fl {

DeviceGenerator::DeviceGenerator(c10::DeviceIndex device, uint64_t seed) : at::CPUGeneratorImpl(seed) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, device);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

DeviceGenerator* DeviceGenerator::clone_impl() const {
  auto* copy = new DeviceGenerator(device_.index());
  copy->set_state(*get_state());
  copy->philox_offset_ = philox_offset_;
  return copy;
}

void DeviceGenerator::set_current_seed(uint64_t seed) {
  at::CPUGeneratorImpl::set_current_seed(seed);
  philox_offset_ = 0;
}

void DeviceGenerator::set_state(const c10::TensorImpl& new_state) {
  const uint64_t offset = philox_offset_;   // whatever the CPU generator's set_state calls
  at::CPUGeneratorImpl::set_state(new_state);
  philox_offset_ = offset;
}

std::pair<uint64_t, uint64_t> DeviceGenerator::philox_engine_inputs(uint64_t increment) {
  // Offsets stay multiples of 4: one Philox call yields 4 numbers (CUDA's convention).
  const uint64_t offset = philox_offset_;
  philox_offset_ += (increment + 3) / 4 * 4;
  return {current_seed(), offset};
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::deque<at::Generator>* generators = new std::deque<at::Generator>();  // lives until exit
  std::lock_guard<std::mutex> lock(mutex);
  if (generators->empty()) {
    const int count = device_count();
    for (int i = 0; i < count; ++i) generators->push_back(at::make_generator<DeviceGenerator>(i));
  }
  if (device < 0) device = current_device();
  TORCH_CHECK(static_cast<size_t>(device) < generators->size(), "invalid ",
              Driver::instance().description().chip, " device index ", static_cast<int>(device));
  return (*generators)[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  return at::make_generator<DeviceGenerator>(device);
}

}  // namespace torch_fl
