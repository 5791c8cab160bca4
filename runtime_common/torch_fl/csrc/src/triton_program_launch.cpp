// Triton ops whose Python kernel is more than one pointwise launch (reductions, softmax and
// the norms with their backward, the fused RNN cells, creation ops) launched from C++.
//
// Such a kernel allocates its outputs and any scratch buffers, makes views, and launches one
// or more compiled kernels, all decided by the call's shapes, strides, dtypes and scalars.
// A C++ kernel in front of the op keys each call on exactly those (`program_key`) and, for a
// key it has seen, replays the program the Python kernel ran for it: the same allocations,
// the same launches with each pointer re-based on the call's own arguments and allocations,
// the same outputs.
//
// Nothing about the program is taken on trust. While the Python kernel records (the first
// call of a key), a thread-local RecordFunction observer watches every dispatcher op it runs:
// any op other than an allocation or a view (a copy, a host read, another chip op) makes the
// recording void, since a replay would not run it. Every launch made through the library's
// FastKernel is reported here (torch_fl/triton_ops/_launch.py); a Triton launch outside it
// voids the recording too. Each pointer a launch takes must lie inside one argument's own
// view or inside a chip allocation the call made; each output must be an argument or such
// an allocation. A call whose recording is void goes to Python every time its key comes.
#include <torch_fl/triton_launch.h>

#include <torch_fl/cuda_launch.h>
#include <torch_fl/driver.h>
#include <torch_fl/fallback.h>
#include <torch_fl/rng.h>
#include <torch_fl/streams.h>
#include <torch_fl/triton_replay.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <ATen/Context.h>
#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_set>

