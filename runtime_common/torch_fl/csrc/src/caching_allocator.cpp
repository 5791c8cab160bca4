#include <torch_fl/caching_allocator.h>
#include <torch_fl/driver.h>
#include <torch_fl/streams.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace torch_fl {

namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;
using DeviceStats = c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;        // every block is a multiple of this
constexpr size_t kSmallSize = 1 << 20;       // requests up to 1 MiB use the small pool
constexpr size_t kSmallBuffer = 2 << 20;     // small-pool segments are 2 MiB
constexpr size_t kLargeBuffer = 20 << 20;    // medium requests get a 20 MiB segment
constexpr size_t kMinLargeAlloc = 10 << 20;  // from here segments are sized to the request
constexpr size_t kRoundLarge = 2 << 20;

size_t round_size(size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

std::string format_size(size_t bytes) {
  char text[64];
  if (bytes < 1024) {
    std::snprintf(text, sizeof(text), "%zu bytes", bytes);
  } else if (bytes < (1 << 20)) {
    std::snprintf(text, sizeof(text), "%.2f KiB", bytes / 1024.0);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
  }
  return text;
}

struct Block;

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const;
};

using BlockPool = std::set<Block*, BlockComparator>;

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;       // the stream it was allocated on
  size_t size;                // bytes, a multiple of kMinBlockSize
  size_t requested = 0;       // bytes asked for by the caller
  void* ptr;
  BlockPool* pool;
  bool small;                 // in the small pool (segments of kSmallBuffer)
  bool allocated = false;
  Block* prev = nullptr;      // neighbours within the same segment
  Block* next = nullptr;
  std::unordered_set<c10::StreamId> stream_uses;  // other streams (recordStream)
  int pending_events = 0;

  Block(c10::DeviceIndex device, c10::StreamId stream, size_t size, BlockPool* pool, bool small, void* ptr)
      : device(device), stream(stream), size(size), ptr(ptr), pool(pool), small(small) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

bool BlockComparator::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

