#include <torch_fl/driver.h>
#include <torch_fl/host_allocator.h>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace torch_fl {

namespace {

std::mutex mutex;
std::unordered_map<void*, size_t> live;      // pointer -> block size, in use
std::multimap<size_t, void*> cached;         // free blocks by size
std::unordered_map<void*, size_t> all_blocks;  // every block the driver gave us

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
  cached.emplace(it->second, ptr);
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
  void* ptr = nullptr;
  auto it = cached.find(size);
  if (it != cached.end()) {
    ptr = it->second;
    cached.erase(it);
  } else {
    TORCH_FL_DRIVER_CHECK(driver().host_malloc(&ptr, size));
    all_blocks[ptr] = size;
  }
  live[ptr] = size;
  return c10::DataPtr(ptr, ptr, &free_pinned, c10::Device(c10::kCPU));
}

c10::DeleterFnPtr PinnedHostAllocator::raw_deleter() const { return &free_pinned; }

void PinnedHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

bool PinnedHostAllocator::is_pinned(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex);
  // A pointer into any block (a view's data_ptr) counts as pinned.
  for (const auto& [base, size] : all_blocks) {
    const char* b = static_cast<const char*>(base);
    if (ptr >= b && ptr < b + size) return true;
  }
  return false;
}

void PinnedHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [size, ptr] : cached) {
    driver().host_free(ptr);
    all_blocks.erase(ptr);
  }
  cached.clear();
}

}  // namespace torch_fl
