#include <torch_fl/driver_mux.h>

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace torch_fl {

namespace {

// An event of the composite: one member event per member it was recorded on, created lazily
// (a driver's event belongs to the device it was created on, so it is created at the first
// record on a stream of that member, with the stream's device current).
struct MuxEvent {
  std::mutex mutex;
  int member = -1;  // the member of the last record; -1: never recorded
  std::vector<void*> native;
};

struct Mux {
  std::vector<MuxMember> members;
  std::vector<int> first_device;  // per member
  int devices = 0;
  int version_code = 0;

  std::shared_mutex mutex;  // guards the three tables below
  std::map<uintptr_t, std::pair<size_t, int>> device_memory;  // base -> (bytes, member)
  std::unordered_map<void*, int> host_memory;                  // pinned block -> member
  std::unordered_map<void*, std::pair<int, int>> streams;      // native stream -> (member, local device)

  std::mutex others_mutex;
  std::vector<std::pair<int, int>> others;  // interned (member, status) for codes kMuxFirstOther + i
};

Mux* mux = nullptr;  // set once, before any hook runs; never destroyed (hooks may run at exit)

thread_local int tls_device = 0;
// The last member status translated on this thread, for error_string's text.
thread_local int tls_last_code = kMuxSuccess;
thread_local int tls_last_member = -1;
thread_local int tls_last_native = 0;
thread_local std::string tls_text;

constexpr size_t kMaxInterned = 4096;

int member_of_device(int device) {
  for (int m = static_cast<int>(mux->members.size()) - 1; m >= 0; --m) {
    if (device >= mux->first_device[m]) return device < mux->first_device[m] + mux->members[m].devices ? m : -1;
  }
  return -1;
}

const DriverApi& api(int member) { return *mux->members[member].api; }
const DriverDescription& desc(int member) { return *mux->members[member].description; }
int current_member() { return member_of_device(tls_device); }

int misuse(std::string text) {
  tls_text = std::move(text);
  tls_last_code = kMuxMisuse;
  tls_last_member = -1;
  return kMuxMisuse;
}

// A member's status as the composite's code.
int translate(int member, int status) {
  const DriverDescription& d = desc(member);
  if (status == d.status_success) return kMuxSuccess;
  int code;
  if (status == d.status_not_ready) {
    code = kMuxNotReady;
  } else if (status == d.status_out_of_memory) {
    code = kMuxOutOfMemory;
  } else if (status == d.status_launch_failure) {
    code = kMuxLaunchFailure;
  } else if (status == d.status_device_lost) {
    code = kMuxDeviceLost;
  } else if (status == d.status_timeout) {
    code = kMuxTimeout;
  } else {
    std::lock_guard<std::mutex> lock(mux->others_mutex);
    size_t i = 0;
    while (i < mux->others.size() && mux->others[i] != std::make_pair(member, status)) ++i;
    if (i == mux->others.size() && i < kMaxInterned) mux->others.emplace_back(member, status);
    code = kMuxFirstOther + static_cast<int>(std::min(i, kMaxInterned - 1));
  }
  tls_last_code = code;
  tls_last_member = member;
  tls_last_native = status;
  return code;
}

// The member owning device memory at `ptr` (inside an allocation), or -1.
int owner_of(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mux->mutex);
  auto it = mux->device_memory.upper_bound(address);
  if (it == mux->device_memory.begin()) return -1;
  --it;
  return address < it->first + it->second.first ? it->second.second : -1;
}

// The member and local device of a stream; an unknown handle goes to the current member,
// whose driver reports it.
std::pair<int, int> stream_owner(void* stream) {
  {
    std::shared_lock<std::shared_mutex> lock(mux->mutex);
    auto it = mux->streams.find(stream);
    if (it != mux->streams.end()) return it->second;
  }
  return {current_member(), mux_local_index(tls_device)};
}

int kind_for(int member, int kind) {
  const DriverDescription& d = desc(member);
  switch (kind) {
    case kMuxHostToHost: return d.memcpy_host_to_host;
    case kMuxHostToDevice: return d.memcpy_host_to_device;
    case kMuxDeviceToHost: return d.memcpy_device_to_host;
    default: return d.memcpy_device_to_device;
  }
}

// ---- the hooks ----

int hook_driver_version(int* version) {
  *version = mux->version_code;
  return kMuxSuccess;
}

const char* hook_error_string(int status) {
  static const char* const names[] = {"no error", "not ready", "out of memory", "a kernel failed",
                                      "the device is lost", "timed out"};
  if (status == kMuxMisuse && tls_last_code == kMuxMisuse) return tls_text.c_str();
  int member = -1;
  int native = 0;
  if (status == tls_last_code && tls_last_member >= 0) {
    member = tls_last_member;
    native = tls_last_native;
  } else if (status >= kMuxFirstOther) {
    std::lock_guard<std::mutex> lock(mux->others_mutex);
    const size_t i = static_cast<size_t>(status - kMuxFirstOther);
    if (i < mux->others.size()) std::tie(member, native) = mux->others[i];
  }
  if (member >= 0) {
    const char* text = api(member).error_string ? api(member).error_string(native) : nullptr;
    tls_text = desc(member).chip + " status " + std::to_string(native) + ": " + (text ? text : "unknown error");
    return tls_text.c_str();
  }
  if (status >= 0 && status < static_cast<int>(sizeof(names) / sizeof(names[0]))) return names[status];
  if (status == kMuxMisuse) return "a request no member chip can serve";
  return "unknown error";
}

int hook_device_count(int* count) {
  *count = mux->devices;
  return kMuxSuccess;
}

int hook_set_device(int device) {
  const int member = member_of_device(device);
  if (member < 0) {
    return misuse("invalid device index " + std::to_string(device) + " (the composite has " +
                  std::to_string(mux->devices) + " devices)");
  }
  const int status = translate(member, api(member).set_device(device - mux->first_device[member]));
  if (status == kMuxSuccess) tls_device = device;
  return status;
}

int hook_get_device(int* device) {
  *device = tls_device;
  return kMuxSuccess;
}

int hook_device_synchronize() {
  const int member = current_member();
  return translate(member, api(member).device_synchronize());
}

int hook_malloc(void** ptr, size_t size) {
  const int member = current_member();
  const int status = translate(member, api(member).malloc(ptr, size));
  if (status == kMuxSuccess && *ptr) {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    mux->device_memory[reinterpret_cast<uintptr_t>(*ptr)] = {size, member};
  }
  return status;
}

int hook_free(void* ptr) {
  int member = current_member();
  if (ptr) {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    auto it = mux->device_memory.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != mux->device_memory.end()) {
      member = it->second.second;
      mux->device_memory.erase(it);
    }
  }
  return translate(member, api(member).free(ptr));
}

