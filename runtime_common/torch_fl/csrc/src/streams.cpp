#include <torch_fl/driver.h>
#include <torch_fl/streams.h>

#include <array>
#include <atomic>
#include <mutex>
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

void synchronize_stream(const c10::Stream& stream) {
  TORCH_FL_DRIVER_CHECK(driver().stream_synchronize(native_stream(stream)));
}

}  // namespace torch_fl
