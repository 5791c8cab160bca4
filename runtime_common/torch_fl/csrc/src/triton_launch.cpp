#include <torch_fl/triton_launch.h>

#include <torch_fl/cuda_launch.h>
#include <torch_fl/triton_replay.h>
#include <torch_fl/driver.h>
#include <torch_fl/fallback.h>
#include <torch_fl/streams.h>

#include <ATen/ops/empty.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace torch_fl {

namespace {

using replay::aligned16;
using replay::KeyWriter;

constexpr size_t kMaxLaunchArgs = 40;
constexpr size_t kMaxRecipesPerOp = 512;

struct Recipe {
  void* function = nullptr;
  unsigned threads = 0;
  unsigned shared_bytes = 0;
  int64_t elements_per_program = 0;
  bool inplace = false;
  bool out_aligned = true;
  c10::ScalarType out_dtype = c10::ScalarType::Float;
  std::vector<LaunchArg> args;
};

bool host_scalar_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Bool:
    case c10::ScalarType::Char:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Short:
      return true;
    default:
      return false;
  }
}

// What a call's Python preparation depends on, gathered while building its key.
struct CallFacts {
  const at::Tensor* shape_source = nullptr;  // the first chip tensor with dims: the output's shape
  const at::Tensor* device_source = nullptr;  // the first chip tensor
  std::vector<bool> chip_tensor;              // per argument
};

// The key of a call: per argument its kind and what the preparation reads of it (dtype,
// device, 0-dim, shape equal to the output's, contiguity, 16-byte alignment, which
// Triton specialises on; a scalar's value), then the element count's specialisation
// (== 1, divisible by 16, 32-bit). False: a call never replayed (an argument of another
// kind, a tensor on another device, no elements).
bool call_key(const torch::jit::Stack& stack, size_t first, size_t count, KeyWriter* key, CallFacts* facts) {
  facts->chip_tensor.assign(count, false);
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& value = stack[first + i];
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (!t.defined()) {
        key->put('u');
        continue;
      }
      if (t.is_conj() || t.is_neg()) return false;
      if (t.device().type() == c10::DeviceType::PrivateUse1) {
        if (facts->device_source == nullptr) facts->device_source = &t;
        key->put('T');
        key->put(static_cast<int8_t>(t.scalar_type()));
        key->put(static_cast<int8_t>(t.device().index()));
        char shape = 'z';
        if (t.dim() > 0) {
          if (facts->shape_source == nullptr) facts->shape_source = &t;
          shape = t.sizes().equals(facts->shape_source->sizes()) ? 's' : 'x';
        }
        key->put(shape);
        key->put(static_cast<char>(t.is_contiguous()));
        key->put(static_cast<char>(aligned16(t.const_data_ptr())));
        facts->chip_tensor[i] = true;
      } else if (t.device().is_cpu() && t.dim() == 0) {
        // A host scalar tensor: the preparation takes its value, and promotes a wrapped
        // Python number (`x + 2`) differently from a 0-dim tensor of the same dtype. Only
        // the dtypes the kernels take by value (_impl._DT); others stay on the Python path.
        if (!host_scalar_dtype(t.scalar_type())) return false;
        key->put('C');
        key->put(static_cast<int8_t>(t.scalar_type()));
        key->put(static_cast<char>(t.unsafeGetTensorImpl()->is_wrapped_number()));
        const c10::Scalar item = t.item();
        if (item.isFloatingPoint()) {
          key->put(item.toDouble());
        } else {
          key->put(item.toLong());
        }
      } else {
        return false;
      }
    } else if (value.isDouble()) {
      key->put('f');
      key->put(value.toDouble());
    } else if (value.isBool()) {
      key->put('b');
      key->put(value.toBool());
    } else if (value.isInt()) {
      key->put('i');
      key->put(value.toInt());
    } else if (value.isNone()) {
      key->put('n');
    } else if (value.isString()) {
      const auto& text = value.toStringRef();
      key->put('s');
      key->put(text.size());
      key->bytes.append(text);
    } else {
      return false;
    }
  }
  if (facts->device_source == nullptr) return false;
  // Type promotion with a Python float (and a float result of integer inputs) takes
  // torch's default dtype.
  key->put('D');
  key->put(static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  const int64_t n = facts->shape_source ? facts->shape_source->numel() : 1;
  if (n == 0) return false;
  key->put('N');
  key->put(static_cast<char>(n == 1));
  key->put(static_cast<char>(n % 16 == 0));
  key->put(static_cast<char>(n <= std::numeric_limits<int32_t>::max()));
  return true;
}

