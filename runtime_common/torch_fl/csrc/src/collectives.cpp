#include <torch_fl/collectives.h>
#include <torch_fl/streams.h>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
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
  std::vector<std::string> paths;  // of the opened libraries, as the loader found them
};

Library& library() {
  static Library* lib = new Library();  // never destroyed: communicators may outlive statics
  return *lib;
}

const CollectiveDescription& desc() { return library().description; }
const CollectiveApi& api() { return library().api; }

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
  // The spec's settings for the library, before it reads them; the user's own values win.
  for (const auto& [variable, value] : lib.description.environment) ::setenv(variable.c_str(), value.c_str(), 0);
  // Searched where the chip's driver is: a vendor ships its collective library beside it.
  const std::vector<std::string> folders = Driver::instance().library_folders();
  std::vector<void*> handles;
  for (const auto& name : lib.description.libraries) {
    void* handle = open_library(name, folders, nullptr);
    if (!handle) {
      const char* why = ::dlerror();
      std::string searched;
      for (const auto& folder : folders) searched += folder + ", ";
      failed("'" + name + "': " + (why ? why : "not found") + " (searched " + searched + "and the loader path)");
    }
    handles.push_back(handle);
    const link_map* opened = nullptr;
    lib.paths.push_back(::dlinfo(handle, RTLD_DI_LINKMAP, &opened) == 0 && opened && *opened->l_name
                            ? std::string(opened->l_name) : name);
  }
  for (const auto& binding : lib.hooks) {
    void* symbol = nullptr;
    for (void* handle : handles) {
      if ((symbol = ::dlsym(handle, binding.symbol))) break;
    }
    const std::string hook = binding.hook;
    const bool optional = hook == "all_to_all" || hook == "get_last_error";
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

// A library call failed: the error names the backend, the rank, the op and the library's text
// (with its detail of the communicator's failure, where it has get_last_error).
[[noreturn]] void fail(int status, int rank, const std::string& what, void* comm = nullptr) {
  std::ostringstream message;
  message << desc().backend << " rank " << rank << ": " << what << " failed: error " << status << " ("
          << error_text(status) << ")";
  const char* detail = api().get_last_error ? api().get_last_error(comm) : nullptr;
  if (detail && *detail) message << ": " << detail;
  if (status == desc().status_remote_error) message << "; another rank failed or exited";
  if (status == desc().status_timeout) message << "; a peer did not join in time";
  C10_THROW_ERROR(DistBackendError, message.str());
}

// How a tensor's elements travel through the library: the library's type code and how many of
// its elements one tensor element is. A dtype the library has goes as itself. One it lacks still
// travels where the op only moves data: complex as pairs of its real type (ProcessGroupNCCL's
// view_as_real), anything else as bytes (NCCL has no int16). A reduction needs the library's own
// type, except complex under sum or average, which reduce element-wise as pairs of reals.
struct Wire {
  int code = 0;
  size_t per_element = 1;
};

const int* listed_code(c10::ScalarType dtype) {
  for (const auto& [type, code] : desc().dtypes) {
    if (type == dtype) return &code;
  }
  return nullptr;
}

[[noreturn]] void no_such_type(c10::ScalarType dtype, const char* op, const char* why) {
  std::ostringstream listed;
  for (const auto& [type, _] : desc().dtypes) listed << " " << c10::toString(type);
  TORCH_CHECK(false, desc().backend, ": ", op, " of ", c10::toString(dtype), " tensors: the collective library ",
              "has no ", c10::toString(dtype), " type (distributed.library.dtypes lists", listed.str(), ")", why);
}

// For collectives that move data unchanged (broadcast, gathers, scatter, all_to_all, send, recv).
Wire moved_as(c10::ScalarType dtype, const char* op) {
  if (const int* code = listed_code(dtype)) return {*code, 1};
  if (c10::isComplexType(dtype)) {
    if (const int* code = listed_code(c10::toRealValueType(dtype))) return {*code, 2};
  }
  for (auto byte : {c10::ScalarType::Byte, c10::ScalarType::Char}) {
    if (const int* code = listed_code(byte)) return {*code, c10::elementSize(dtype)};
  }
  no_such_type(dtype, op, " nor a byte type to move it as");
}

// For reductions (all_reduce, reduce, reduce_scatter).
Wire reduced_as(c10::ScalarType dtype, const c10d::ReduceOp& reduce, const char* op) {
  if (const int* code = listed_code(dtype)) return {*code, 1};
  if (c10::isComplexType(dtype)) {
    const int* code = listed_code(c10::toRealValueType(dtype));
    TORCH_CHECK(!code || reduce.op_ == c10d::ReduceOp::SUM || reduce.op_ == c10d::ReduceOp::AVG,
                desc().backend, ": ", op, " of ", c10::toString(dtype), " tensors: only ReduceOp.SUM and AVG are "
                "defined on complex numbers (the library reduces them as pairs of ",
                c10::toString(c10::toRealValueType(dtype)), ")");
    if (code) return {*code, 2};
  }
  no_such_type(dtype, op, ", and a reduction cannot move it as bytes");
}

// The library's code for `reduce` on `dtype`. Bool tensors reduce as torch defines it for every
// backend: sum is "any", product is "all" (ProcessGroupNCCL asks max and min of the library,
// which moves bool as bytes: a byte sum of two trues would be 2, not a bool).
int reduce_code(const c10d::ReduceOp& reduce, c10::ScalarType dtype, const char* op) {
  static const std::map<c10d::ReduceOp::RedOpType, std::string> names = {
      {c10d::ReduceOp::SUM, "sum"}, {c10d::ReduceOp::PRODUCT, "prod"}, {c10d::ReduceOp::MAX, "max"},
      {c10d::ReduceOp::MIN, "min"}, {c10d::ReduceOp::AVG, "avg"}};
  auto kind = reduce.op_;
  if (dtype == c10::ScalarType::Bool) {
    TORCH_CHECK(kind != c10d::ReduceOp::AVG, desc().backend, ": ", op, ": ReduceOp.AVG of bool tensors");
    if (kind == c10d::ReduceOp::SUM) kind = c10d::ReduceOp::MAX;
    if (kind == c10d::ReduceOp::PRODUCT) kind = c10d::ReduceOp::MIN;
  }
  const auto name = names.find(kind);
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
  // An abort (from a waiting thread or the progress thread) never runs beside a status query:
  // NCCL's communicator may not be queried while it is being freed.
  mutable std::mutex mutex;

  ~Communicator() {
    if (handle && !aborted.load()) api().comm_destroy(handle);
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mutex);
    if (handle && !aborted.exchange(true)) api().comm_abort(handle);
  }
  // The status of the communicator's queued work: success, in_progress, or its failure. Once
  // aborted the handle is gone (the caller reports the abort).
  int async_error() const {
    std::lock_guard<std::mutex> lock(mutex);
    if (aborted.load()) return desc().status_in_progress;
    int status = desc().status_success;
    const int call = api().comm_get_async_error(handle, &status);
    return call == desc().status_success ? status : call;
  }
};

