#include <torch_fl/driver.h>
#include <torch_fl/driver_mux.h>
#include <torch_fl/fallback.h>

#include <dlfcn.h>
#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <sys/stat.h>

namespace torch_fl {

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::ostringstream out;
  for (size_t i = 0; i < items.size(); ++i) out << (i ? sep : "") << items[i];
  return out.str();
}

// "MAJOR.MINOR" of a driver_version code (the patch level, below minor_scale, is left out).
std::string decode_version(int code, const torch_fl::DriverDescription& d) {
  std::ostringstream out;
  out << code / d.version_major_scale << "." << (code % d.version_major_scale) / d.version_minor_scale;
  return out.str();
}

}  // namespace

Driver& Driver::instance() {
  static Driver* driver = new Driver();  // never destroyed: hooks may run at exit
  return *driver;
}

void Driver::configure(DriverDescription description, std::vector<HookBinding> hooks) {
  description_ = std::move(description);
  hooks_ = std::move(hooks);
}

void Driver::configure_composite(DriverDescription description, std::function<DriverApi()> load) {
  description_ = std::move(description);
  composite_load_ = std::move(load);
}

namespace {
// Made on first use: the generated driver.cpp fills it during static initialisation, which may
// run before this file's.
std::vector<Driver*>& members_of_composite() {
  static auto* members = new std::vector<Driver*>();
  return *members;
}
}  // namespace

const std::vector<Driver*>& member_drivers() { return members_of_composite(); }

void configure_composite_driver(DriverDescription composite, std::vector<CompositeMember> members) {
  for (auto& member : members) {
    auto* driver = new Driver();  // never destroyed, as the process's own
    driver->configure(std::move(member.description), member.bind_hooks(driver->mutable_api()));
    members_of_composite().push_back(driver);
  }
  const int version_code = composite.built_version_code;
  Driver::instance().configure_composite(std::move(composite), [version_code] {
    std::vector<MuxMember> loaded;
    for (Driver* member : members_of_composite()) {
      member->ensure_loaded();  // its error names the member's chip and spec
      int devices = 0;
      const int status = member->mutable_api().device_count(&devices);
      if (!member->ok(status) || devices < 0) devices = 0;  // a member without devices serves none
      loaded.push_back(MuxMember{&member->api(), &member->description(), devices});
    }
    return configure_driver_mux(std::move(loaded), version_code);
  });
}

bool Driver::try_load() noexcept {
  try {
    ensure_loaded();
    return true;
  } catch (...) {
    return false;
  }
}

void Driver::mark_forked() { instance().forked_ = true; }

void Driver::raise_bad_fork() const {
  TORCH_CHECK(false, "Cannot re-initialize ", description_.chip, " in forked subprocess: the parent used the chip ",
              "before fork(), and its driver's threads and streams do not exist in the child. To use ",
              description_.chip, " with multiprocessing, use the 'spawn' start method ",
              "(multiprocessing.set_start_method('spawn'), DataLoader(multiprocessing_context='spawn'))");
}

std::vector<std::string> Driver::library_folders() const {
  std::vector<std::string> folders;
  if (!description_.home_env.empty()) {
    if (const char* home = std::getenv(description_.home_env.c_str()); home && *home) {
      folders.push_back(std::string(home) + "/lib");
      folders.push_back(home);
    }
  }
  folders.insert(folders.end(), description_.search_paths.begin(), description_.search_paths.end());
  return folders;
}