int hook_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  const int member = current_member();
  return translate(member, api(member).mem_get_info(free_bytes, total_bytes));
}

int hook_host_malloc(void** ptr, size_t size) {
  const int member = current_member();
  const int status = translate(member, api(member).host_malloc(ptr, size));
  if (status == kMuxSuccess && *ptr) {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    mux->host_memory[*ptr] = member;
  }
  return status;
}

int hook_host_free(void* ptr) {
  int member = current_member();
  {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    auto it = mux->host_memory.find(ptr);
    if (it != mux->host_memory.end()) {
      member = it->second;
      mux->host_memory.erase(it);
    }
  }
  return translate(member, api(member).host_free(ptr));
}

// A synchronous copy, routed by the pointers' owners; between two members, through the host.
int copy_now(void* dst, const void* src, size_t count, int kind) {
  const int fallback = current_member();
  const int src_member = (kind == kMuxDeviceToHost || kind == kMuxDeviceToDevice) ? owner_of(src) : -1;
  const int dst_member = (kind == kMuxHostToDevice || kind == kMuxDeviceToDevice) ? owner_of(dst) : -1;
  if (kind == kMuxDeviceToDevice && src_member >= 0 && dst_member >= 0 && src_member != dst_member) {
    std::unique_ptr<char[]> staging(new char[count]);
    int status = translate(src_member, api(src_member).memcpy(staging.get(), src, count, kind_for(src_member, kMuxDeviceToHost)));
    if (status != kMuxSuccess) return status;
    return translate(dst_member, api(dst_member).memcpy(dst, staging.get(), count, kind_for(dst_member, kMuxHostToDevice)));
  }
  const int member = src_member >= 0 ? src_member : dst_member >= 0 ? dst_member : fallback;
  return translate(member, api(member).memcpy(dst, src, count, kind_for(member, kind)));
}

