#include <torch_fl/collectives.h>
#include <torch_fl/streams.h>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

namespace torch_fl {

namespace {

constexpr c10::DeviceType kChip = c10::DeviceType::PrivateUse1;

// --- the library ----------------------------------------------------------------------------

struct Library {
  std::mutex mutex;
  CollectiveDescription description;
  CollectiveApi api;
  std::vector<HookBinding> hooks;
  bool configured = false;
  bool loaded = false;
  std::string load_error;
};

Library& library() {
  static Library* lib = new Library();  // never destroyed: communicators may outlive statics
  return *lib;
}

const CollectiveDescription& desc() { return library().description; }
const CollectiveApi& api() { return library().api; }

// Folders tried for the library: the driver's (its home_env folder, else its search paths),
// then the loader's own path. A vendor ships its collective library beside its driver.
std::vector<std::string> library_folders() {
  const auto& driver = Driver::instance().description();
  if (!driver.home_env.empty()) {
    if (const char* home = std::getenv(driver.home_env.c_str()); home && *home) return {home};
  }
  return driver.search_paths;
}

void ensure_loaded() {
  Library& lib = library();
  std::lock_guard<std::mutex> lock(lib.mutex);
  if (lib.loaded) return;
  TORCH_CHECK(lib.load_error.empty(), lib.load_error);
  TORCH_CHECK(lib.configured, "this chip's spec names no collective library (distributed.library)");
  auto failed = [&](const std::string& why) {
    lib.load_error = lib.description.backend + ": cannot load the collective library: " + why;
    TORCH_CHECK(false, lib.load_error);
  };
  std::vector<void*> handles;
  for (const auto& name : lib.description.libraries) {
    void* handle = nullptr;
    std::string tried;
    for (const auto& folder : library_folders()) {
      const std::string path = folder + "/" + name;
      handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle) break;
      tried += path + ", ";
    }
    if (!handle) handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* why = ::dlerror();
      failed("'" + name + "': " + (why ? why : "not found") + " (searched " + tried + "and the loader path)");
    }
    handles.push_back(handle);
  }
  for (const auto& binding : lib.hooks) {
    void* symbol = nullptr;
    for (void* handle : handles) {
      if ((symbol = ::dlsym(handle, binding.symbol))) break;
    }
    const bool optional = std::string(binding.hook) == "all_to_all";
    if (!symbol && !optional) {
      failed(std::string("hook '") + binding.hook + "': symbol '" + binding.symbol + "' not found");
    }
    *binding.slot = symbol;
  }
  lib.loaded = true;
}

std::string error_text(int status) {
  const char* text = api().error_string ? api().error_string(status) : nullptr;
  return text ? text : "unknown error";
}

// A library call failed: the error names the backend, the rank, the op and the library's text.
[[noreturn]] void fail(int status, int rank, const std::string& what) {
  std::ostringstream message;
  message << desc().backend << " rank " << rank << ": " << what << " failed: error " << status << " ("
          << error_text(status) << ")";
  if (status == desc().status_remote_error) message << "; another rank failed or exited";
  if (status == desc().status_timeout) message << "; a peer did not join in time";
  C10_THROW_ERROR(DistBackendError, message.str());
}

int dtype_code(c10::ScalarType dtype, const char* op) {
  for (const auto& [type, code] : desc().dtypes) {
    if (type == dtype) return code;
  }
  std::ostringstream listed;
  for (const auto& [type, _] : desc().dtypes) listed << " " << c10::toString(type);
  TORCH_CHECK(false, desc().backend, ": ", op, " of ", c10::toString(dtype), " tensors: the collective library ",
              "has no ", c10::toString(dtype), " type (distributed.library.dtypes lists", listed.str(), ")");
}

int reduce_code(const c10d::ReduceOp& reduce, const char* op) {
  static const std::map<c10d::ReduceOp::RedOpType, std::string> names = {
      {c10d::ReduceOp::SUM, "sum"}, {c10d::ReduceOp::PRODUCT, "prod"}, {c10d::ReduceOp::MAX, "max"},
      {c10d::ReduceOp::MIN, "min"}, {c10d::ReduceOp::AVG, "avg"}};
  const auto name = names.find(reduce.op_);
  if (name != names.end()) {
    for (const auto& [listed, code] : desc().reduce_ops) {
      if (listed == name->second) return code;
    }
  }
  TORCH_CHECK(false, desc().backend, ": ", op, " with ReduceOp ", static_cast<int>(reduce.op_),
              (name != names.end() ? " (" + name->second + ")" : std::string()),
              ": the collective library has no such reduction (distributed.library.reduce_ops)");
}

// --- communicators ----------------------------------------------------------------------------

// One library communicator: the ranks of one backend on one device.
struct Communicator {
  void* handle = nullptr;
  c10::DeviceIndex device = 0;
  int rank = 0;
  std::atomic<bool> aborted{false};