StatTypes pool_stat_types(bool small) {
  StatTypes types = {false};
  types[static_cast<size_t>(StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
  return types;
}

void increase(StatArray& stats, const StatTypes& types, size_t amount) {
  c10::CachingAllocator::for_each_selected_stat_type(types, [&](size_t t) { stats[t].increase(amount); });
}

void decrease(StatArray& stats, const StatTypes& types, size_t amount) {
  c10::CachingAllocator::for_each_selected_stat_type(types, [&](size_t t) { stats[t].decrease(amount); });
}

}  // namespace

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  Block* malloc(size_t requested, c10::StreamId stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();
    const size_t size = round_size(requested);
    const bool small = size <= kSmallSize;
    BlockPool& pool = small ? small_blocks_ : large_blocks_;

    Block* block = find_free_block(pool, stream, size);
    if (!block) block = allocate_segment(pool, stream, size, requested);
    if (!block) {
      // The driver is out of memory: give back what the cache holds and try again.
      stats_.num_alloc_retries += 1;
      synchronize_and_free_events();
      release_cached_blocks();
      block = allocate_segment(pool, stream, size, requested);
    }
    if (!block) raise_out_of_memory(requested);

    if (should_split(block, size)) {
      auto* remaining = new Block(device_, stream, block->size - size, &pool, small,
                                  static_cast<char*>(block->ptr) + size);
      remaining->prev = block;
      remaining->next = block->next;
      if (remaining->next) remaining->next->prev = remaining;
      block->next = remaining;
      block->size = size;
      pool.insert(remaining);
    }
    const auto types = pool_stat_types(small);
    block->allocated = true;
    block->requested = requested;
    increase(stats_.allocation, types, 1);
    increase(stats_.allocated_bytes, types, block->size);
    increase(stats_.active, types, 1);
    increase(stats_.active_bytes, types, block->size);
    increase(stats_.requested_bytes, types, requested);
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_INTERNAL_ASSERT(block->allocated, "torch_fl allocator: double free");
    block->allocated = false;
    const auto types = pool_stat_types(block->small);
    decrease(stats_.allocation, types, 1);
    decrease(stats_.allocated_bytes, types, block->size);
    decrease(stats_.requested_bytes, types, block->requested);
    if (!block->stream_uses.empty()) {
      insert_events(block);  // reuse waits until every stream that used it is done
    } else {
      free_block(block);
    }
  }

  void record_stream(Block* block, c10::StreamId stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream != block->stream) block->stream_uses.insert(stream);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    // The driver's free waits for the device's queued work: with a sync timeout set, that wait
    // is bounded first (torch_fl.StreamTimeoutError on a stalled device, its cache kept).
    wait_device_idle(device_);
    synchronize_and_free_events();
    release_cached_blocks();
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();  // blocks whose streams have finished with them are no longer active
    return stats_;
  }

  void set_fraction(double fraction) {
    std::lock_guard<std::mutex> lock(mutex_);
    fraction_ = fraction;
    total_bytes_ = 0;  // asked of the driver on the next allocation
  }

  double fraction() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fraction_;
  }

  // Every segment: its blocks walked from the segment's first block (prev == nullptr). The
  // cached blocks are in the pools, the allocated ones (`allocated`, this device's live blocks)
  // in the allocator's pointer map.
  void snapshot(const std::vector<Block*>& allocated, std::vector<CachingDeviceAllocator::SegmentInfo>& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::set<Block*> firsts;
    for (BlockPool* pool : {&small_blocks_, &large_blocks_}) {
      for (Block* block : *pool) firsts.insert(first_of(block));
    }
    for (Block* block : allocated) firsts.insert(first_of(block));
    for (Block* first : firsts) {
      CachingDeviceAllocator::SegmentInfo segment{device_, first->stream, reinterpret_cast<size_t>(first->ptr), 0, 0,
                                                  first->small, {}};
      for (Block* block = first; block; block = block->next) {
        segment.total_size += block->size;
        if (block->allocated) segment.allocated_size += block->size;
        segment.blocks.push_back({reinterpret_cast<size_t>(block->ptr), block->size,
                                  block->allocated ? block->requested : 0, block->allocated});
      }
      out.push_back(std::move(segment));
    }
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* array : all_stat_arrays()) {
      for (auto& stat : *array) stat.reset_accumulated();
    }
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* array : all_stat_arrays()) {
      for (auto& stat : *array) stat.reset_peak();
    }
  }

 private:
  std::vector<StatArray*> all_stat_arrays() {
    return {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
            &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
            &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  static Block* first_of(Block* block) {
    while (block->prev) block = block->prev;
    return block;
  }

  size_t reserved() const {
    return static_cast<size_t>(stats_.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
  }

  size_t allowed_bytes() {
    if (total_bytes_ == 0) {
      size_t free_bytes = 0;
      DeviceScope scope(device_);
      if (!Driver::instance().ok(driver().mem_get_info(&free_bytes, &total_bytes_))) total_bytes_ = 0;
    }
    return static_cast<size_t>(fraction_ * static_cast<double>(total_bytes_));
  }

  static bool should_split(const Block* block, size_t size) {
    const size_t remaining = block->size - size;
    return block->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  }

  Block* find_free_block(BlockPool& pool, c10::StreamId stream, size_t size) {
    Block key(device_, stream, size, &pool, false, nullptr);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    if (block->is_split()) {
      const auto types = pool_stat_types(&pool == &small_blocks_);
      decrease(stats_.inactive_split, types, 1);
      decrease(stats_.inactive_split_bytes, types, block->size);
    }
    return block;
  }

  Block* allocate_segment(BlockPool& pool, c10::StreamId stream, size_t size, size_t requested) {
    const size_t bytes = segment_size(size);
    if (fraction_ < 1.0 && reserved() + bytes > allowed_bytes()) return nullptr;  // over the fraction: OOM
    void* ptr = nullptr;
    auto& d = Driver::instance();
    int status;
    {
      DeviceScope scope(device_);
      status = driver().malloc(&ptr, bytes);
    }
    if (status == d.description().status_out_of_memory) return nullptr;
    if (!d.ok(status)) d.fail(status, "malloc");
    stats_.num_device_alloc += 1;
    const auto types = pool_stat_types(&pool == &small_blocks_);
    increase(stats_.segment, types, 1);
    increase(stats_.reserved_bytes, types, bytes);
    (void)requested;
    return new Block(device_, stream, bytes, &pool, &pool == &small_blocks_, ptr);
  }

  void free_block(Block* block) {
    BlockPool& pool = *block->pool;
    const auto types = pool_stat_types(&pool == &small_blocks_);
    const size_t original_size = block->size;
    // Coalesce with free neighbours of the same segment.
    for (Block* neighbour : {block->prev, block->next}) {
      if (!neighbour || neighbour->allocated || neighbour->pending_events > 0) continue;
      pool.erase(neighbour);
      decrease(stats_.inactive_split, types, 1);
      decrease(stats_.inactive_split_bytes, types, neighbour->size);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = neighbour->next;
        if (block->next) block->next->prev = block;
      }
      block->size += neighbour->size;
      delete neighbour;
    }
    block->stream_uses.clear();
    pool.insert(block);
    decrease(stats_.active, types, 1);
    decrease(stats_.active_bytes, types, original_size);
    if (block->is_split()) {
      increase(stats_.inactive_split, types, 1);
      increase(stats_.inactive_split_bytes, types, block->size);
    }
  }

  // Runs from tensor deleters: it must not throw. A driver that cannot record the events
  // (a device in error) gets the block back at once, with a warning.
  void insert_events(Block* block) {
    try {
      DeviceScope scope(device_);
      for (c10::StreamId stream_id : block->stream_uses) {
        c10::Stream stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device_), stream_id);
        void* event = nullptr;
        TORCH_FL_DRIVER_CHECK(driver().event_create(&event));
        const int status = driver().event_record(event, native_stream(stream));
        if (!Driver::instance().ok(status)) {
          driver().event_destroy(event);
          Driver::instance().fail(status, "event_record");
        }
        block->pending_events += 1;
        pending_.push_back({event, block});
      }
    } catch (const std::exception& error) {
      TORCH_WARN("torch_fl allocator: could not order the reuse of a freed block after its other streams (",
                 error.what(), "); the block is reused without waiting for them");
    }
    block->stream_uses.clear();
    if (block->pending_events == 0) free_block(block);
  }

  // Returns blocks whose recorded events have completed to their pools. Never throws: an event
  // the driver reports in error (a failed kernel, a lost device) is over too, and the stream's
  // fault is raised where the stream is waited on, not at an unrelated allocation.
  void process_events() {
    auto& d = Driver::instance();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (driver().event_query(it->first) == d.description().status_not_ready) {
        ++it;
        continue;
      }
      finish_event(it->first, it->second);
      it = pending_.erase(it);
    }
  }

  // Each event leaves the list as it completes: a wait that raises (a timeout, a fault) leaves
  // the list holding exactly the events still outstanding.
  void synchronize_and_free_events() {
    stats_.num_sync_all_streams += 1;
    while (!pending_.empty()) {
      auto [event, block] = pending_.front();
      synchronize_event(event);
      finish_event(event, block);
      pending_.erase(pending_.begin());
    }
  }

  void finish_event(void* event, Block* block) {
    driver().event_destroy(event);
    if (--block->pending_events == 0) free_block(block);
  }

  // Frees every cached segment that is entirely unused.
  void release_cached_blocks() {
    bool failed = false;
    int first_failure = 0;
    for (BlockPool* pool : {&small_blocks_, &large_blocks_}) {
      const auto types = pool_stat_types(pool == &small_blocks_);
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->is_split()) {
          ++it;
          continue;
        }
        int status;
        {
          DeviceScope scope(device_);
          status = driver().free(block->ptr);
        }
        // The segment leaves the books either way (a lost device takes its memory with it);
        // the first failure is raised once every segment has been handed back.
        if (!Driver::instance().ok(status) && !failed) {
          failed = true;
          first_failure = status;
        }
        stats_.num_device_free += 1;
        decrease(stats_.segment, types, 1);
        decrease(stats_.reserved_bytes, types, block->size);
        it = pool->erase(it);
        delete block;
      }
    }
    if (failed) Driver::instance().fail(first_failure, "free (releasing cached memory)");
  }

  [[noreturn]] void raise_out_of_memory(size_t requested) {
    stats_.num_ooms += 1;
    size_t free_bytes = 0, total_bytes = 0;
    {
      DeviceScope scope(device_);
      driver().mem_get_info(&free_bytes, &total_bytes);
    }
    const auto& agg = [this](const StatArray& a) {
      return static_cast<size_t>(a[static_cast<size_t>(StatType::AGGREGATE)].current);
    };
    const size_t allocated = agg(stats_.allocated_bytes);
    const size_t reserved = agg(stats_.reserved_bytes);
    std::string chip = Driver::instance().description().chip;
    std::transform(chip.begin(), chip.end(), chip.begin(), ::toupper);
    TORCH_CHECK_WITH(OutOfMemoryError, false, chip, " out of memory. Tried to allocate ", format_size(requested),
                     ". Device ", static_cast<int>(device_), " has a total capacity of ", format_size(total_bytes),
                     " of which ", format_size(free_bytes), " is free. Of the memory in use, ",
                     format_size(allocated), " is allocated by PyTorch, and ",
                     format_size(reserved > allocated ? reserved - allocated : 0),
                     " is reserved by PyTorch but unallocated (the cache was emptied and the allocation retried).",
                     fraction_ < 1.0 ? " This process may reserve only " + std::to_string(fraction_) +
                                           " of the device's memory (set_per_process_memory_fraction)."
                                     : std::string());
  }

  c10::DeviceIndex device_;
  std::mutex mutex_;
  BlockPool small_blocks_;
  BlockPool large_blocks_;
  std::vector<std::pair<void*, Block*>> pending_;
  DeviceStats stats_;
  double fraction_ = 1.0;
  size_t total_bytes_ = 0;
};

