// The chip's default random generator. Its state is the CPU generator's
// (mt19937 + normal cache), so vendor kernels can draw with ATen's CPU
// sampling code and a seeded chip draws exactly what a seeded CPU draws: the
// same script gives the same numbers on `cpu` and on the chip.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace torch_fl {

class DeviceGenerator final : public at::CPUGeneratorImpl {
 public:
  explicit DeviceGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  std::shared_ptr<DeviceGenerator> clone() const;

 private:
  DeviceGenerator* clone_impl() const override;
};

// One default generator per device, created on first use.
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace torch_fl
