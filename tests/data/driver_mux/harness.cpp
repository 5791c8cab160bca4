// Test harness for torch_fl/driver_mux: two vendors' drivers (simnpu and simvpu) as the members
// of a composite, their hooks resolved by name from each library; Python (ctypes) calls the
// composite's hook table that harness_configure returns. tests/runtime/test_driver_mux.py.
#include <torch_fl/driver_mux.h>

#include <dlfcn.h>

#include <string>

namespace {

torch_fl::DriverDescription describe(const char* chip) {
  torch_fl::DriverDescription d;
  d.chip = chip;
  d.status_success = 0;
  d.status_not_ready = 6;
  d.status_out_of_memory = 2;
  d.status_launch_failure = 7;
  d.status_device_lost = 8;
  d.status_timeout = 9;
  return d;
}

bool bind(void* library, const std::string& prefix, torch_fl::DriverApi& api) {
  const std::pair<const char*, void**> hooks[] = {
      {"DriverGetVersion", reinterpret_cast<void**>(&api.driver_version)},
      {"GetErrorString", reinterpret_cast<void**>(&api.error_string)},
      {"GetDeviceCount", reinterpret_cast<void**>(&api.device_count)},
      {"SetDevice", reinterpret_cast<void**>(&api.set_device)},
      {"GetDevice", reinterpret_cast<void**>(&api.get_device)},
      {"DeviceSynchronize", reinterpret_cast<void**>(&api.device_synchronize)},
      {"Malloc", reinterpret_cast<void**>(&api.malloc)},
      {"Free", reinterpret_cast<void**>(&api.free)},
      {"MemGetInfo", reinterpret_cast<void**>(&api.mem_get_info)},
      {"MallocHost", reinterpret_cast<void**>(&api.host_malloc)},
      {"FreeHost", reinterpret_cast<void**>(&api.host_free)},
      {"Memcpy", reinterpret_cast<void**>(&api.memcpy)},
      {"MemcpyAsync", reinterpret_cast<void**>(&api.memcpy_async)},
      {"MemsetAsync", reinterpret_cast<void**>(&api.memset_async)},
      {"StreamCreate", reinterpret_cast<void**>(&api.stream_create)},
      {"StreamDestroy", reinterpret_cast<void**>(&api.stream_destroy)},
      {"StreamSynchronize", reinterpret_cast<void**>(&api.stream_synchronize)},
      {"StreamQuery", reinterpret_cast<void**>(&api.stream_query)},
      {"StreamWaitEvent", reinterpret_cast<void**>(&api.stream_wait_event)},
      {"EventCreate", reinterpret_cast<void**>(&api.event_create)},
      {"EventDestroy", reinterpret_cast<void**>(&api.event_destroy)},
      {"EventRecord", reinterpret_cast<void**>(&api.event_record)},
      {"EventQuery", reinterpret_cast<void**>(&api.event_query)},
      {"EventSynchronize", reinterpret_cast<void**>(&api.event_synchronize)},
      {"EventElapsedTime", reinterpret_cast<void**>(&api.event_elapsed_time)},
  };
  for (const auto& [name, slot] : hooks) {
    *slot = ::dlsym(library, (prefix + name).c_str());
    if (!*slot) return false;
  }
  return true;
}

torch_fl::DriverApi member_apis[2];
torch_fl::DriverDescription member_descriptions[2] = {describe("npu"), describe("vpu")};
torch_fl::DriverApi composite;

}  // namespace

extern "C" const torch_fl::DriverApi* harness_configure(const char* npu_library, const char* vpu_library,
                                                         int version_code) {
  const char* libraries[2] = {npu_library, vpu_library};
  const char* prefixes[2] = {"simnpu", "simvpu"};
  std::vector<torch_fl::MuxMember> members;
  for (int m = 0; m < 2; ++m) {
    void* library = ::dlopen(libraries[m], RTLD_NOW | RTLD_LOCAL);
    if (!library || !bind(library, prefixes[m], member_apis[m])) return nullptr;
    int devices = 0;
    member_apis[m].device_count(&devices);
    members.push_back({&member_apis[m], &member_descriptions[m], devices});
  }
  composite = torch_fl::configure_driver_mux(std::move(members), version_code);
  return &composite;
}

extern "C" int harness_member_of(int device) { return torch_fl::mux_member_of(device); }
extern "C" int harness_local_index(int device) { return torch_fl::mux_local_index(device); }