namespace {

// DataPtr deleter. Its context is the pointer itself (c10's raw_allocate
// requires that), so the owning block is looked up, as in CUDA's allocator.
void free_device_ptr(void* ptr);

std::mutex live_mutex;
std::unordered_map<void*, Block*> live_blocks;

Block* take_live_block(void* ptr) {
  std::lock_guard<std::mutex> lock(live_mutex);
  auto it = live_blocks.find(ptr);
  TORCH_CHECK(it != live_blocks.end(), "torch_fl allocator: pointer was not allocated here (or freed twice)");
  Block* block = it->second;
  live_blocks.erase(it);
  return block;
}

}  // namespace

CachingDeviceAllocator& CachingDeviceAllocator::instance() {
  static CachingDeviceAllocator* allocator = new CachingDeviceAllocator();  // lives until exit
  return *allocator;
}

DeviceCache& CachingDeviceAllocator::cache(c10::DeviceIndex device) {
  std::call_once(init_once_, [this] {
    const int count = device_count();
    for (int i = 0; i < count; ++i) caches_.push_back(std::make_unique<DeviceCache>(i));
  });
  TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < caches_.size(), "invalid ",
              Driver::instance().description().chip, " device index ", static_cast<int>(device));
  return *caches_[device];
}

bool CachingDeviceAllocator::initialized() { return Driver::instance().loaded() && !caches_.empty(); }

