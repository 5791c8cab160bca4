// The caching device allocator shared by every driver-hook chip.
//
// Device memory comes from the driver's malloc hook in segments (2 MiB for
// small requests, 20 MiB for medium, rounded to 2 MiB for large) that are split
// into blocks and cached on free, per device and per stream, as in CUDA's
// caching allocator: a block freed on one stream is only reused on that stream
// unless recordStream was called, in which case reuse waits for driver events
// recorded on every stream that used it. A failed driver malloc frees the cache
// and retries once before raising torch.OutOfMemoryError with the sizes.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <memory>
#include <mutex>
#include <vector>

namespace torch_fl {

class DeviceCache;

class CachingDeviceAllocator final : public c10::DeviceAllocator {
 public:
  static CachingDeviceAllocator& instance();

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Raw allocation on the current device and stream (torch's raw_alloc API).
  void* raw_alloc(size_t nbytes);
  void raw_free(void* ptr);
  // The device owning an allocation (its base pointer); the current device otherwise.
  c10::DeviceIndex device_of(void* ptr);

  // torch.cuda.set_per_process_memory_fraction: segments beyond `fraction` of the device's
  // total memory are refused (the cache is freed and the request retried first, then OOM).
  void set_memory_fraction(double fraction, c10::DeviceIndex device);
  double memory_fraction(c10::DeviceIndex device);

  // One segment of torch.cuda.memory_snapshot()'s list, and its blocks.
  struct BlockInfo {
    size_t address, size, requested;
    bool allocated;
  };
  struct SegmentInfo {
    c10::DeviceIndex device;
    c10::StreamId stream;
    size_t address, total_size, allocated_size;
    bool small;
    std::vector<BlockInfo> blocks;
  };
  std::vector<SegmentInfo> snapshot();

  // Returns a block (internal type) to its device's cache.
  void free_block(void* block);

 private:
  CachingDeviceAllocator() = default;
  DeviceCache& cache(c10::DeviceIndex device);

  std::once_flag init_once_;
  std::vector<std::unique_ptr<DeviceCache>> caches_;
};

}  // namespace torch_fl