int hook_memcpy(void* dst, const void* src, size_t count, int kind) { return copy_now(dst, src, count, kind); }

int hook_memcpy_async(void* dst, const void* src, size_t count, int kind, void* stream) {
  const int member = stream_owner(stream).first;
  const int src_owner = (kind == kMuxDeviceToHost || kind == kMuxDeviceToDevice) ? owner_of(src) : -1;
  const int dst_owner = (kind == kMuxHostToDevice || kind == kMuxDeviceToDevice) ? owner_of(dst) : -1;
  const bool src_elsewhere = src_owner >= 0 && src_owner != member;
  const bool dst_elsewhere = dst_owner >= 0 && dst_owner != member;
  if (!src_elsewhere && !dst_elsewhere) {
    return translate(member, api(member).memcpy_async(dst, src, count, kind_for(member, kind), stream));
  }
  // Memory of another member: after the stream's queued work, complete on return.
  const int status = translate(member, api(member).stream_synchronize(stream));
  return status == kMuxSuccess ? copy_now(dst, src, count, kind) : status;
}

int hook_memset_async(void* dst, int value, size_t count, void* stream) {
  const int member = stream_owner(stream).first;
  return translate(member, api(member).memset_async(dst, value, count, stream));
}

int hook_stream_create(void** stream) {
  const int member = current_member();
  const int status = translate(member, api(member).stream_create(stream));
  if (status == kMuxSuccess) {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    mux->streams[*stream] = {member, mux_local_index(tls_device)};
  }
  return status;
}

int hook_stream_destroy(void* stream) {
  const int member = stream_owner(stream).first;
  {
    std::unique_lock<std::shared_mutex> lock(mux->mutex);
    mux->streams.erase(stream);
  }
  return translate(member, api(member).stream_destroy(stream));
}

int hook_stream_synchronize(void* stream) {
  const int member = stream_owner(stream).first;
  return translate(member, api(member).stream_synchronize(stream));
}

int hook_stream_query(void* stream) {
  const int member = stream_owner(stream).first;
  return translate(member, api(member).stream_query(stream));
}

int hook_event_create(void** event) {
  auto* created = new MuxEvent();
  created->native.assign(mux->members.size(), nullptr);
  *event = created;
  return kMuxSuccess;
}

int hook_event_destroy(void* event) {
  auto* destroyed = static_cast<MuxEvent*>(event);
  int status = kMuxSuccess;
  for (size_t m = 0; m < destroyed->native.size(); ++m) {
    if (destroyed->native[m]) {
      const int s = translate(static_cast<int>(m), api(static_cast<int>(m)).event_destroy(destroyed->native[m]));
      if (status == kMuxSuccess) status = s;
    }
  }
  delete destroyed;
  return status;
}

int hook_event_record(void* event, void* stream) {
  auto* recorded = static_cast<MuxEvent*>(event);
  const auto [member, local] = stream_owner(stream);
  std::lock_guard<std::mutex> lock(recorded->mutex);
  if (!recorded->native[member]) {
    // Created on the stream's device, which the member's current device may not be.
    const DriverApi& a = api(member);
    int previous = 0;
    int status = translate(member, a.get_device(&previous));
    if (status != kMuxSuccess) return status;
    if (previous != local && (status = translate(member, a.set_device(local))) != kMuxSuccess) return status;
    status = translate(member, a.event_create(&recorded->native[member]));
    if (previous != local) a.set_device(previous);
    if (status != kMuxSuccess) return status;
  }
  const int status = translate(member, api(member).event_record(recorded->native[member], stream));
  if (status == kMuxSuccess) recorded->member = member;
  return status;
}