namespace torch_fl {

namespace {

using replay::KeyWriter;

constexpr size_t kMaxParams = 64;  // attention's backward takes 49 (with Triton's scratch pointers)
constexpr size_t kMaxLaunches = 16;
constexpr size_t kMaxReturns = 12;
constexpr size_t kMaxRecipesPerOp = 512;
constexpr const char* kNotCurrentDevice = "the tensors are not on the current device";

// The chip tensors of a call, in argument order, a tensor list's elements in place: what a
// recorded pointer or returned argument refers to (`Param::index`, `Output::index`).
constexpr size_t kMaxSlots = 32;
struct Slots {
  std::array<const at::Tensor*, kMaxSlots> tensors{};
  size_t count = 0;
};

// Adds one chip tensor to the key: dtype, device, sizes, strides, the address's low four
// bits (Triton specialises pointers on 16-byte alignment; a pointer into the tensor keeps its
// offset) and which earlier tensor shares its storage, at what distance.
bool key_tensor(const at::Tensor& t, KeyWriter* key, Slots* slots) {
  if (t.device().type() != c10::DeviceType::PrivateUse1 || t.is_conj() || t.is_neg() || !t.has_storage() ||
      slots->count == kMaxSlots) {
    return false;
  }
  key->put('T');
  key->put(static_cast<int8_t>(t.scalar_type()));
  key->put(static_cast<int8_t>(t.device().index()));
  key->put_ints(t.sizes());
  key->put_ints(t.strides());
  const auto address = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  key->put(static_cast<uint8_t>(address & 15));
  int8_t shares = -1;
  int64_t distance = 0;
  for (size_t j = 0; j < slots->count; ++j) {
    if (slots->tensors[j]->storage().is_alias_of(t.storage())) {
      shares = static_cast<int8_t>(j);
      distance = static_cast<int64_t>(address - reinterpret_cast<uintptr_t>(slots->tensors[j]->const_data_ptr()));
      break;
    }
  }
  key->put(shares);
  key->put(distance);
  slots->tensors[slots->count++] = &t;
  return true;
}

// Adds a 0-dim host tensor to the key: its dtype, whether it wraps a Python number, its value.
bool key_host_scalar(const at::Tensor& t, KeyWriter* key) {
  const c10::ScalarType type = t.scalar_type();
  if (!c10::isFloatingType(type) && !c10::isIntegralType(type, /*includeBool=*/true)) return false;
  key->put('C');
  key->put(static_cast<int8_t>(type));
  key->put(static_cast<char>(t.unsafeGetTensorImpl()->is_wrapped_number()));
  const c10::Scalar item = t.item();
  if (item.isFloatingPoint()) {
    key->put(item.toDouble());
  } else if (item.isBoolean()) {
    key->put(static_cast<int64_t>(item.toBool()));
  } else {
    key->put(item.toLong());
  }
  return true;
}

// The key of a call: everything the Python preparation can read without running an op. Per
// chip tensor (also in a list) as `key_tensor`; per scalar, int list, dtype, device or string
// its value; then the default dtype and the deterministic-algorithms flag. False: a call never
// replayed (a CPU tensor, a generator, ...).
bool program_key(const torch::jit::Stack& stack, size_t first, size_t count, KeyWriter* key, Slots* slots) {
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& value = stack[first + i];
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (!t.defined()) {
        key->put('u');
      } else if (t.device().is_cpu() && t.dim() == 0 && !t.is_conj() && !t.is_neg() && !t.requires_grad()) {
        // A host scalar (`x * 2` passes a wrapped number): the Python kernel reads its value
        // (`item`, which the recording lets through for host tensors) and promotes a wrapped
        // number otherwise than a 0-dim tensor.
        if (!key_host_scalar(t, key)) return false;
      } else if (!key_tensor(t, key, slots)) {
        return false;
      }
    } else if (value.isDouble()) {
      key->put('f');
      key->put(value.toDouble());
    } else if (value.isBool()) {
      key->put('b');
      key->put(value.toBool());
    } else if (value.isInt()) {  // also a dtype, layout or memory format
      key->put('i');
      key->put(value.toInt());
    } else if (value.isNone()) {
      key->put('n');
    } else if (value.isIntList()) {
      key->put('L');
      key->put_ints(value.toIntList().vec());
    } else if (value.isBoolList()) {
      key->put('B');
      const auto flags = value.toBoolList();
      key->put(flags.size());
      for (bool flag : flags) key->put(flag);
    } else if (value.isDoubleList()) {
      key->put('F');
      const auto numbers = value.toDoubleList();
      key->put(numbers.size());
      for (double number : numbers) key->put(number);
    } else if (value.isList()) {  // Tensor[] or Tensor?[]
      const auto elements = value.toListRef();
      key->put('l');
      key->put(elements.size());
      for (const c10::IValue& element : elements) {
        if (element.isNone() || (element.isTensor() && !element.toTensor().defined())) {
          key->put('u');
        } else if (!element.isTensor() || !key_tensor(element.toTensor(), key, slots)) {
          return false;
        }
      }
    } else if (value.isString()) {
      const auto& text = value.toStringRef();
      key->put('s');
      key->put(text.size());
      key->bytes.append(text);
    } else if (value.isDevice()) {
      key->put('d');
      key->put(static_cast<int8_t>(value.toDevice().type()));
      key->put(static_cast<int8_t>(value.toDevice().index()));
    } else {
      return false;
    }
  }
  if (slots->count == 0) return false;
  key->put('D');
  key->put(static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  key->put(static_cast<char>(at::globalContext().deterministicAlgorithms()));
  return true;
}

// Where a pointer parameter points at replay.
enum class Base : uint8_t { kArgument, kAllocation };

struct Param {
  ProgramParamSource source = ProgramParamSource::kConstant;
  Base base = Base::kArgument;
  int index = 0;        // a pointer's argument or allocation; a reservation's
  int64_t value = 0;    // a constant, or the pointer's byte offset from the base's data
  uint8_t low_bits = 0; // a pointer's address mod 16 when recorded (Triton's specialisation)
  int8_t int_class = 0; // a seed's or offset's integer type as Triton chose it (`int_class`)
};

// The integer type Triton gives a non-negative parameter by its value (i32, i64, u64; its
// native specialisation): a seed or offset of another type than recorded needs another
// compiled kernel.
int8_t int_class(uint64_t value) {
  return value < (uint64_t{1} << 31) ? 0 : value < (uint64_t{1} << 63) ? 1 : 2;
}

uint64_t counter_value(ProgramParamSource source, const std::pair<uint64_t, uint64_t>& counters) {
  if (source == ProgramParamSource::kSeedLow) return counters.first & 0xFFFFFFFFu;
  if (source == ProgramParamSource::kSeedHigh) return counters.first >> 32;
  return counters.second;
}

struct Launch {
  void* function = nullptr;
  std::array<unsigned, 3> grid{1, 1, 1};
  unsigned threads = 0;
  unsigned shared_bytes = 0;
  std::vector<Param> params;
};

struct Allocation {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

struct Output {
  // kInteger: an int return (attention's max_q, max_k), a function of the key's sizes: `value`.
  enum Kind : uint8_t { kUndefined, kArgument, kAllocation, kAllocationView, kInteger } kind = kUndefined;
  int index = 0;
  int64_t value = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
};

// Philox counters of a device's default generator the call reserved (the random family).
struct Reservation {
  c10::DeviceIndex device = 0;
  uint64_t increment = 0;
  uint64_t seed = 0;    // as recorded: what the launches' seed and offset parameters were
  uint64_t offset = 0;
  bool used = false;
};

// An argument the call resized before its first launch (an `out=` tensor, arange's): a replay
// resizes the call's own the same way first.
struct Resize {
  int slot = 0;
  std::vector<int64_t> sizes;
};

struct Program {
  std::vector<Resize> resizes;
  std::vector<Reservation> reservations;
  std::vector<Allocation> allocations;  // only those a launch or an output uses
  std::vector<Launch> launches;
  std::vector<Output> outputs;
};

// A call the C++ kernel sent to the Python kernel, recording on this thread. Nested calls
// stack (`previous`).
struct Recording {
  std::vector<at::Tensor> arguments;  // the call's chip tensors (Slots)
  std::vector<at::Tensor> allocations;  // the chip allocations the call made, in order
  std::vector<Launch> launches;
  std::vector<std::vector<int>> launch_allocations;  // per launch, per pointer param: allocation or -1
  std::vector<Reservation> reservations;
  std::vector<Resize> resizes;
  std::string void_reason;  // non-empty: nothing is recorded
  Recording* previous = nullptr;
};
thread_local Recording* recording = nullptr;

void void_recording(Recording* r, std::string why) {
  if (r != nullptr && r->void_reason.empty()) r->void_reason = std::move(why);
}

// Ops a recorded Python kernel may run: allocations and views, which decide nothing a key
// does not hold and change no memory. Any other op voids the recording.
bool allocation_op(std::string_view name) {
  return name == "aten::empty" || name == "aten::empty_strided" || name == "aten::empty_like" ||
         name == "aten::new_empty" || name == "aten::new_empty_strided";
}

bool metadata_op(std::string_view name) {
  static const auto* allowed = new std::unordered_set<std::string_view>{
      "aten::view",          "aten::_unsafe_view",   "aten::as_strided",   "aten::permute",
      "aten::expand",        "aten::expand_as",      "aten::reshape",      "aten::_reshape_alias",
      "aten::movedim",       "aten::moveaxis",       "aten::select",       "aten::slice",
      "aten::narrow",        "aten::unsqueeze",      "aten::squeeze",      "aten::t",
      "aten::transpose",     "aten::swapaxes",       "aten::diagonal",     "aten::alias",
      "aten::detach",        "aten::flatten",        "aten::unflatten",    "aten::view_as",
      "aten::view_as_real",  "aten::view_as_complex", "aten::split",       "aten::split_with_sizes",
      "aten::unbind",        "aten::chunk",          "aten::contiguous",   "aten::resolve_conj",
      "aten::resolve_neg",   "aten::result_type",    "aten::broadcast_tensors", "aten::broadcast_to",
      "aten::is_same_size",  "aten::unsafe_split",   "aten::unsafe_chunk", "aten::mT",
      "aten::numpy_T",       "aten::matrix_H",       "aten::adjoint",      "aten::_reshape_copy",
      // functions of dtypes alone
      "aten::promote_types", "aten::can_cast",
  };
  return allowed->count(name) != 0;
}

// The value of a host tensor (the call's host scalars are keyed on theirs; a host tensor the
// kernel made holds what the key decided).
bool host_read(const at::RecordFunction& fn) {
  const std::string_view name = fn.name();
  if (name != "aten::item" && name != "aten::_local_scalar_dense") return false;
  const auto inputs = fn.inputs();
  return !inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().device().is_cpu();
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  Recording* r = recording;
  if (r == nullptr || !r->void_reason.empty()) return nullptr;
  const std::string_view name = fn.name();
  if (!allocation_op(name) && !metadata_op(name) && name != "aten::resize_" && !host_read(fn)) {
    void_recording(r, std::string("the Python kernel ran ") + fn.name() + ", which a replay would not run");
  }
  return nullptr;
}

// A resize the recording can make again: of an argument or an allocation of the call, before
// any launch (no launch has used the memory a resize may replace).
void on_resize(Recording* r, const at::RecordFunction& fn) {
  for (const c10::IValue& value : fn.outputs()) {
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    if (!r->launches.empty()) {
      void_recording(r, "the Python kernel resized a tensor after a launch");
      return;
    }
    for (size_t slot = 0; slot < r->arguments.size(); ++slot) {
      if (r->arguments[slot].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        if (!t.is_contiguous()) void_recording(r, "the Python kernel resized an argument to a strided shape");
        r->resizes.push_back({static_cast<int>(slot), t.sizes().vec()});
        return;
      }
    }
    for (const at::Tensor& made : r->allocations) {
      if (made.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return;  // its final shape is allocated
    }
    void_recording(r, "the Python kernel resized a tensor the call neither got nor allocated");
    return;
  }
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  Recording* r = recording;
  if (r == nullptr || !r->void_reason.empty()) return;
  if (std::string_view(fn.name()) == "aten::resize_") {
    on_resize(r, fn);
    return;
  }
  if (!allocation_op(fn.name())) return;
  for (const c10::IValue& value : fn.outputs()) {
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) continue;
    bool known = false;  // empty_like's own empty_strided: the same storage, once
    for (const at::Tensor& seen : r->allocations) known = known || seen.storage().is_alias_of(t.storage());
    if (!known) r->allocations.push_back(t);
  }
}

// The byte range a tensor's view reaches: [first, last) from its data pointer.
std::pair<int64_t, int64_t> view_span(const at::Tensor& t) {
  int64_t low = 0;
  int64_t high = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return {0, 0};
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? low : high) += reach;
  }
  const int64_t item = static_cast<int64_t>(t.element_size());
  return {low * item, (high + 1) * item};
}