c10::DataPtr CachingDeviceAllocator::allocate(size_t nbytes) {
  const auto device = current_device();
  const c10::Device where(c10::DeviceType::PrivateUse1, device);
  void* ptr = raw_alloc(nbytes);
  return c10::DataPtr(ptr, ptr, &free_device_ptr, where);
}

c10::DeleterFnPtr CachingDeviceAllocator::raw_deleter() const { return &free_device_ptr; }

void CachingDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  if (count == 0) return;
  TORCH_FL_DRIVER_CHECK(
      driver().memcpy(dest, src, count, Driver::instance().description().memcpy_device_to_device));
}

// Every device's cache is emptied even when one device fails (lost, stalled); the first
// failure is raised afterwards.
void CachingDeviceAllocator::emptyCache(c10::MempoolId_t) {
  if (!initialized()) return;
  std::exception_ptr first_failure;
  for (auto& cache : caches_) {
    try {
      cache->empty_cache();
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void CachingDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  if (!ptr.get() || ptr.get_deleter() != &free_device_ptr) return;  // not from this allocator
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    auto it = live_blocks.find(ptr.get_context());
    if (it == live_blocks.end()) return;
    block = it->second;
  }
  cache(block->device).record_stream(block, stream.id());
}

c10::CachingDeviceAllocator::DeviceStats CachingDeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  return cache(device).stats();
}

void CachingDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) { cache(device).reset_accumulated(); }

void CachingDeviceAllocator::resetPeakStats(c10::DeviceIndex device) { cache(device).reset_peak(); }

std::pair<size_t, size_t> CachingDeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  DeviceScope scope(device);
  size_t free_bytes = 0, total_bytes = 0;
  TORCH_FL_DRIVER_CHECK(driver().mem_get_info(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

void* CachingDeviceAllocator::raw_alloc(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const auto device = current_device();
  Block* block = cache(device).malloc(nbytes, current_stream(device).id());
  std::lock_guard<std::mutex> lock(live_mutex);
  live_blocks[block->ptr] = block;
  return block->ptr;
}

void CachingDeviceAllocator::raw_free(void* ptr) { free_device_ptr(ptr); }

c10::DeviceIndex CachingDeviceAllocator::device_of(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    auto it = live_blocks.find(ptr);
    if (it != live_blocks.end()) return it->second->device;
  }
  return current_device();
}

void CachingDeviceAllocator::set_memory_fraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "invalid fraction ", fraction, ": it must be between 0 and 1");
  cache(device).set_fraction(fraction);
}

double CachingDeviceAllocator::memory_fraction(c10::DeviceIndex device) { return cache(device).fraction(); }

std::vector<CachingDeviceAllocator::SegmentInfo> CachingDeviceAllocator::snapshot() {
  std::vector<SegmentInfo> segments;
  if (!initialized()) return segments;
  // Held throughout: a live block cannot be freed (and merged away) while its segment is walked.
  // No other path takes a device cache's mutex and then this one, so the order cannot deadlock.
  std::lock_guard<std::mutex> lock(live_mutex);
  std::vector<std::vector<Block*>> allocated(caches_.size());
  for (const auto& [ptr, block] : live_blocks) allocated[block->device].push_back(block);
  for (size_t device = 0; device < caches_.size(); ++device) caches_[device]->snapshot(allocated[device], segments);
  return segments;
}

void CachingDeviceAllocator::free_block(void* block_ptr) {
  auto* block = static_cast<Block*>(block_ptr);
  cache(block->device).free(block);
}

namespace {

void free_device_ptr(void* ptr) {
  if (ptr) CachingDeviceAllocator::instance().free_block(take_live_block(ptr));
}

}  // namespace

}  // namespace torch_fl
