#include <torch_fl/driver.h>
#include <torch_fl/streams.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace torch_fl {

namespace {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

struct DeviceStreams {
  std::once_flag created[kStreamPoolSize + 1];
  void* handles[kStreamPoolSize + 1] = {};
  std::atomic<uint32_t> next_pool_index{0};
};

// Indexed by device; sized once, on first use, from the truthful device count.
std::vector<DeviceStreams>& all_streams() {
  static std::vector<DeviceStreams>* streams = [] {
    return new std::vector<DeviceStreams>(std::max<int>(1, device_count()));
  }();  // never destroyed: worker threads may still reference handles at exit
  return *streams;
}

DeviceStreams& streams_of(c10::DeviceIndex device) {
  auto& streams = all_streams();
  TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < streams.size(), "invalid ",
              Driver::instance().description().chip, " device index ", static_cast<int>(device),
              " (this process sees ", streams.size(), " device(s))");
  return streams[device];
}

thread_local std::vector<c10::StreamId> tls_current_streams;

}  // namespace

DeviceScope::DeviceScope(c10::DeviceIndex device) : previous_(current_device()), device_(device) {
  if (device_ != previous_) set_current_device(device_);
}

DeviceScope::~DeviceScope() {
  if (device_ != previous_) driver().set_device(previous_);
}

void* native_stream(const c10::Stream& stream) {
  const auto device = stream.device_index();
  auto& streams = streams_of(device);
  const auto id = stream.id();
  TORCH_CHECK(id >= 0 && id <= kStreamPoolSize, "invalid stream id ", id);
  std::call_once(streams.created[id], [&] {
    DeviceScope scope(device);
    TORCH_FL_DRIVER_CHECK(driver().stream_create(&streams.handles[id]));
  });
  return streams.handles[id];
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device), 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  streams_of(device);  // validates the index
  if (static_cast<size_t>(device) < tls_current_streams.size()) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device), tls_current_streams[device]);
  }
  return default_stream(device);
}

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kDeviceType, "expected a ", Driver::instance().description().chip,
              " stream, got one of ", stream.device());
  const auto device = stream.device_index();
  streams_of(device);
  if (tls_current_streams.size() <= static_cast<size_t>(device)) tls_current_streams.resize(device + 1, 0);
  tls_current_streams[device] = stream.id();
}

c10::Stream stream_from_pool(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  auto& streams = streams_of(device);
  const auto index = streams.next_pool_index.fetch_add(1) % kStreamPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device), 1 + index);
}

bool query_stream(const c10::Stream& stream) {
  auto& d = Driver::instance();
  const int status = driver().stream_query(native_stream(stream));
  if (d.ok(status)) return true;
  if (status == d.description().status_not_ready) return false;
  d.fail(status, "stream_query");
}

void wait_until_done(const std::function<int()>& query, const std::function<int()>& sync, const std::string& what) {
  auto& d = Driver::instance();
  const double limit = sync_timeout_seconds();
  if (limit > 0) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(limit);
    auto pause = std::chrono::microseconds(20);
    // Poll instead of blocking in the driver, which could wait forever on a stalled device.
    while (query() == d.description().status_not_ready) {
      if (Clock::now() >= deadline) {
        std::ostringstream message;
        message << d.description().chip << " " << what << " did not finish within " << limit
                << " s (TORCH_FL_SYNC_TIMEOUT); the device may be stalled. Its work is still queued: "
                << "tensors it writes are not safe to read";
        raise_fault(Fault::kTimeout, d.description().status_not_ready, message.str());
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  const int status = sync();  // done (or failed): collects the status the work left
  if (!d.ok(status)) d.fail(status, what.c_str());
}

void synchronize_stream(const c10::Stream& stream) {
  void* handle = native_stream(stream);
  std::ostringstream what;
  what << "stream " << stream.id() << " of device " << static_cast<int>(stream.device_index());
  wait_until_done([handle] { return driver().stream_query(handle); },
                  [handle] { return driver().stream_synchronize(handle); }, what.str());
}

void synchronize_device(c10::DeviceIndex device) {
  DeviceScope scope(device);
  if (sync_timeout_seconds() > 0) {  // the driver's device sync cannot time out: wait per stream
    auto& streams = streams_of(device);
    for (int id = 0; id <= kStreamPoolSize; ++id) {
      if (streams.handles[id]) {
        synchronize_stream(c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device), id));
      }
    }
  }
  TORCH_FL_DRIVER_CHECK(driver().device_synchronize());
}

void synchronize_event(void* event) {
  wait_until_done([event] { return driver().event_query(event); },
                  [event] { return driver().event_synchronize(event); }, "event");
}

void wait_device_idle(c10::DeviceIndex device) {
  if (sync_timeout_seconds() <= 0) return;
  auto& streams = streams_of(device);
  for (int id = 0; id <= kStreamPoolSize; ++id) {
    void* handle = streams.handles[id];
    if (!handle) continue;
    std::ostringstream what;
    what << "stream " << id << " of device " << static_cast<int>(device);
    const int success = Driver::instance().description().status_success;
    wait_until_done([handle] { return driver().stream_query(handle); }, [success] { return success; }, what.str());
  }
}

void raise_vendor_fault(const char* op, const c10::Error& error) {
  auto& d = Driver::instance();
  const auto& desc = d.description();
  int status = desc.status_success;
  try {
    status = driver().stream_query(native_stream(current_stream(-1)));
  } catch (const std::exception&) {
    return;  // the stream cannot be asked: the kernel's own error is the better report
  }
  if (status != desc.status_device_lost && status != desc.status_launch_failure && status != desc.status_timeout) {
    return;
  }
  const std::string what = std::string("the vendor kernel of ") + op + " (" + error.what_without_backtrace() + ")";
  d.fail(status, what.c_str());
}

}  // namespace torch_fl