bool aligned_offset(const void* data, int64_t offset, uint8_t low_bits) {
  return ((reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(offset)) & 15) == low_bits;
}

class FastProgramKernel final : public c10::OperatorKernel {
 public:
  FastProgramKernel(std::string op, c10::OperatorHandle mirror)
      : op_(std::move(op)), mirror_(std::move(mirror)), counter_(op_.c_str(), FallbackPath::triton) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    const size_t first = stack->size() - count;
    KeyWriter key;
    Slots slots;
    bool keyed = program_key(*stack, first, count, &key, &slots);
    if (keyed) {
      std::shared_ptr<const Program> program;
      bool found = false;
      {
        std::shared_lock<std::shared_mutex> lock(mutex_);
        auto it = programs_.find(key.bytes);
        found = it != programs_.end();
        if (found) program = it->second;
      }
      if (program && replay(*program, stack, count, slots)) {
        replayed_.fetch_add(1, std::memory_order_relaxed);
        counter_.hit();
        return;
      }
      if (found && !program) keyed = false;  // its recording was void: Python, unobserved
    }
    to_python_.fetch_add(1, std::memory_order_relaxed);
    if (!keyed) {
      // Still a recording, void: a launch it makes is not that of a call it is nested in.
      Recording call;
      call.void_reason = "the call has no key";
      run_python(&call, stack);
      return;
    }
    Recording call;
    call.arguments.reserve(slots.count);
    for (size_t i = 0; i < slots.count; ++i) call.arguments.push_back(*slots.tensors[i]);
    const c10::DeviceIndex device = slots.tensors[0]->device().index();
    if (device != current_device()) call.void_reason = kNotCurrentDevice;
    {
      // Watches the ops the Python kernel runs, on this thread, for this call only.
      auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                                                   .needsInputs(true)
                                                   .needsOutputs(true)
                                                   .scopes({at::RecordScope::FUNCTION}));
      try {
        run_python(&call, stack);
      } catch (...) {
        at::removeCallback(handle);
        throw;
      }
      at::removeCallback(handle);
    }
    const size_t nreturns = op.schema().returns().size();
    auto program = finish(&call, *stack, stack->size() - nreturns, nreturns);
    // A void recording is kept (null) so the key's later calls skip the observer; not one
    // void only for the current device, which a later call may have right.
    if (!program && call.void_reason == kNotCurrentDevice) return;
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (!program) ++voids_[call.void_reason.empty() ? "no launch, or a return a replay cannot make" : call.void_reason];
    // Keys hold scalar values and shapes (a growing sequence makes new ones): a full cache
    // starts over rather than sending every later key to Python.
    if (programs_.size() >= kMaxRecipesPerOp) programs_.clear();
    // (replacing the key's program when it could not replay this call: a seed or offset of
    // another integer type, or pointers of another alignment)
    programs_.insert_or_assign(std::move(key.bytes), std::move(program));
  }

  // Why keys were never replayed: reason -> keys.
  std::vector<std::pair<std::string, int64_t>> voids() {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return {voids_.begin(), voids_.end()};
  }

  const std::string& op() const { return op_; }

  FastTritonStats stats() {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    int64_t recipes = 0;
    for (const auto& entry : programs_) recipes += entry.second != nullptr;
    return {op_, replayed_.load(), to_python_.load(), recipes};
  }

 private:
  void run_python(Recording* call, torch::jit::Stack* stack) {
    call->previous = recording;
    recording = call;
    try {
      // Straight to the mirror's chip kernel (the Python one): the keys above it (autograd,
      // ADInplaceOrView) already ran for the aten op, and the mirror registers none.
      mirror_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    } catch (...) {
      recording = call->previous;
      throw;
    }
    recording = call->previous;
  }

  // The program of a recorded call, from its launches and its returns; null when it cannot
  // be replayed.
  std::shared_ptr<const Program> finish(Recording* call, const torch::jit::Stack& stack, size_t first,
                                        size_t nreturns) {
    // (A call that launched nothing, a zero-element one, replays as its allocations and returns.)
    if (!call->void_reason.empty()) return nullptr;
    for (const Reservation& reservation : call->reservations) {
      // Counters reserved but not passed to a launch as a seed and offset: the numbers would
      // reach a kernel some other way, which a replay would repeat.
      if (!reservation.used) {
        call->void_reason = "Philox counters reserved but not passed to a launch as its seed and offset";
        return nullptr;
      }
    }
    if (call->reservations.size() > 1) {
      call->void_reason = "more than one reservation of Philox counters";
      return nullptr;
    }
    auto program = std::make_shared<Program>();
    program->reservations = call->reservations;
    program->resizes = call->resizes;
    std::vector<int> kept(call->allocations.size(), -1);  // recorded allocation -> the program's
    auto keep = [&](int index) {
      if (kept[index] < 0) {
        const at::Tensor& t = call->allocations[index];
        kept[index] = static_cast<int>(program->allocations.size());
        program->allocations.push_back({t.sizes().vec(), t.strides().vec(), t.scalar_type()});
      }
      return kept[index];
    };
    for (size_t l = 0; l < call->launches.size(); ++l) {
      Launch launch = call->launches[l];
      for (size_t p = 0; p < launch.params.size(); ++p) {
        const int allocation = call->launch_allocations[l][p];
        if (allocation >= 0) launch.params[p].index = keep(allocation);
      }
      program->launches.push_back(std::move(launch));
    }
    for (size_t i = 0; i < nreturns; ++i) {
      const c10::IValue& value = stack[first + i];
      Output out;
      if (value.isInt()) {
        out.kind = Output::kInteger;
        out.value = value.toInt();
        program->outputs.push_back(std::move(out));
        continue;
      }
      if (!value.isTensor()) return nullptr;
      const at::Tensor& t = value.toTensor();
      if (t.defined()) {
        for (size_t a = 0; a < call->arguments.size() && out.kind == Output::kUndefined; ++a) {
          if (call->arguments[a].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
            out.kind = Output::kArgument;
            out.index = static_cast<int>(a);
          }
        }
        for (size_t a = call->allocations.size(); a-- > 0 && out.kind == Output::kUndefined;) {
          const at::Tensor& made = call->allocations[a];
          if (!made.storage().is_alias_of(t.storage()) || made.scalar_type() != t.scalar_type()) continue;
          out.index = keep(static_cast<int>(a));
          const bool same = t.sizes().equals(made.sizes()) && t.strides().equals(made.strides()) &&
                            t.storage_offset() == made.storage_offset();
          out.kind = same ? Output::kAllocation : Output::kAllocationView;
          out.sizes = t.sizes().vec();
          out.strides = t.strides().vec();
          out.storage_offset = t.storage_offset();
        }
        if (out.kind == Output::kUndefined) return nullptr;  // neither an argument nor made by the call
      }
      program->outputs.push_back(std::move(out));
    }
    return program;
  }

  bool replay(const Program& program, torch::jit::Stack* stack, size_t count, const Slots& slots) {
    const c10::Device device = slots.tensors[0]->device();
    if (!launch_context_ready(device.index())) return false;
    std::array<at::Tensor, 16> made;
    if (program.allocations.size() > made.size()) return false;
    for (const Resize& resize : program.resizes) slots.tensors[resize.slot]->resize_(resize.sizes);
    for (size_t a = 0; a < program.allocations.size(); ++a) {
      const Allocation& allocation = program.allocations[a];
      made[a] = at::empty_strided(allocation.sizes, allocation.strides,
                                  at::TensorOptions().dtype(allocation.dtype).device(device));
    }
    // Every pointer first: a replay whose pointers Triton would specialise differently
    // launches nothing and goes to Python.
    std::array<std::array<uint64_t, kMaxParams>, kMaxLaunches> values;
    for (size_t l = 0; l < program.launches.size(); ++l) {
      const Launch& launch = program.launches[l];
      for (size_t p = 0; p < launch.params.size(); ++p) {
        const Param& param = launch.params[p];
        if (param.source != ProgramParamSource::kPointer) {
          values[l][p] = static_cast<uint64_t>(param.value);  // a constant; the counters below
          continue;
        }
        const void* data = param.base == Base::kArgument ? slots.tensors[param.index]->const_data_ptr()
                                                         : made[param.index].const_data_ptr();
        if (!aligned_offset(data, param.value, param.low_bits)) return false;
        values[l][p] = reinterpret_cast<uintptr_t>(data) + static_cast<uint64_t>(param.value);
      }
    }
    // Counters last, once nothing else can send the call to Python: the recording's one
    // reservation made again under the generator's lock, as the Python kernel's, unless a seed
    // or offset would now take another integer type (another compiled kernel: Python).
    if (!program.reservations.empty()) {
      const Reservation& reservation = program.reservations.front();
      at::Generator generator = default_generator(reservation.device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      auto* engine = static_cast<DeviceGenerator*>(generator.unsafeGetGeneratorImpl());
      const std::pair<uint64_t, uint64_t> next = engine->philox_engine_inputs(0);  // peeks
      for (size_t l = 0; l < program.launches.size(); ++l) {
        for (size_t p = 0; p < program.launches[l].params.size(); ++p) {
          const Param& param = program.launches[l].params[p];
          if (param.source == ProgramParamSource::kSeedLow || param.source == ProgramParamSource::kSeedHigh ||
              param.source == ProgramParamSource::kOffset) {
            const uint64_t value = counter_value(param.source, next);
            if (int_class(value) != param.int_class) return false;
            values[l][p] = value;
          }
        }
      }
      engine->philox_engine_inputs(reservation.increment);
    }
    void* stream = native_stream(current_stream(device.index()));
    std::array<void*, kMaxParams> params;
    for (size_t l = 0; l < program.launches.size(); ++l) {
      const Launch& launch = program.launches[l];
      // A parameter narrower than 8 bytes reads the low bytes of its slot (x86-64 and
      // aarch64 are little-endian).
      for (size_t p = 0; p < launch.params.size(); ++p) params[p] = &values[l][p];
      launch_compiled_kernel_grid(op_, launch.function, launch.grid, launch.threads, launch.shared_bytes, stream,
                                  params.data());
    }
    std::array<c10::IValue, kMaxReturns> outputs;
    for (size_t i = 0; i < program.outputs.size(); ++i) {
      const Output& out = program.outputs[i];
      switch (out.kind) {
        case Output::kUndefined:
          outputs[i] = at::Tensor();
          break;
        case Output::kInteger:
          outputs[i] = out.value;
          break;
        case Output::kArgument:
          outputs[i] = *slots.tensors[out.index];
          break;
        case Output::kAllocation:
          outputs[i] = made[out.index];
          break;
        case Output::kAllocationView:
          outputs[i] = at::as_strided(made[out.index], out.sizes, out.strides, out.storage_offset);
          break;
      }
    }
    torch::jit::drop(*stack, count);
    for (size_t i = 0; i < program.outputs.size(); ++i) stack->emplace_back(std::move(outputs[i]));
    return true;
  }

  std::string op_;
  c10::OperatorHandle mirror_;
  PathCounter counter_;
  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Program>> programs_;  // null: never replayed
  std::map<std::string, int64_t> voids_;
  std::atomic<int64_t> replayed_{0};
  std::atomic<int64_t> to_python_{0};
};

}  // namespace