// The member and native event of the last record, or {-1, nullptr}.
std::pair<int, void*> recorded_as(void* event) {
  auto* e = static_cast<MuxEvent*>(event);
  std::lock_guard<std::mutex> lock(e->mutex);
  return e->member < 0 ? std::pair<int, void*>{-1, nullptr} : std::pair<int, void*>{e->member, e->native[e->member]};
}

int hook_event_query(void* event) {
  const auto [member, native] = recorded_as(event);
  return member < 0 ? kMuxSuccess : translate(member, api(member).event_query(native));
}

int hook_event_synchronize(void* event) {
  const auto [member, native] = recorded_as(event);
  return member < 0 ? kMuxSuccess : translate(member, api(member).event_synchronize(native));
}

int hook_stream_wait_event(void* stream, void* event, unsigned int flags) {
  const auto [event_member, native] = recorded_as(event);
  if (event_member < 0) return kMuxSuccess;
  const int member = stream_owner(stream).first;
  if (member == event_member) return translate(member, api(member).stream_wait_event(stream, native, flags));
  // Another member's work: wait for it on the host; the stream's later work then follows it.
  return translate(event_member, api(event_member).event_synchronize(native));
}

int hook_event_elapsed_time(float* ms, void* start, void* end) {
  const auto [start_member, start_native] = recorded_as(start);
  const auto [end_member, end_native] = recorded_as(end);
  if (start_member < 0 || end_member < 0) return misuse("elapsed time needs both events recorded");
  if (start_member != end_member) {
    return misuse("elapsed time between events of two chips (" + desc(start_member).chip + " and " +
                  desc(end_member).chip + ") is not measured: each chip has its own clock");
  }
  return translate(start_member, api(start_member).event_elapsed_time(ms, start_native, end_native));
}

}  // namespace

DriverApi configure_driver_mux(std::vector<MuxMember> members, int version_code) {
  TORCH_CHECK(!mux, "torch_fl: the composite driver is configured once");
  auto* created = new Mux();
  created->members = std::move(members);
  for (const auto& member : created->members) {
    created->first_device.push_back(created->devices);
    created->devices += member.devices;
  }
  created->version_code = version_code;
  mux = created;

  DriverApi table;
  table.driver_version = &hook_driver_version;
  table.error_string = &hook_error_string;
  table.device_count = &hook_device_count;
  table.set_device = &hook_set_device;
  table.get_device = &hook_get_device;
  table.device_synchronize = &hook_device_synchronize;
  table.malloc = &hook_malloc;
  table.free = &hook_free;
  table.mem_get_info = &hook_mem_get_info;
  table.host_malloc = &hook_host_malloc;
  table.host_free = &hook_host_free;
  table.memcpy = &hook_memcpy;
  table.memcpy_async = &hook_memcpy_async;
  table.memset_async = &hook_memset_async;
  table.stream_create = &hook_stream_create;
  table.stream_destroy = &hook_stream_destroy;
  table.stream_synchronize = &hook_stream_synchronize;
  table.stream_query = &hook_stream_query;
  table.stream_wait_event = &hook_stream_wait_event;
  table.event_create = &hook_event_create;
  table.event_destroy = &hook_event_destroy;
  table.event_record = &hook_event_record;
  table.event_query = &hook_event_query;
  table.event_synchronize = &hook_event_synchronize;
  table.event_elapsed_time = &hook_event_elapsed_time;
  return table;
}

int mux_member_of(int device) { return mux ? member_of_device(device) : 0; }

int mux_local_index(int device) {
  const int member = mux ? member_of_device(device) : -1;
  return member < 0 ? device : device - mux->first_device[member];
}

int mux_member_count() { return mux ? static_cast<int>(mux->members.size()) : 1; }

int mux_first_device(int member) { return mux ? mux->first_device.at(member) : 0; }

}  // namespace torch_fl