void* open_library(const std::string& library, const std::vector<std::string>& folders, std::string* opened) {
  std::string target = library;  // not in the folders: the dynamic loader searches (LD_LIBRARY_PATH, ldconfig)
  for (const auto& folder : folders) {
    if (file_exists(folder + "/" + library)) {
      target = folder + "/" + library;
      break;
    }
  }
  if (opened) *opened = target;
  return ::dlopen(target.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

void Driver::ensure_loaded() {
  if (C10_UNLIKELY(forked_)) raise_bad_fork();
  if (loaded_) return;
  std::lock_guard<std::mutex> lock(load_mutex_);  // per driver: a composite loads its members inside
  if (loaded_) return;
  if (!load_error_.empty()) TORCH_CHECK(false, load_error_);
  TORCH_CHECK(!hooks_.empty() || composite_load_, "torch_fl: no driver was configured for this backend");
  const DriverDescription& description = description_;
  const std::vector<HookBinding>& hooks = hooks_;
  const std::string where = " (chip '" + description.chip + "', spec " + description.spec + ")";
  auto failed = [&](const std::string& message) {
    load_error_ = message + where;
    TORCH_CHECK(false, load_error_);
  };

  if (composite_load_) {
    try {
      api_ = composite_load_();
    } catch (const c10::Error& error) {
      failed(std::string("a member chip's driver cannot be used: ") + error.what_without_backtrace());
    }
  }
  const std::vector<std::string> folders = library_folders();
  for (const auto& library : description.libraries) {
    std::string target;
    void* handle = open_library(library, folders, &target);
    if (!handle) {
      const char* why = ::dlerror();
      failed("cannot load driver library '" + library + "': " + (why ? why : "unknown dlopen error") +
             "; searched " + (folders.empty() ? std::string("the loader path") : join(folders, ", ") + " and the loader path") +
             (description.home_env.empty() ? "" : "; set " + description.home_env + " to the SDK folder"));
    }
    handles_.push_back(handle);
    library_paths_.push_back(target);
  }

  for (const auto& binding : hooks) {
    void* symbol = nullptr;
    std::string tried;
    for (size_t i = 0; i < handles_.size() && !symbol; ++i) {
      ::dlerror();
      symbol = ::dlsym(handles_[i], binding.symbol);
    }
    if (!symbol) {
      const char* why = ::dlerror();
      failed(std::string("driver hook '") + binding.hook + "': symbol '" + binding.symbol +
             "' not found in " + join(library_paths_, ", ") + ": " + (why ? why : "undefined symbol"));
    }
    *binding.slot = symbol;
  }

  int version = 0;
  int status = api_.driver_version(&version);
  if (status != description.status_success) {
    failed("driver_version hook failed with status " + std::to_string(status) + " (" + error_text(status) + ")");
  }
  runtime_version_code_ = version;
  if (decode_version(version, description) != decode_version(description.built_version_code, description)) {
    failed("driver version mismatch: the loaded driver (" + join(library_paths_, ", ") + ") reports version " +
           decode_version(version, description) + ", but this backend was built for driver " + description.built_version +
           "; install the package built for it: " + description.distribution + "==" +
           description.generator_version + "+driver" + decode_version(version, description) +
           " (or point " + (description.home_env.empty() ? std::string("the loader") : description.home_env) +
           " at a driver " + description.built_version + " installation)");
  }
  try {
    verify_required_kernels();  // a `require: vendor` kernel missing from the library
  } catch (const c10::Error& error) {
    failed(error.what_without_backtrace());
  }
  // A child forked from here on inherits a loaded driver without its threads.
  pthread_atfork(nullptr, nullptr, &Driver::mark_forked);
  loaded_ = true;
}

const DriverApi& Driver::api() {
  if (C10_UNLIKELY(!loaded_ || forked_)) ensure_loaded();
  return api_;
}

std::string Driver::error_text(int status) const {
  const char* text = api_.error_string ? api_.error_string(status) : nullptr;
  return text ? text : "unknown error";
}

void Driver::fail(int status, const char* what) const {
  const std::string message = description_.chip + " driver error " + std::to_string(status) + " (" +
                              error_text(status) + ") in " + what;
  if (status == description_.status_launch_failure) {
    raise_fault(Fault::kLaunchFailure, status, message + ": a kernel failed on the device");
  }
  if (status == description_.status_device_lost) {
    raise_fault(Fault::kDeviceLost, status, message + ": the device is lost; tensors on it are gone");
  }
  if (status == description_.status_timeout) raise_fault(Fault::kTimeout, status, message);
  TORCH_CHECK(false, message);
}

namespace {
std::atomic<FaultThrower> fault_thrower{nullptr};
}  // namespace

void set_fault_thrower(FaultThrower thrower) { fault_thrower.store(thrower); }

void raise_fault(Fault fault, int status, const std::string& message) {
  if (FaultThrower thrower = fault_thrower.load()) thrower(fault, status, message);  // does not return
  TORCH_CHECK(false, message);
}

double sync_timeout_seconds() {
  static const double seconds = [] {
    const char* text = std::getenv("TORCH_FL_SYNC_TIMEOUT");
    if (!text || !*text) return 0.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    TORCH_CHECK(end != text && *end == '\0' && value >= 0, "TORCH_FL_SYNC_TIMEOUT must be a number of seconds, got '",
                text, "'");
    return value;
  }();
  return seconds;
}

namespace {

// A device call failed: when the driver sees no device at all, say so (as torch.cuda's "No CUDA
// GPUs are available") rather than the device call's own error; otherwise report that error.
[[noreturn]] void fail_device_call(int status, const char* what) {
  auto& d = Driver::instance();
  int count = 0;
  const int count_status = d.mutable_api().device_count(&count);
  if (!d.ok(count_status) || count <= 0) {
    TORCH_CHECK(false, "no ", d.description().chip, " device is available: the driver reports ",
                d.ok(count_status) ? std::string("0 devices") : d.error_text(count_status),
                " (", d.description().chip, " driver error ", status, " (", d.error_text(status), ") in ", what,
                "); check that the device is present and visible to this process");
  }
  d.fail(status, what);
}

}  // namespace

c10::DeviceIndex current_device() {
  int device = 0;
  const int status = driver().get_device(&device);
  if (C10_UNLIKELY(!Driver::instance().ok(status))) fail_device_call(status, "get_device");
  return static_cast<c10::DeviceIndex>(device);
}

void set_current_device(c10::DeviceIndex device) {
  const int status = driver().set_device(device);
  if (C10_UNLIKELY(!Driver::instance().ok(status))) fail_device_call(status, "set_device");
}

c10::DeviceIndex device_count() noexcept {
  auto& d = Driver::instance();
  if (!d.try_load()) return 0;
  int count = 0;
  if (!d.ok(d.mutable_api().device_count(&count))) return 0;
  return static_cast<c10::DeviceIndex>(count);
}

}  // namespace torch_fl