BoxedCall program_replay(const std::string& name, const std::string& overload, const std::string& mirror) {
  FastProgramKernel* kernel = replay::FrontedKernels<FastProgramKernel>::instance().adopt(name, overload, mirror);
  return [kernel](const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    (*kernel)(op, keys, stack);
  };
}

void register_fast_program_op(const std::string& name, const std::string& overload, const std::string& mirror) {
  const auto& returns = c10::Dispatcher::singleton().findSchemaOrThrow(mirror.c_str(), "").schema().returns();
  TORCH_CHECK(returns.size() <= kMaxReturns, "torch_fl: ", name, " returns more values than a program replay keeps");
  replay::FrontedKernels<FastProgramKernel>::instance().front(name, overload, mirror);
}

bool record_program_launch(uintptr_t function, const std::array<int64_t, 3>& grid, int64_t threads,
                           int64_t shared_bytes, const std::vector<ProgramLaunchParam>& params, std::string* why_not) {
  Recording* call = recording;
  auto refuse = [&](std::string why) {
    if (why_not != nullptr) *why_not = why;
    void_recording(call, std::move(why));
    return false;
  };
  if (call == nullptr) return refuse("no call of a C++-fronted op is in progress on this thread");
  if (!call->void_reason.empty()) return refuse(call->void_reason);
  if (call->launches.size() >= kMaxLaunches) return refuse("the call launched more kernels than a replay keeps");
  if (function == 0 || threads <= 0 || threads > 1024 || shared_bytes < 0) {
    return refuse("launch configuration out of range");
  }
  for (int64_t g : grid) {
    if (g < 1 || g > std::numeric_limits<int32_t>::max()) return refuse("grid out of range");
  }
  Launch launch;
  launch.function = reinterpret_cast<void*>(function);
  launch.grid = {static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2])};
  launch.threads = static_cast<unsigned>(threads);
  launch.shared_bytes = static_cast<unsigned>(shared_bytes);
  std::vector<int> allocations;
  for (const ProgramLaunchParam& given : params) {
    if (given.bytes != 1 && given.bytes != 2 && given.bytes != 4 && given.bytes != 8) {
      return refuse("bad parameter size");
    }
    Param param;
    param.source = given.source;
    param.value = given.value;
    int allocation = -1;
    if (given.source == ProgramParamSource::kSeedLow || given.source == ProgramParamSource::kSeedHigh ||
        given.source == ProgramParamSource::kOffset) {
      if (given.value < 0 || static_cast<size_t>(given.value) >= call->reservations.size()) {
        return refuse("a seed or offset parameter of no reservation of the call");
      }
      param.index = static_cast<int>(given.value);
      Reservation& reservation = call->reservations[param.index];
      reservation.used = true;
      param.int_class = int_class(counter_value(given.source, {reservation.seed, reservation.offset}));
    } else if (given.source == ProgramParamSource::kPointer) {
      if (given.bytes != 8) return refuse("a pointer parameter is not 8 bytes");
      const auto address = static_cast<uintptr_t>(given.value);
      param.low_bits = static_cast<uint8_t>(address & 15);
      bool found = false;
      // An argument's own view first (arguments sharing a storage: the first whose view holds it)...
      for (size_t a = 0; a < call->arguments.size() && !found; ++a) {
        const at::Tensor& t = call->arguments[a];
        const auto base = reinterpret_cast<uintptr_t>(t.const_data_ptr());
        const auto [low, high] = view_span(t);
        const auto offset = static_cast<int64_t>(address - base);
        if (offset >= low && offset < high) {
          found = true;
          param.base = Base::kArgument;
          param.index = static_cast<int>(a);
          param.value = offset;
        }
      }
      // ... then the call's own allocations, the latest first (a freed block reused).
      for (size_t a = call->allocations.size(); a-- > 0 && !found;) {
        const at::Tensor& t = call->allocations[a];
        const auto base = reinterpret_cast<uintptr_t>(t.storage().data());
        if (address >= base && address < base + t.storage().nbytes()) {
          found = true;
          param.base = Base::kAllocation;
          allocation = static_cast<int>(a);
          param.value = static_cast<int64_t>(address - reinterpret_cast<uintptr_t>(t.const_data_ptr()));
        }
      }
      if (!found) return refuse("a pointer outside the arguments' views and the call's own allocations");
    }
    launch.params.push_back(param);
    allocations.push_back(allocation);
  }
  // The compiled kernel's own parameter list: each reported parameter's size must match, and
  // parameters beyond them must be Triton's trailing scratch pointers (null: the Python side
  // reports kernels that need no scratch memory only).
  std::vector<int> sizes;
  if (!kernel_parameter_sizes(function, kMaxParams, &sizes)) return refuse("too many kernel parameters");
  if (sizes.size() < params.size()) return refuse("the kernel takes fewer parameters than its signature lists");
  for (size_t index = 0; index < sizes.size(); ++index) {
    if (index < params.size()) {
      if (sizes[index] != params[index].bytes) return refuse("a parameter's size differs from the kernel's");
    } else {
      if (sizes[index] != 8) return refuse("the kernel takes parameters beyond its signature that are not pointers");
      launch.params.push_back(Param{});
      allocations.push_back(-1);
    }
  }
  call->launches.push_back(std::move(launch));
  call->launch_allocations.push_back(std::move(allocations));
  return true;
}

void record_program_rng(int64_t device, int64_t increment, uint64_t seed, uint64_t offset) {
  Recording* call = recording;
  if (call == nullptr || !call->void_reason.empty()) return;
  if (device < 0 || device != call->arguments.front().device().index() || increment < 0) {
    void_recording(call, "Philox counters reserved on another device than the call's");
    return;
  }
  call->reservations.push_back({static_cast<c10::DeviceIndex>(device), static_cast<uint64_t>(increment), seed, offset});
}

void refuse_program_recording(const std::string& why) { void_recording(recording, why); }

std::vector<std::tuple<std::string, std::string, int64_t>> fast_program_voids() {
  std::vector<std::tuple<std::string, std::string, int64_t>> all;
  replay::FrontedKernels<FastProgramKernel>::instance().each([&](FastProgramKernel& kernel) {
    for (auto& [why, keys] : kernel.voids()) all.emplace_back(kernel.op(), why, keys);
  });
  return all;
}

std::vector<FastTritonStats> fast_program_stats() {
  std::vector<FastTritonStats> all;
  replay::FrontedKernels<FastProgramKernel>::instance().each([&](FastProgramKernel& kernel) { all.push_back(kernel.stats()); });
  return all;
}

}  // namespace torch_fl