// The call a FastTritonKernel sent to the Python kernel, on this thread: what the
// recording needs to check the launch against. Nested calls stack (`previous`).
struct PendingCall {
  std::string key;
  CallFacts facts;
  std::vector<int64_t> out_shape;
  const c10::TensorImpl* first_argument;  // an in-place op's output
  bool recordable;                         // false: a call without a key (nothing is recorded for it)
  bool strided = false;                    // the kernel did not make one dense launch (any call of the key)
  int records = 0;
  std::optional<Recipe> recipe;
  PendingCall* previous;
};
thread_local PendingCall* pending_call = nullptr;

class FastTritonKernel final : public c10::OperatorKernel {
 public:
  FastTritonKernel(std::string op, c10::OperatorHandle mirror, BoxedCall strided = nullptr)
      : op_(std::move(op)),
        mirror_(std::move(mirror)),
        strided_(std::move(strided)),
        counter_(op_.c_str(), FallbackPath::triton) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    const size_t first = stack->size() - count;
    KeyWriter key;
    CallFacts facts;
    const bool keyed = call_key(*stack, first, count, &key, &facts);
    if (keyed) {
      std::shared_ptr<const Recipe> recipe;
      bool found = false;
      {
        std::shared_lock<std::shared_mutex> lock(mutex_);
        auto it = recipes_.find(key.bytes);
        found = it != recipes_.end();
        if (found) recipe = it->second;
      }
      if (recipe && replay(*recipe, stack, first, count, facts)) {
        replayed_.fetch_add(1, std::memory_order_relaxed);
        counter_.hit();
        return;
      }
      if (found && !recipe) {  // not one dense launch: the program replay's (it counts the call)
        strided_(op, ks, stack);
        return;
      }
    }
    to_python_.fetch_add(1, std::memory_order_relaxed);
    // Even a call without a key is a pending call: a launch it makes must not be taken as
    // that of a fronted call it is nested in.
    PendingCall call{std::move(key.bytes), std::move(facts), {}, nullptr, keyed, false, 0, std::nullopt, pending_call};
    if (call.facts.shape_source) call.out_shape = call.facts.shape_source->sizes().vec();
    const c10::IValue& first_value = (*stack)[first];
    if (first_value.isTensor()) call.first_argument = first_value.toTensor().unsafeGetTensorImpl();
    call.facts.shape_source = call.facts.device_source = nullptr;  // the stack is consumed by the call
    pending_call = &call;
    try {
      // Straight to the mirror's chip kernel (the Python one): the keys above it (autograd,
      // ADInplaceOrView) already ran for the aten op, and the mirror registers none.
      mirror_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    } catch (...) {
      pending_call = call.previous;
      throw;
    }
    pending_call = call.previous;
    if (!keyed) return;
    const bool recorded = call.records == 1 && call.recipe;
    if (recorded || (strided_ && call.strided)) {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      // Keys hold scalar values (an lr schedule makes new ones): a full cache starts over
      // rather than sending every later key to Python; the keys in use are recorded again.
      if (recipes_.size() >= kMaxRecipesPerOp) recipes_.clear();
      // A call that made no single dense launch (the strided kernel, a fill for a scalar
      // operand), as every call of its key would: the key's later calls go to the program
      // replay (null). (A call not recorded for what is its own, one tensor passed twice, is not.)
      recipes_.emplace(std::move(call.key),
                       recorded ? std::make_shared<const Recipe>(std::move(*call.recipe)) : nullptr);
    }
  }

  FastTritonStats stats() {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    int64_t recipes = 0;
    for (const auto& entry : recipes_) recipes += entry.second != nullptr;
    return {op_, replayed_.load(), to_python_.load(), recipes};
  }

 private:
  bool replay(const Recipe& recipe, torch::jit::Stack* stack, size_t first, size_t count, const CallFacts& facts) {
    const at::Tensor& device_source = *facts.device_source;
    const c10::DeviceIndex device = device_source.device().index();
    if (!launch_context_ready(device)) return false;
    at::Tensor out;
    if (recipe.inplace) {
      out = (*stack)[first].toTensor();
    } else {
      out = at::empty(facts.shape_source ? facts.shape_source->sizes() : at::IntArrayRef{},
                      at::TensorOptions().dtype(recipe.out_dtype).device(device_source.device()));
      if (aligned16(out.const_data_ptr()) != recipe.out_aligned) return false;  // another specialisation
    }
    const int64_t n = out.numel();
    uint64_t values[kMaxLaunchArgs];
    void* params[kMaxLaunchArgs];
    const size_t nargs = recipe.args.size();
    for (size_t i = 0; i < nargs; ++i) {
      const LaunchArg& arg = recipe.args[i];
      switch (arg.source) {
        case LaunchArgSource::kStackTensor:
          values[i] = reinterpret_cast<uintptr_t>((*stack)[first + arg.value].toTensor().const_data_ptr());
          break;
        case LaunchArgSource::kOut:
          values[i] = reinterpret_cast<uintptr_t>(out.const_data_ptr());
          break;
        case LaunchArgSource::kNumel:
          values[i] = static_cast<uint64_t>(n);
          break;
        case LaunchArgSource::kConstant:
          values[i] = static_cast<uint64_t>(arg.value);
          break;
      }
      // A parameter narrower than 8 bytes reads the low bytes of its slot (x86-64 and
      // aarch64 are little-endian): the value itself, two's complement for an integer.
      params[i] = &values[i];
    }
    const int64_t programs = (n + recipe.elements_per_program - 1) / recipe.elements_per_program;
    launch_compiled_kernel(op_, recipe.function, programs, recipe.threads, recipe.shared_bytes,
                           native_stream(current_stream(device)), params);
    torch::jit::drop(*stack, count);
    stack->emplace_back(std::move(out));
    return true;
  }

  std::string op_;
  c10::OperatorHandle mirror_;
  BoxedCall strided_;  // the program replay of the op, or none
  PathCounter counter_;
  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Recipe>> recipes_;  // null: the program replay's
  std::atomic<int64_t> replayed_{0};
  std::atomic<int64_t> to_python_{0};
};

}  // namespace