  ~Communicator() {
    if (handle && !aborted.load()) api().comm_destroy(handle);
  }
  void abort() {
    if (handle && !aborted.exchange(true)) api().comm_abort(handle);
  }
  // The status of the communicator's queued work: success, in_progress, or its failure.
  int async_error() const {
    int status = desc().status_success;
    const int call = api().comm_get_async_error(handle, &status);
    return call == desc().status_success ? status : call;
  }
};

// --- work ---------------------------------------------------------------------------------------

class CollectiveWork : public c10d::Work {
 public:
  CollectiveWork(std::shared_ptr<Communicator> comm, c10d::OpType type, std::string op, uint64_t sequence,
                 c10::Stream stream, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
      : c10d::Work(comm->rank, type),
        comm_(std::move(comm)),
        op_(std::move(op)),
        sequence_(sequence),
        stream_(stream),
        end_(kChip),
        outputs_(std::move(outputs)),
        timeout_(timeout),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{stream.device()})) {}

  void record_end() { end_.record(stream_); }

  bool isCompleted() override {
    if (!end_.query()) return false;
    check_async_error();
    return true;
  }

  bool isSuccess() const override { return !exception_; }
  std::exception_ptr exception() const override { return exception_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  // Blocks the host until the collective completed on the device or the timeout passed (an
  // unfinished collective then aborts the communicator: its peers see an error, never a hang),
  // raises the library's error if it failed, and makes the caller's stream wait for it.
  bool wait(std::chrono::milliseconds timeout) override {
    const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    auto pause = std::chrono::microseconds(20);
    while (!end_.query()) {
      const int status = comm_->async_error();
      if (status != desc().status_success && status != desc().status_in_progress) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        comm_->abort();
        std::ostringstream message;
        message << desc().backend << " rank " << comm_->rank << ": " << op_ << " #" << sequence_
                << " did not complete within " << limit.count() << " ms; the communicator was aborted "
                << "(a peer may have stalled or exited)";
        set_exception(std::make_exception_ptr(c10::DistBackendError(
            {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message.str())));
        std::rethrow_exception(exception_);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    check_async_error();
    if (exception_) std::rethrow_exception(exception_);
    end_.block(current_stream(stream_.device_index()));
    complete_future();
    return true;
  }

  void synchronize() override { wait(kNoTimeout); }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void check_async_error() {
    if (exception_) return;
    const int status = comm_->async_error();
    if (status == desc().status_success || status == desc().status_in_progress) return;
    try {
      fail(status, comm_->rank, op_ + " #" + std::to_string(sequence_));
    } catch (...) {
      set_exception(std::current_exception());
    }
  }

  void set_exception(std::exception_ptr error) {
    exception_ = error;
    if (!future_->completed()) future_->setError(error);
  }

  void complete_future() {
    if (future_->completed()) return;
    c10::impl::VirtualGuardImpl guard(kChip);
    const auto previous = guard.exchangeStream(stream_);
    future_->markCompleted(c10::IValue(outputs_));
    guard.exchangeStream(previous);
  }

  std::shared_ptr<Communicator> comm_;
  std::string op_;
  uint64_t sequence_;
  c10::Stream stream_;
  c10::Event end_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  std::exception_ptr exception_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// --- the backend --------------------------------------------------------------------------------

class CollectiveBackend : public c10d::Backend {
 public:
  CollectiveBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout)
      : c10d::Backend(rank, size), store_(std::move(store)), timeout_(timeout) {
    ensure_loaded();
  }

  ~CollectiveBackend() override = default;

  const std::string getBackendName() const override { return desc().backend; }

  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [device, comm] : comms_) comm->abort();
  }

  void shutdown() override {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.clear();
  }

  bool supportsCoalescing() const override { return true; }

  void startCoalescing() override {
    check(api().group_start(), "group_start");
    coalescing_ = true;
    coalesced_.clear();
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    check(api().group_end(), "group_end");
    if (coalesced_.empty()) return nullptr;
    // The group ran as one unit on the last collective's stream: its work stands for all.
    auto last = coalesced_.back();
    last->record_end();
    coalesced_.clear();
    return last;
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    at::Tensor& t = single(tensors, "all_reduce");
    const int op = reduce_code(opts.reduceOp, "all_reduce");
    return run(c10d::OpType::ALLREDUCE, "all_reduce", {t}, {t}, [&](void* comm, void* stream) {
      return api().all_reduce(t.data_ptr(), t.data_ptr(), t.numel(), dtype_code(t.scalar_type(), "all_reduce"), op,
                              comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    startCoalescing();
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      c10d::AllreduceOptions single_opts;
      single_opts.reduceOp = opts.reduceOp;
      allreduce(one, single_opts);
    }
    return endCoalescing();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    at::Tensor& t = single(tensors, "broadcast");
    const int root = static_cast<int>(opts.rootRank);
    return run(c10d::OpType::BROADCAST, "broadcast", {t}, {t}, [&](void* comm, void* stream) {
      return api().broadcast(t.data_ptr(), t.data_ptr(), t.numel(), dtype_code(t.scalar_type(), "broadcast"), root,
                             comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    at::Tensor& t = single(tensors, "reduce");
    const int op = reduce_code(opts.reduceOp, "reduce");
    const int root = static_cast<int>(opts.rootRank);
    return run(c10d::OpType::REDUCE, "reduce", {t}, {t}, [&](void* comm, void* stream) {
      return api().reduce(t.data_ptr(), t.data_ptr(), t.numel(), dtype_code(t.scalar_type(), "reduce"), op, root,
                          comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check_dense(input, "all_gather");
    check_dense(output, "all_gather");
    TORCH_CHECK(output.numel() == input.numel() * getSize(), desc().backend, ": all_gather: the output holds ",
                output.numel(), " elements, expected ", getSize(), " x ", input.numel());
    return run(c10d::OpType::_ALLGATHER_BASE, "all_gather", {input}, {output}, [&](void* comm, void* stream) {
      return api().all_gather(input.data_ptr(), output.data_ptr(), input.numel(),
                              dtype_code(input.scalar_type(), "all_gather"), comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    at::Tensor& input = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()), desc().backend,
                ": all_gather needs one list of ", getSize(), " output tensors");
    // Gathered into one buffer, then copied out in the collective's stream order.
    at::Tensor flat = at::empty({getSize() * input.numel()}, input.options());
    auto work = _allgather_base(flat, input, opts);
    c10::impl::VirtualGuardImpl guard(kChip);
    const auto previous = guard.exchangeStream(comm_stream(input.device().index()));
    for (int r = 0; r < getSize(); ++r) {
      outputs[0][r].copy_(flat.narrow(0, r * input.numel(), input.numel()).view_as(outputs[0][r]));
    }
    guard.exchangeStream(previous);
    return work;
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    check_dense(input, "reduce_scatter");
    check_dense(output, "reduce_scatter");
    TORCH_CHECK(input.numel() == output.numel() * getSize(), desc().backend, ": reduce_scatter: the input holds ",
                input.numel(), " elements, expected ", getSize(), " x ", output.numel());
    const int op = reduce_code(opts.reduceOp, "reduce_scatter");
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", {input}, {output},
               [&](void* comm, void* stream) {
                 return api().reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                             dtype_code(input.scalar_type(), "reduce_scatter"), op, comm, stream);
               });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions&) override {
    check_dense(input, "all_to_all");
    check_dense(output, "all_to_all");
    TORCH_CHECK(output_splits.empty() && input_splits.empty(), desc().backend,
                ": all_to_all with uneven splits is not supported yet; pass equal splits");
    TORCH_CHECK(input.numel() % getSize() == 0 && output.numel() == input.numel(), desc().backend,
                ": all_to_all needs input and output of equal size, divisible by the ", getSize(), " ranks");
    const size_t count = input.numel() / getSize();
    const int dtype = dtype_code(input.scalar_type(), "all_to_all");
    return run(c10d::OpType::ALLTOALL_BASE, "all_to_all", {input}, {output}, [&](void* comm, void* stream) {
      if (api().all_to_all) return api().all_to_all(input.data_ptr(), output.data_ptr(), count, dtype, comm, stream);
      // No all_to_all in the library (NCCL): a send and a receive per peer, in one group.
      const size_t bytes = count * input.element_size();
      int status = api().group_start();
      for (int peer = 0; peer < getSize() && status == desc().status_success; ++peer) {
        status = api().send(static_cast<const char*>(input.data_ptr()) + peer * bytes, count, dtype, peer, comm,
                            stream);
        if (status == desc().status_success) {
          status = api().recv(static_cast<char*>(output.data_ptr()) + peer * bytes, count, dtype, peer, comm,
                              stream);
        }
      }
      const int end = api().group_end();
      return status == desc().status_success ? end : status;
    });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int peer, int /*tag*/) override {
    at::Tensor& t = single(tensors, "send");
    return run(c10d::OpType::SEND, "send", {t}, {t}, [&](void* comm, void* stream) {
      return api().send(t.data_ptr(), t.numel(), dtype_code(t.scalar_type(), "send"), peer, comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int peer, int /*tag*/) override {
    at::Tensor& t = single(tensors, "recv");
    return run(c10d::OpType::RECV, "recv", {t}, {t}, [&](void* comm, void* stream) {
      return api().recv(t.data_ptr(), t.numel(), dtype_code(t.scalar_type(), "recv"), peer, comm, stream);
    });
  }

  // An all_reduce of one element on the current device, waited for (as ProcessGroupNCCL's).
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(kChip, current_device()))};
    auto work = allreduce(one, c10d::AllreduceOptions());
    work->wait();
    return work;
  }

 private:
  at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
    TORCH_CHECK(tensors.size() == 1, desc().backend, ": ", op, " takes one tensor per process (got ",
                tensors.size(), ")");
    check_dense(tensors[0], op);
    return tensors[0];
  }

  void check_dense(const at::Tensor& t, const char* op) {
    TORCH_CHECK(t.device().type() == kChip, desc().backend, ": ", op, " of a tensor on ", t.device(),
                ": this backend moves the chip's tensors only");
    TORCH_CHECK(t.is_non_overlapping_and_dense(), desc().backend, ": ", op,
                " needs a dense tensor (call .contiguous() first)");
  }

  void check(int status, const char* what) {
    if (status != desc().status_success) fail(status, getRank(), what);
  }

  c10::Stream comm_stream(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(device);
    if (it == streams_.end()) it = streams_.emplace(device, stream_from_pool(device)).first;
    return it->second;
  }

  // The device's communicator, made at its first collective: rank 0 asks the library for an
  // id and the store carries it to the others.
  std::shared_ptr<Communicator> communicator(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = comms_.find(device);
    if (it != comms_.end()) return it->second;
    std::vector<uint8_t> id(desc().unique_id_bytes);
    const std::string key = "torch_fl/" + desc().backend + "/comm/" + std::to_string(device) + "/" +
                            std::to_string(comm_count_++);
    if (getRank() == 0) {
      check(api().get_unique_id(id.data()), "get_unique_id");
      store_->set(key, id);
    } else {
      store_->wait({key}, timeout_);
      id = store_->get(key);
      TORCH_CHECK(id.size() == desc().unique_id_bytes, desc().backend, ": the communicator id from the store has ",
                  id.size(), " bytes, expected ", desc().unique_id_bytes);
    }
    auto comm = std::make_shared<Communicator>();
    comm->device = device;
    comm->rank = getRank();
    {
      DeviceScope scope(device);
      check(api().comm_init_rank(&comm->handle, getSize(), id.data(), getRank()), "comm_init_rank");
    }
    comms_.emplace(device, comm);
    return comm;
  }

  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* op, std::vector<at::Tensor> inputs,
                                     std::vector<at::Tensor> outputs, Launch launch) {
    const c10::DeviceIndex device = inputs[0].device().index();
    for (const auto& t : outputs) {
      TORCH_CHECK(t.device() == inputs[0].device(), desc().backend, ": ", op, ": tensors on ", inputs[0].device(),
                  " and ", t.device());
    }
    auto comm = communicator(device);
    TORCH_CHECK(!comm->aborted.load(), desc().backend, " rank ", getRank(), ": ", op,
                " on an aborted communicator (an earlier collective failed or timed out)");
    const c10::Stream caller = current_stream(device);
    const c10::Stream stream = comm_stream(device);
    // The collective's stream waits for the caller's: the inputs are ready there.
    c10::Event ready(kChip);
    ready.record(caller);
    ready.block(stream);
    // Memory the collective uses is not reused until its stream is done with it.
    c10::impl::VirtualGuardImpl guard(kChip);
    for (const auto* list : {&inputs, &outputs}) {
      for (const auto& t : *list) guard.recordDataPtrOnStream(t.storage().data_ptr(), stream);
    }
    const uint64_t sequence = ++sequence_;
    int status;
    {
      DeviceScope scope(device);
      status = launch(comm->handle, native_stream(stream));
    }
    if (status != desc().status_success) fail(status, getRank(), std::string(op) + " #" + std::to_string(sequence));
    auto work = c10::make_intrusive<CollectiveWork>(comm, type, op, sequence, stream, std::move(outputs), timeout_);
    if (coalescing_) {
      coalesced_.push_back(work);
    } else {
      work->record_end();
    }
    return work;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::map<c10::DeviceIndex, std::shared_ptr<Communicator>> comms_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;
  uint64_t comm_count_ = 0;
  uint64_t sequence_ = 0;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<CollectiveWork>> coalesced_;
};

}  // namespace

CollectiveApi& mutable_collective_api() { return library().api; }

void configure_collectives(CollectiveDescription description, std::vector<HookBinding> hooks) {
  Library& lib = library();
  std::lock_guard<std::mutex> lock(lib.mutex);
  lib.description = std::move(description);
  lib.hooks = std::move(hooks);
  lib.configured = true;
}

bool collectives_configured() { return library().configured; }

c10::intrusive_ptr<c10d::Backend> create_collective_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            std::chrono::milliseconds timeout) {
  return c10::make_intrusive<CollectiveBackend>(store, rank, size, timeout);
}

}  // namespace torch_fl
