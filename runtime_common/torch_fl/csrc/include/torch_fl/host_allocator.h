// Pinned (page-locked) host memory from the driver's host_malloc hook, cached
// by size so pin_memory() in a DataLoader loop does not call the driver each
// batch. Backs tensor.pin_memory() and is_pinned() for the chip, and is torch's host
// allocator for PrivateUse1 (torch.accelerator.empty_host_cache, host memory stats).
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/Allocator.h>

namespace torch_fl {

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  static PinnedHostAllocator& instance();

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool is_pinned(const void* ptr) const;
  // An asynchronous copy on `native_stream` uses the block holding `ptr`: the block is
  // not handed out again before the copy has finished.
  void record_copy(const void* ptr, void* native_stream);
  void empty_cache() override;

  // at::HostAllocator
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;

 private:
  PinnedHostAllocator() = default;
};

}  // namespace torch_fl
