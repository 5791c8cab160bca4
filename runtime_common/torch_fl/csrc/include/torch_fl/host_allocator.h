// Pinned (page-locked) host memory from the driver's host_malloc hook, cached
// by size so pin_memory() in a DataLoader loop does not call the driver each
// batch. Backs tensor.pin_memory() and is_pinned() for the chip.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_fl {

class PinnedHostAllocator final : public c10::Allocator {
 public:
  static PinnedHostAllocator& instance();

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool is_pinned(const void* ptr) const;
  // An asynchronous copy on `native_stream` uses the block holding `ptr`: the block is
  // not handed out again before the copy has finished.
  void record_copy(const void* ptr, void* native_stream);
  void empty_cache();

 private:
  PinnedHostAllocator() = default;
};

}  // namespace torch_fl
