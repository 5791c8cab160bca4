#include <torch_fl/driver.h>
#include <torch_fl/rng.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstring>
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
  return copy;
}

void DeviceGenerator::set_current_seed(uint64_t seed) {
  at::CPUGeneratorImpl::set_current_seed(seed);
  philox_offset_ = 0;
}

int64_t host_state_bytes() {
  static const int64_t bytes = at::CPUGeneratorImpl().get_state()->numel();
  return bytes;
}

c10::intrusive_ptr<c10::TensorImpl> DeviceGenerator::get_state() const {
  // The host generator's state, then the Philox offset: both streams the chip draws from, so
  // that `Generator.get_state`/`set_state` (and torch.<chip>.get_rng_state) restore both.
  const auto host = at::CPUGeneratorImpl::get_state();
  const int64_t bytes = host->numel();
  at::Tensor state = at::empty({bytes + static_cast<int64_t>(sizeof(philox_offset_))}, at::kByte);
  auto* out = state.data_ptr<uint8_t>();
  std::memcpy(out, host->data(), bytes);
  std::memcpy(out + bytes, &philox_offset_, sizeof(philox_offset_));
  return state.getIntrusivePtr();
}

void DeviceGenerator::set_state(const c10::TensorImpl& new_state) {
  // get_state's bytes (host state and offset), or a host generator's alone (the offset stays).
  const int64_t bytes = host_state_bytes();
  const int64_t given = new_state.numel();
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  (given == bytes || given == bytes + static_cast<int64_t>(sizeof(philox_offset_))),
              "RNG state of a ", Driver::instance().description().chip, " generator: expected a ByteTensor of ",
              bytes + static_cast<int64_t>(sizeof(philox_offset_)), " bytes (its get_state's) or ", bytes,
              " (a CPU generator's), got ", new_state.dtype().name(), " of ", given);
  const uint64_t offset = philox_offset_;   // whatever the CPU generator's set_state calls
  if (given == bytes) {
    at::CPUGeneratorImpl::set_state(new_state);
    philox_offset_ = offset;
    return;
  }
  const auto* data = static_cast<const uint8_t*>(new_state.data());
  at::Tensor host = at::empty({bytes}, at::kByte);
  std::memcpy(host.data_ptr<uint8_t>(), data, bytes);
  at::CPUGeneratorImpl::set_state(*host.unsafeGetTensorImpl());
  std::memcpy(&philox_offset_, data + bytes, sizeof(philox_offset_));
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
