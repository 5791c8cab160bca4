#include <torch_fl/driver.h>
#include <torch_fl/host_allocator.h>
#include <torch_fl/streams.h>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch_fl {

namespace {

std::mutex mutex;
std::unordered_map<void*, size_t> live;      // pointer -> block size, in use
std::multimap<size_t, void*> cached;         // free blocks by size
std::unordered_map<void*, size_t> all_blocks;  // every block the driver gave us
// Events recorded after asynchronous copies that read or write a block: a freed block
// returns to `cached` only when they have completed (as torch.cuda's host allocator),
// or `x.pin_memory().to(dev, non_blocking=True)` on a temporary could be overwritten.
std::unordered_map<void*, std::vector<void*>> block_events;
std::vector<std::pair<void*, size_t>> freed_in_flight;  // freed blocks with copies pending
at::HostStats stats;  // torch's host allocator statistics, kept under `mutex`

void* block_of(const void* ptr) {
  for (const auto& [base, size] : all_blocks) {
    const char* b = static_cast<const char*>(base);
    if (ptr >= b && ptr < b + size) return base;
  }
  return nullptr;
}

// Drops completed events; true when none of the block's copies is pending any more.
bool copies_done(void* block) {
  auto it = block_events.find(block);
  if (it == block_events.end()) return true;
  auto& d = Driver::instance();
  auto& events = it->second;
  for (auto e = events.begin(); e != events.end();) {
    const int status = driver().event_query(*e);
    if (status == d.description().status_not_ready) {
      ++e;
      continue;
    }
    if (!d.ok(status)) d.fail(status, "event_query");
    TORCH_FL_DRIVER_CHECK(driver().event_destroy(*e));
    e = events.erase(e);
  }
  if (!events.empty()) return false;
  block_events.erase(it);
  return true;
}

void reclaim_finished_blocks() {
  for (auto it = freed_in_flight.begin(); it != freed_in_flight.end();) {
    if (copies_done(it->first)) {
      cached.emplace(it->second, it->first);
      it = freed_in_flight.erase(it);
    } else {
      ++it;
    }
  }
}

size_t round_up(size_t n) {
  size_t size = 512;
  while (size < n) size <<= 1;  // powers of two: few size classes, good reuse
  return size;
}

void free_pinned(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = live.find(ptr);
  TORCH_INTERNAL_ASSERT(it != live.end(), "pinned host allocator: unknown pointer");
  if (copies_done(ptr)) {
    cached.emplace(it->second, ptr);
  } else {
    freed_in_flight.emplace_back(ptr, it->second);
  }
  stats.active_requests.decrease(1);
  stats.active_bytes.decrease(it->second);
  live.erase(it);
}

}  // namespace

PinnedHostAllocator& PinnedHostAllocator::instance() {
  static PinnedHostAllocator* allocator = new PinnedHostAllocator();
  return *allocator;
}

c10::DataPtr PinnedHostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU));
  const size_t size = round_up(nbytes);
  std::lock_guard<std::mutex> lock(mutex);
  reclaim_finished_blocks();
  void* ptr = nullptr;
  auto it = cached.find(size);
  if (it != cached.end()) {
    ptr = it->second;
    cached.erase(it);
  } else {
    TORCH_FL_DRIVER_CHECK(driver().host_malloc(&ptr, size));
    all_blocks[ptr] = size;
    stats.num_host_alloc += 1;
    stats.allocations.increase(1);
    stats.allocated_bytes.increase(size);
  }
  live[ptr] = size;
  stats.active_requests.increase(1);
  stats.active_bytes.increase(size);
  return c10::DataPtr(ptr, ptr, &free_pinned, c10::Device(c10::kCPU));
}

c10::DeleterFnPtr PinnedHostAllocator::raw_deleter() const { return &free_pinned; }

void PinnedHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

bool PinnedHostAllocator::is_pinned(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex);
  return block_of(ptr) != nullptr;  // a pointer into any block (a view's data_ptr) counts
}

void PinnedHostAllocator::record_copy(const void* ptr, void* native_stream) {
  std::lock_guard<std::mutex> lock(mutex);
  void* block = block_of(ptr);
  if (!block) return;
  void* event = nullptr;
  TORCH_FL_DRIVER_CHECK(driver().event_create(&event));
  TORCH_FL_DRIVER_CHECK(driver().event_record(event, native_stream));
  block_events[block].push_back(event);
}

void PinnedHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  if (all_blocks.empty()) return;  // nothing was ever pinned: no driver to ask
  reclaim_finished_blocks();
  for (auto& [size, ptr] : cached) {
    driver().host_free(ptr);
    all_blocks.erase(ptr);
    stats.num_host_free += 1;
    stats.allocations.decrease(1);
    stats.allocated_bytes.decrease(size);
  }
  cached.clear();
}

bool PinnedHostAllocator::record_event(void* ptr, void* /*ctx*/, c10::Stream stream) {
  if (!is_pinned(ptr)) return false;
  record_copy(ptr, native_stream(stream));
  return true;
}

at::HostStats PinnedHostAllocator::get_stats() {
  std::lock_guard<std::mutex> lock(mutex);
  return stats;
}

void PinnedHostAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto* stat : {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes}) {
    stat->reset_accumulated();
  }
  stats.num_host_alloc = 0;
  stats.num_host_free = 0;
}

void PinnedHostAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto* stat : {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes}) {
    stat->reset_peak();
  }
}

}  // namespace torch_fl