// --- work ---------------------------------------------------------------------------------------

// One collective in flight. The backend's progress thread completes its future (and any
// callback chained to it, as DDP's) once the device is done with it, or fails it with the
// library's error or past the timeout (aborting the communicator: the peers see an error,
// never a hang). wait() blocks the host on that, then makes the caller's stream wait for the
// collective.
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
        deadline_(std::chrono::steady_clock::now() + timeout),
        timeout_(timeout),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{stream.device()})) {}

  void record_end() { end_.record(stream_); }

  // Called by the progress thread: true once the work is finished (its future completed or
  // failed).
  bool poll() {
    if (future_->completed()) return true;
    if (end_.query()) {
      check_async_error();
      if (!failed()) complete_future();
      return true;
    }
    if (comm_->aborted.load()) {   // by another collective's failure or timeout: this one is lost too
      std::ostringstream message;
      message << desc().backend << " rank " << comm_->rank << ": " << op_ << " #" << sequence_
              << " did not complete: the communicator was aborted (an earlier collective failed or timed out)";
      set_exception(std::make_exception_ptr(
          c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message.str())));
      return true;
    }
    const int status = comm_->async_error();
    if (status != desc().status_success && status != desc().status_in_progress) {
      check_async_error();
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline_) {
      time_out(timeout_);
      return true;
    }
    return false;
  }

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return !failed(); }

  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return exception_;
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + (timeout == kNoTimeout ? timeout_ : timeout);
    auto pause = std::chrono::microseconds(10);
    while (!future_->completed()) {
      if (std::chrono::steady_clock::now() >= deadline) time_out(timeout == kNoTimeout ? timeout_ : timeout);
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
    if (auto error = exception()) std::rethrow_exception(error);
    end_.block(current_stream(stream_.device_index()));
    return true;
  }

  void synchronize() override { wait(kNoTimeout); }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  bool failed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<bool>(exception_);
  }

  // The reason is recorded before the abort, so that it is the error this work reports.
  void time_out(std::chrono::milliseconds limit) {
    std::ostringstream message;
    message << desc().backend << " rank " << comm_->rank << ": " << op_ << " #" << sequence_
            << " did not complete within " << limit.count() << " ms; the communicator was aborted "
            << "(a peer may have stalled or exited)";
    set_exception(std::make_exception_ptr(
        c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message.str())));
    comm_->abort();
  }

  void check_async_error() {
    const int status = comm_->async_error();
    if (status == desc().status_success || status == desc().status_in_progress) return;
    try {
      fail(status, comm_->rank, op_ + " #" + std::to_string(sequence_), comm_->handle);
    } catch (...) {
      set_exception(std::current_exception());
    }
  }

  void set_exception(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (exception_) return;
      exception_ = error;
    }
    if (!future_->completed()) future_->setErrorIfNeeded(error);
  }

  // The outputs are ready on the collective's stream: the future's events are recorded there.
  void complete_future() {
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
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::exception_ptr exception_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Polls a backend's collectives in flight and finishes each (CollectiveWork::poll).
class ProgressThread {
 public:
  ProgressThread() : thread_([this] { loop(); }) {}

  ~ProgressThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }

  void add(c10::intrusive_ptr<CollectiveWork> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      works_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

 private:
  void loop() {
    auto pause = std::chrono::microseconds(10);
    while (true) {
      std::deque<c10::intrusive_ptr<CollectiveWork>> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stop_ || !works_.empty(); });
        if (stop_ && works_.empty()) return;
        batch.swap(works_);
      }
      // Polled in order, without the lock: completing a future runs its callbacks.
      bool progressed = false;
      std::deque<c10::intrusive_ptr<CollectiveWork>> pending;
      for (auto& work : batch) {
        if (work->poll()) {
          progressed = true;
        } else {
          pending.push_back(std::move(work));
        }
      }
      if (!pending.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        works_.insert(works_.begin(), pending.begin(), pending.end());
      }
      pause = progressed ? std::chrono::microseconds(10) : std::min(pause * 2, std::chrono::microseconds(500));
      if (!pending.empty()) std::this_thread::sleep_for(pause);
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<c10::intrusive_ptr<CollectiveWork>> works_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
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
    progress_.add(last);
    coalesced_.clear();
    return last;
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    at::Tensor& t = single(tensors, "all_reduce");
    const int op = reduce_code(opts.reduceOp, t.scalar_type(), "all_reduce");
    const Wire wire = reduced_as(t.scalar_type(), opts.reduceOp, "all_reduce");
    return run(c10d::OpType::ALLREDUCE, "all_reduce", {t}, {t}, [&](void* comm, void* stream) {
      return api().all_reduce(t.data_ptr(), t.data_ptr(), t.numel() * wire.per_element, wire.code, op, comm, stream);
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
    const Wire wire = moved_as(t.scalar_type(), "broadcast");
    return run(c10d::OpType::BROADCAST, "broadcast", {t}, {t}, [&](void* comm, void* stream) {
      return api().broadcast(t.data_ptr(), t.data_ptr(), t.numel() * wire.per_element, wire.code, root, comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    at::Tensor& t = single(tensors, "reduce");
    const int op = reduce_code(opts.reduceOp, t.scalar_type(), "reduce");
    const int root = static_cast<int>(opts.rootRank);
    const Wire wire = reduced_as(t.scalar_type(), opts.reduceOp, "reduce");
    return run(c10d::OpType::REDUCE, "reduce", {t}, {t}, [&](void* comm, void* stream) {
      return api().reduce(t.data_ptr(), t.data_ptr(), t.numel() * wire.per_element, wire.code, op, root, comm,
                          stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check_dense(input, "all_gather");
    check_dense(output, "all_gather");
    TORCH_CHECK(output.numel() == input.numel() * getSize(), desc().backend, ": all_gather: the output holds ",
                output.numel(), " elements, expected ", getSize(), " x ", input.numel());
    const Wire wire = moved_as(input.scalar_type(), "all_gather");
    return run(c10d::OpType::_ALLGATHER_BASE, "all_gather", {input}, {output}, [&](void* comm, void* stream) {
      return api().all_gather(input.data_ptr(), output.data_ptr(), input.numel() * wire.per_element, wire.code, comm,
                              stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    at::Tensor& input = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()), desc().backend,
                ": all_gather needs one list of ", getSize(), " output tensors");
    // Gathered into one buffer, then copied out on the collective's stream, before its end.
    at::Tensor flat = at::empty({getSize() * input.numel()}, input.options());
    auto& out = outputs[0];
    const Wire wire = moved_as(input.scalar_type(), "all_gather");
    // (`flat` is recorded on the collective's stream with the inputs: it lives until that is done.)
    return run(c10d::OpType::ALLGATHER, "all_gather", {input, flat}, out, [&](void* comm, void* stream) {
      return api().all_gather(input.data_ptr(), flat.data_ptr(), input.numel() * wire.per_element, wire.code, comm,
                              stream);
    }, [&] {
      for (int r = 0; r < getSize(); ++r) out[r].copy_(flat.narrow(0, r * input.numel(), input.numel()).view_as(out[r]));
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), desc().backend, ": all_gather_into_tensor_coalesced needs as many "
                "outputs as inputs");
    startCoalescing();
    for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
    return endCoalescing();
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    at::Tensor& output = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()), desc().backend,
                ": reduce_scatter needs one list of ", getSize(), " input tensors");
    // Laid out in one buffer on the caller's stream (before the collective waits for it).
    std::vector<at::Tensor> flat_inputs;
    for (const auto& t : inputs[0]) flat_inputs.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flat_inputs);
    return _reduce_scatter_base(output, flat, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), desc().backend, ": reduce_scatter_tensor_coalesced needs as many "
                "outputs as inputs");
    startCoalescing();
    for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
    return endCoalescing();
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()) && inputs.size() == outputs.size(),
                desc().backend, ": all_to_all needs ", getSize(), " input and output tensors");
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> flat_inputs;
    for (int r = 0; r < getSize(); ++r) {
      in_splits.push_back(inputs[r].numel());
      out_splits.push_back(outputs[r].numel());
      flat_inputs.push_back(inputs[r].reshape({-1}));
    }
    at::Tensor flat_in = at::cat(flat_inputs);
    at::Tensor flat_out = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})},
                                    flat_in.options());
    return exchange(flat_out, flat_in, out_splits, in_splits, outputs);
  }

  // Gather and scatter: sends and receives with the root, in one group (as ProcessGroupNCCL).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override {
    at::Tensor& input = single(inputs, "gather");
    const int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> outs = getRank() == root ? outputs.at(0) : std::vector<at::Tensor>{};
    TORCH_CHECK(getRank() != root || outs.size() == static_cast<size_t>(getSize()), desc().backend,
                ": gather needs ", getSize(), " output tensors on the root");
    const Wire wire = moved_as(input.scalar_type(), "gather");
    return run(c10d::OpType::GATHER, "gather", {input}, outs, [&](void* comm, void* stream) {
      return grouped([&]() -> int {
        if (getRank() != root) {
          return api().send(input.data_ptr(), input.numel() * wire.per_element, wire.code, root, comm, stream);
        }
        for (int r = 0; r < getSize(); ++r) {
          if (r == root) continue;
          const int status =
              api().recv(outs[r].data_ptr(), outs[r].numel() * wire.per_element, wire.code, r, comm, stream);
          if (status != desc().status_success) return status;
        }
        return desc().status_success;
      });
    }, [&] {
      if (getRank() == root) outs[root].copy_(input.view_as(outs[root]));
    });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    at::Tensor& output = single(outputs, "scatter");
    const int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> ins = getRank() == root ? inputs.at(0) : std::vector<at::Tensor>{};
    TORCH_CHECK(getRank() != root || ins.size() == static_cast<size_t>(getSize()), desc().backend,
                ": scatter needs ", getSize(), " input tensors on the root");
    const Wire wire = moved_as(output.scalar_type(), "scatter");
    std::vector<at::Tensor> used = ins;
    used.push_back(output);
    return run(c10d::OpType::SCATTER, "scatter", used, {output}, [&](void* comm, void* stream) {
      return grouped([&]() -> int {
        if (getRank() != root) {
          return api().recv(output.data_ptr(), output.numel() * wire.per_element, wire.code, root, comm, stream);
        }
        for (int r = 0; r < getSize(); ++r) {
          if (r == root) continue;
          const at::Tensor piece = ins[r].contiguous();
          const int status =
              api().send(piece.data_ptr(), piece.numel() * wire.per_element, wire.code, r, comm, stream);
          if (status != desc().status_success) return status;
        }
        return desc().status_success;
      });
    }, [&] {
      if (getRank() == root) output.copy_(ins[root].view_as(output));
    });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    check_dense(input, "reduce_scatter");
    check_dense(output, "reduce_scatter");
    TORCH_CHECK(input.numel() == output.numel() * getSize(), desc().backend, ": reduce_scatter: the input holds ",
                input.numel(), " elements, expected ", getSize(), " x ", output.numel());
    const int op = reduce_code(opts.reduceOp, input.scalar_type(), "reduce_scatter");
    const Wire wire = reduced_as(input.scalar_type(), opts.reduceOp, "reduce_scatter");
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", {input}, {output},
               [&](void* comm, void* stream) {
                 return api().reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel() * wire.per_element,
                                             wire.code, op, comm, stream);
               });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions&) override {
    check_dense(input, "all_to_all");
    check_dense(output, "all_to_all");
    // Splits count rows (the first dimension); none: equal blocks.
    const int64_t in_row = input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0) : 1;
    const int64_t out_row = output.dim() > 0 && output.size(0) > 0 ? output.numel() / output.size(0) : 1;
    auto counts = [&](const std::vector<int64_t>& splits, const at::Tensor& t, int64_t row) {
      std::vector<int64_t> out;
      if (splits.empty()) {
        TORCH_CHECK(t.numel() % getSize() == 0, desc().backend, ": all_to_all of ", t.numel(),
                    " elements: not divisible by the ", getSize(), " ranks (pass split sizes)");
        out.assign(getSize(), t.numel() / getSize());
      } else {
        TORCH_CHECK(splits.size() == static_cast<size_t>(getSize()), desc().backend, ": all_to_all needs ",
                    getSize(), " split sizes, got ", splits.size());
        for (int64_t s : splits) out.push_back(s * row);
      }
      return out;
    };
    return exchange(output, input, counts(output_splits, output, out_row), counts(input_splits, input, in_row), {});
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int peer, int /*tag*/) override {
    at::Tensor& t = single(tensors, "send");
    const Wire wire = moved_as(t.scalar_type(), "send");
    return run(c10d::OpType::SEND, "send", {t}, {t}, [&](void* comm, void* stream) {
      return api().send(t.data_ptr(), t.numel() * wire.per_element, wire.code, peer, comm, stream);
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int peer, int /*tag*/) override {
    at::Tensor& t = single(tensors, "recv");
    const Wire wire = moved_as(t.scalar_type(), "recv");
    return run(c10d::OpType::RECV, "recv", {t}, {t}, [&](void* comm, void* stream) {
      return api().recv(t.data_ptr(), t.numel() * wire.per_element, wire.code, peer, comm, stream);
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
  // `calls` between the library's group_start and group_end; the first failure is returned.
  template <typename Calls>
  int grouped(Calls calls) {
    const int start = api().group_start();
    if (start != desc().status_success) return start;
    const int status = calls();
    const int end = api().group_end();
    return status != desc().status_success ? status : end;
  }

  // All-to-all of element counts per peer: the library's all_to_all when the blocks are equal
  // and it has one, else a send and a receive per peer in one group. `outputs` (optional):
  // tensors the received blocks are copied to afterwards, on the collective's stream.
  c10::intrusive_ptr<c10d::Work> exchange(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& recv,
                                          const std::vector<int64_t>& send, std::vector<at::Tensor> outputs) {
    TORCH_CHECK(std::accumulate(send.begin(), send.end(), int64_t{0}) == input.numel() &&
                    std::accumulate(recv.begin(), recv.end(), int64_t{0}) == output.numel(),
                desc().backend, ": all_to_all split sizes do not add up to the tensors' sizes");
    const Wire wire = moved_as(input.scalar_type(), "all_to_all");
    const bool even = std::all_of(send.begin(), send.end(), [&](int64_t n) { return n == send[0]; }) &&
                      send == recv;
    std::vector<at::Tensor> written = outputs.empty() ? std::vector<at::Tensor>{output} : outputs;
    written.push_back(output);
    return run(c10d::OpType::ALLTOALL, "all_to_all", {input}, written, [&](void* comm, void* stream) {
      if (even && api().all_to_all) {
        return api().all_to_all(input.data_ptr(), output.data_ptr(), send[0] * wire.per_element, wire.code, comm,
                                stream);
      }
      return grouped([&]() -> int {
        const auto size = input.element_size();
        int64_t send_at = 0, recv_at = 0;
        for (int peer = 0; peer < getSize(); ++peer) {
          int status = api().send(static_cast<const char*>(input.data_ptr()) + send_at * size,
                                  send[peer] * wire.per_element, wire.code, peer, comm, stream);
          if (status == desc().status_success) {
            status = api().recv(static_cast<char*>(output.data_ptr()) + recv_at * size,
                                recv[peer] * wire.per_element, wire.code, peer, comm, stream);
          }
          if (status != desc().status_success) return status;
          send_at += send[peer];
          recv_at += recv[peer];
        }
        return desc().status_success;
      });
    }, [&] {
      int64_t at = 0;
      for (size_t r = 0; r < outputs.size(); ++r) {
        outputs[r].copy_(output.narrow(0, at, recv[r]).view_as(outputs[r]));
        at += recv[r];
      }
    });
  }

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

  // The device's communicator, made at the group's first collective there: rank 0 asks the
  // library for an id and the store (the group's own prefix) carries it to the others.
  std::shared_ptr<Communicator> communicator(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = comms_.find(device);
    if (it != comms_.end()) return it->second;
    std::vector<uint8_t> id(desc().unique_id_bytes);
    // Keyed by the group's count of communicators, not the device: ranks of one group may
    // sit on different device indices (npu:0 in one process, npu:1 in the next).
    const std::string key = "torch_fl/" + desc().backend + "/comm/" + std::to_string(comm_count_++);
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

  // Runs `launch` on the collective's stream, then `after` (copies out of a flat buffer) on it,
  // then records the Work's end there.
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* op, std::vector<at::Tensor> inputs,
                                     std::vector<at::Tensor> outputs, Launch launch,
                                     const std::function<void()>& after = nullptr) {
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
    if (status != desc().status_success) {
      fail(status, getRank(), std::string(op) + " #" + std::to_string(sequence), comm->handle);
    }
    if (after) {
      const auto previous = guard.exchangeStream(stream);
      after();
      guard.exchangeStream(previous);
    }
    auto work = c10::make_intrusive<CollectiveWork>(comm, type, op, sequence, stream, std::move(outputs), timeout_);
    if (coalescing_) {
      coalesced_.push_back(work);
    } else {
      work->record_end();
      progress_.add(work);
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
  ProgressThread progress_;  // last: stopped (joined) first
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

std::vector<std::string> load_collective_library() {
  ensure_loaded();
  return library().paths;
}

c10::intrusive_ptr<c10d::Backend> create_collective_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            std::chrono::milliseconds timeout) {
  return c10::make_intrusive<CollectiveBackend>(store, rank, size, timeout);
}

}  // namespace torch_fl