void register_fast_triton_op(const std::string& name, const std::string& overload, const std::string& mirror,
                             const std::string& strided_mirror) {
  BoxedCall strided = strided_mirror.empty() ? nullptr : program_replay(name, overload, strided_mirror);
  replay::FrontedKernels<FastTritonKernel>::instance().front(name, overload, mirror, std::move(strided));
}

bool record_triton_launch(const at::Tensor& out, bool inplace, uintptr_t function, int64_t threads,
                          int64_t shared_bytes, int64_t elements_per_program, const std::vector<LaunchArg>& args,
                          std::string* why_not) {
  PendingCall* call = pending_call;
  auto refuse = [&](const char* why) {
    if (why_not != nullptr) *why_not = why;
    if (call != nullptr) call->recipe.reset();
    return false;
  };
  if (call == nullptr) return refuse("no call of a C++-fronted op is in progress on this thread");
  if (!call->recordable) return refuse("the call has no key (an argument outside what a replay handles)");
  if (++call->records > 1) return refuse("the call launched more than one kernel");
  if (function == 0 || threads <= 0 || threads > 1024 || shared_bytes < 0 || elements_per_program <= 0) {
    return refuse("launch configuration out of range");
  }
  if (args.size() > kMaxLaunchArgs) return refuse("too many kernel parameters");
  if (!out.defined() || !out.is_contiguous() || out.device().type() != c10::DeviceType::PrivateUse1) {
    return refuse("the output is not a contiguous chip tensor");
  }
  // The kernel was loaded for the current device; a replay requires the tensors' device
  // to be current, so the two must agree.
  if (out.device().index() != current_device()) return refuse("the tensors are not on the current device");
  if (inplace ? out.unsafeGetTensorImpl() != call->first_argument : !out.sizes().equals(call->out_shape)) {
    return refuse("the output is not the one a replay would make");
  }
  for (const LaunchArg& arg : args) {
    if (arg.bytes != 1 && arg.bytes != 2 && arg.bytes != 4 && arg.bytes != 8) return refuse("bad parameter size");
    if (arg.source == LaunchArgSource::kStackTensor &&
        (arg.value < 0 || static_cast<size_t>(arg.value) >= call->facts.chip_tensor.size() ||
         !call->facts.chip_tensor[arg.value])) {
      return refuse("a pointer parameter is not a chip tensor argument of the call");
    }
    if (arg.source > LaunchArgSource::kConstant || arg.source < LaunchArgSource::kStackTensor) {
      return refuse("bad parameter source");
    }
  }
  // The compiled kernel's own parameter list: each recorded parameter's size must match,
  // and parameters beyond them must be Triton's trailing scratch pointers (its launcher
  // passes them after the signature's: global and, since Triton 3.5, profile scratch),
  // null here since the Python side only records kernels that need no scratch memory.
  std::vector<LaunchArg> all_args = args;
  std::vector<int> sizes;
  if (!kernel_parameter_sizes(function, kMaxLaunchArgs, &sizes)) return refuse("too many kernel parameters");
  if (sizes.size() < args.size()) return refuse("the kernel takes fewer parameters than its signature lists");
  for (size_t index = 0; index < sizes.size(); ++index) {
    if (index < args.size()) {
      if (sizes[index] != args[index].bytes) return refuse("a parameter's size differs from the kernel's");
    } else {
      if (sizes[index] != 8) return refuse("the kernel takes parameters beyond its signature that are not pointers");
      all_args.push_back({LaunchArgSource::kConstant, 0, 8});
    }
  }
  Recipe recipe;
  recipe.function = reinterpret_cast<void*>(function);
  recipe.threads = static_cast<unsigned>(threads);
  recipe.shared_bytes = static_cast<unsigned>(shared_bytes);
  recipe.elements_per_program = elements_per_program;
  recipe.inplace = inplace;
  recipe.out_aligned = aligned16(out.const_data_ptr());
  recipe.out_dtype = out.scalar_type();
  recipe.args = std::move(all_args);
  call->recipe = std::move(recipe);
  return true;
}

void mark_triton_call_strided() {
  if (pending_call != nullptr) pending_call->strided = true;
}

std::vector<FastTritonStats> fast_triton_stats() {
  std::vector<FastTritonStats> all = fast_foreach_stats();
  std::map<std::string, FastTritonStats> by_op;  // a pointwise op's program replay counts with it
  auto add = [&](FastTritonStats entry) {
    auto [it, inserted] = by_op.try_emplace(entry.op, entry);
    if (!inserted) {
      it->second.replayed += entry.replayed;
      it->second.to_python += entry.to_python;
      it->second.recipes += entry.recipes;
    }
  };
  for (auto& entry : fast_program_stats()) add(std::move(entry));
  replay::FrontedKernels<FastTritonKernel>::instance().each([&](FastTritonKernel& kernel) { add(kernel.stats()); });
  for (auto& [op, entry] : by_op) all.push_back(std::move(entry));
  return all;
}

}  // namespace torch_fl
