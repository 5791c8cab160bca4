// The chip's default random generator. Two sources of numbers share one seed:
// - the CPU generator's state (mt19937 + normal cache), so vendor kernels can draw with ATen's CPU
//   sampling code and a seeded chip draws exactly what a seeded CPU draws. get_state() begins
//   with that state, in the CPU layout (the vendor's contract: lend those bytes to a CPU
//   generator and write its state back with set_state);
// - a Philox counter offset, as CUDA's generator keeps, for kernels that draw on the chip itself
//   (the Triton random family), keyed by the same seed: each call reserves `increment` counters
//   and advances the offset (get_offset / set_offset), so calls never reuse numbers. Reseeding
//   restarts it. get_state() ends with it (8 bytes), so `Generator.get_state`/`set_state` and
//   the device module's get_rng_state / set_rng_state restore both streams; set_state with the
//   CPU layout alone leaves it (a vendor kernel writing its CPU state back must not rewind it).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <utility>

namespace torch_fl {

class DeviceGenerator final : public at::CPUGeneratorImpl {
 public:
  explicit DeviceGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  std::shared_ptr<DeviceGenerator> clone() const;

  void set_current_seed(uint64_t seed) override;
  // State: the host (CPU) generator's bytes followed by the 8-byte Philox offset.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  void set_offset(uint64_t offset) override { philox_offset_ = offset; }
  uint64_t get_offset() const override { return philox_offset_; }

  // (seed, offset) for a kernel drawing `increment` Philox counters; advances the offset. The
  // caller holds the generator's mutex.
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);

 private:
  DeviceGenerator* clone_impl() const override;
  uint64_t philox_offset_ = 0;
};

// Bytes of a CPU generator's state: the first part of a DeviceGenerator's.
int64_t host_state_bytes();

// One default generator per device, created on first use.
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace torch_fl
