// The foreach family (torch._foreach_*, the optimizers' multi-tensor updates) launched from C++.
//
// The Python kernel (torch_fl/triton_ops/_foreach.py) prepares each tensor of a call as the
// per-tensor op would and launches `foreach_pointwise_kernel` once over a table in device
// memory: a row per chunk of a tensor, holding its output's address, four operand fields
// (an address or an immediate scalar), and its element range. That costs 1-1.5 ms of host
// time per call on the GPU, ~10 calls per AdamW step.
//
// Here a C++ kernel in front of each foreach op keys a call on what that preparation
// depends on (per argument: a list's length, dtype, device and 0-dim-ness, with every tensor
// contiguous, non-empty and of its lead tensor's shape; a scalar's value; a scalar list's
// element type; see `foreach_key`) and, for a key it has seen, replays the launch: it
// allocates the outputs, writes the table for the call's own tensors, uploads it (or reuses
// an identical one) and launches the recorded kernel. The table's layout is not taken on
// trust: after the Python kernel's call returns, `deduce` works out, for each field of the
// rows it launched, which argument of the call gives that field for every tensor, and a
// launch with a field it cannot explain is never replayed.
#include <torch_fl/triton_launch.h>

#include <torch_fl/cuda_launch.h>
#include <torch_fl/triton_replay.h>
#include <torch_fl/fallback.h>
#include <torch_fl/host_allocator.h>
#include <torch_fl/streams.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace torch_fl {

namespace {

using replay::aligned16;
using replay::KeyWriter;

constexpr size_t kMaxParams = 16;
constexpr size_t kMaxRecipesPerOp = 256;
constexpr size_t kTablesPerOp = 8;  // uploaded tables kept per op (an optimizer's parameter groups)
constexpr int kOperandFields = 4;

// Where an operand field of tensor i's rows comes from.
enum class FieldSource : uint8_t {
  kList,        // the data pointer of tensor i of the tensor-list argument `argument`
  kTensor,      // the data pointer of the tensor argument `argument` (a 0-dim chip tensor)
  kScalarList,  // element i of the scalar-list argument `argument`, as the kernel takes it
  kConstant,    // `value`
};

struct Field {
  FieldSource source = FieldSource::kConstant;
  int argument = 0;
  int64_t value = 0;
};

struct ForeachRecipe {
  void* function = nullptr;
  unsigned threads = 0;
  unsigned shared_bytes = 0;
  int64_t chunk = 0;  // elements per row
  bool inplace = false;
  c10::ScalarType out_dtype = c10::ScalarType::Float;
  std::array<Field, kOperandFields> operands;
  std::vector<uint64_t> params;  // params[0] is the table's pointer, filled at the launch
};

// The raw launch the Python kernel reported (record_foreach_launch).
struct RecordedLaunch {
  void* function = nullptr;
  unsigned threads = 0;
  unsigned shared_bytes = 0;
  int64_t chunk = 0;
  std::vector<int64_t> rows;
  std::vector<uint64_t> params;
};

uintptr_t address(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.const_data_ptr()); }

// A scalar as pointwise_dense_kernel takes it in a row field (_common.dense_operands): a
// double as its bit pattern, an integer or bool as its value. False for other kinds.
bool immediate(const c10::IValue& value, int64_t* out) {
  if (value.isDouble()) {
    const double d = value.toDouble();
    std::memcpy(out, &d, sizeof(d));
    return true;
  }
  if (value.isInt()) {
    *out = value.toInt();
    return true;
  }
  if (value.isBool()) {
    *out = value.toBool() ? 1 : 0;
    return true;
  }
  return false;
}

char scalar_kind(const c10::IValue& value) {
  return value.isDouble() ? 'd' : value.isInt() ? 'i' : value.isBool() ? 'b' : 0;
}

bool host_scalar_dtype(c10::ScalarType type) {
  return type == c10::ScalarType::Float || type == c10::ScalarType::Double || type == c10::ScalarType::Half ||
         type == c10::ScalarType::BFloat16 || type == c10::ScalarType::Int || type == c10::ScalarType::Long ||
         type == c10::ScalarType::Bool || type == c10::ScalarType::Char || type == c10::ScalarType::Byte ||
         type == c10::ScalarType::Short;
}

// What a keyed call's replay needs besides its arguments.
struct ForeachFacts {
  int lead = -1;  // the first tensor-list argument: each tensor's shape, and its output in place
  c10::Device device{c10::DeviceType::CPU};
  std::vector<std::pair<int, int>> aliased;  // list arguments whose first tensors share their address
};

// The key of a call: per argument its kind and what the Python preparation reads of it. A
// tensor list: its dtype and 0-dim-ness, every tensor being of that dtype, on the lead
// list's device, contiguous, non-empty and of its lead tensor's shape (what puts every tensor
// in the one table launch), and which earlier list its first tensor shares an address with (one
// tensor passed in two lists, AdamW's addcmul_(v, g, g)); a list of one-element tensors
// (a fused optimizer's steps) instead of the lead tensor's shape; an empty list (a state the
// call does not use). A scalar list: its element type
// (the values change between calls and only reach the table). A scalar or host 0-dim
// tensor: its value. False: a call never replayed.
bool foreach_key(const torch::jit::Stack& stack, size_t first, size_t count, KeyWriter* key, ForeachFacts* facts) {
  for (size_t i = 0; i < count && facts->lead < 0; ++i) {
    if (stack[first + i].isTensorList()) facts->lead = static_cast<int>(i);
  }
  if (facts->lead < 0) return false;
  const c10::ArrayRef<c10::IValue> lead = stack[first + facts->lead].toListRef();
  const size_t n = lead.size();
  if (n == 0 || !lead[0].toTensor().defined()) return false;
  const at::Tensor& lead0 = lead[0].toTensor();
  if (lead0.device().type() != c10::DeviceType::PrivateUse1) return false;
  facts->device = lead0.device();
  const bool zero_dim = lead0.dim() == 0;
  std::vector<int> lists;
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& value = stack[first + i];
    if (value.isTensorList()) {
      const c10::ArrayRef<c10::IValue> list = value.toListRef();
      if (list.empty() && static_cast<int>(i) != facts->lead) {
        key->put('E');  // a list the call leaves empty (a fused optimizer's unused state)
        continue;
      }
      if (list.size() != n) return false;
      const c10::ScalarType dtype = list[0].toTensor().scalar_type();
      // A list of one-element tensors beside a lead list of others: one per tensor (a fused
      // optimizer's step counts).
      const bool scalars = static_cast<int>(i) != facts->lead && !zero_dim && list[0].toTensor().dim() == 0;
      for (size_t j = 0; j < n; ++j) {
        const at::Tensor& t = list[j].toTensor();
        if (!t.defined() || t.device() != facts->device || t.scalar_type() != dtype || t.is_conj() || t.is_neg() ||
            !t.is_contiguous() || t.numel() == 0) {
          return false;
        }
        if (static_cast<int>(i) == facts->lead ? (t.dim() == 0) != zero_dim
            : scalars                          ? t.dim() != 0
                                               : !t.sizes().equals(lead[j].toTensor().sizes())) {
          return false;
        }
      }
      key->put(scalars ? 'Z' : 'L');
      key->put(static_cast<int8_t>(dtype));
      for (int earlier : lists) {
        const bool shared =
            list[0].toTensor().const_data_ptr() == stack[first + earlier].toListRef()[0].toTensor().const_data_ptr();
        key->put(static_cast<char>(shared));
        if (shared) facts->aliased.emplace_back(earlier, static_cast<int>(i));
      }
      lists.push_back(static_cast<int>(i));
    } else if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (!t.defined() || t.dim() != 0 || t.is_conj() || t.is_neg()) return false;
      if (t.device() == facts->device) {
        key->put('T');
        key->put(static_cast<int8_t>(t.scalar_type()));
      } else if (t.device().is_cpu() && host_scalar_dtype(t.scalar_type())) {
        key->put('C');  // a host scalar: taken by value, as the per-tensor op does
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
    } else if (value.isList()) {  // a scalar list
      const c10::ArrayRef<c10::IValue> list = value.toListRef();
      if (list.size() != n) return false;
      const char kind = scalar_kind(list[0]);
      if (kind == 0) return false;
      for (const c10::IValue& element : list) {
        if (scalar_kind(element) != kind) return false;
      }
      key->put('S');
      key->put(kind);
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
    } else {
      return false;
    }
  }
  key->put(static_cast<char>(zero_dim));
  // Type promotion with a Python float takes torch's default dtype.
  key->put('D');
  key->put(static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  return true;
}

// The value of operand field `field` for tensor i of a call.
int64_t field_value(const Field& field, const torch::jit::Stack& stack, size_t first, size_t i) {
  switch (field.source) {
    case FieldSource::kList:
      return static_cast<int64_t>(address(stack[first + field.argument].toListRef()[i].toTensor()));
    case FieldSource::kTensor:
      return static_cast<int64_t>(address(stack[first + field.argument].toTensor()));
    case FieldSource::kScalarList: {
      int64_t value = 0;
      immediate(stack[first + field.argument].toListRef()[i], &value);
      return value;
    }
    case FieldSource::kConstant:
      break;
  }
  return field.value;
}

// The rows of a call's table: per tensor, one row per `chunk` elements.
void write_rows(const ForeachRecipe& recipe, const torch::jit::Stack& stack, size_t first,
                const c10::ArrayRef<c10::IValue>& lead, const std::vector<at::Tensor>& outs, std::vector<int64_t>* rows) {
  rows->clear();
  for (size_t i = 0; i < lead.size(); ++i) {
    const at::Tensor& shape = lead[i].toTensor();
    const int64_t numel = shape.numel();
    const int64_t out = static_cast<int64_t>(address(recipe.inplace ? shape : outs[i]));
    int64_t operands[kOperandFields];
    for (int k = 0; k < kOperandFields; ++k) operands[k] = field_value(recipe.operands[k], stack, first, i);
    for (int64_t start = 0; start < numel; start += recipe.chunk) {
      rows->insert(rows->end(), {out, operands[0], operands[1], operands[2], operands[3], start,
                                 std::min(start + recipe.chunk, numel), 0});
    }
  }
}

// For each field of the rows a launch made, the argument of the call that gives it for every
// tensor; nullopt with the reason when some field has none.
std::optional<std::array<Field, kOperandFields>> deduce(const RecordedLaunch& launch, const torch::jit::Stack& args,
                                                        int lead_argument, const std::vector<at::Tensor>* outs,
                                                        std::string* why) {
  const c10::ArrayRef<c10::IValue> lead = args[lead_argument].toListRef();
  const size_t n = lead.size();
  // Each row's tensor, and the rows' own fields checked against the layout a replay writes.
  std::vector<size_t> owner;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& shape = lead[i].toTensor();
    const int64_t numel = shape.numel();
    const uintptr_t out = address(outs ? (*outs)[i] : shape);
    for (int64_t start = 0; start < numel; start += launch.chunk) {
      const size_t r = owner.size();
      if ((r + 1) * kForeachRowFields > launch.rows.size()) break;
      const int64_t* row = &launch.rows[r * kForeachRowFields];
      if (static_cast<uintptr_t>(row[0]) != out || row[5] != start || row[6] != std::min(start + launch.chunk, numel) ||
          row[7] != 0) {
        *why = "the table's rows are not one per chunk of each tensor, in order";
        return std::nullopt;
      }
      owner.push_back(i);
    }
  }
  if (owner.size() * kForeachRowFields != launch.rows.size()) {
    *why = "the launch did not cover every tensor of the call in one table";
    return std::nullopt;
  }
  auto everywhere = [&](int k, auto&& expected) {
    for (size_t r = 0; r < owner.size(); ++r) {
      if (launch.rows[r * kForeachRowFields + 1 + k] != expected(owner[r])) return false;
    }
    return true;
  };
  std::array<Field, kOperandFields> fields;
  for (int k = 0; k < kOperandFields; ++k) {
    bool found = false;
    // Tensor lists first, then a chip tensor, then a scalar list, then a constant: a field that
    // is an address is explained by its tensors before a coincidence of values could.
    for (int pass = 0; pass < 3 && !found; ++pass) {
      for (size_t a = 0; a < args.size() && !found; ++a) {
        const c10::IValue& value = args[a];
        Field field{FieldSource::kConstant, static_cast<int>(a), 0};
        if (pass == 0 && value.isTensorList() && value.toListRef().size() == n) {
          field.source = FieldSource::kList;
          found = everywhere(k, [&](size_t i) { return static_cast<int64_t>(address(value.toListRef()[i].toTensor())); });
        } else if (pass == 1 && value.isTensor() && value.toTensor().defined() &&
                   value.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
          field.source = FieldSource::kTensor;
          const int64_t pointer = static_cast<int64_t>(address(value.toTensor()));
          found = everywhere(k, [&](size_t) { return pointer; });
        } else if (pass == 2 && value.isList() && !value.isTensorList()) {
          field.source = FieldSource::kScalarList;
          found = everywhere(k, [&](size_t i) {
            int64_t bits = 0;
            immediate(value.toListRef()[i], &bits);  // the key admits scalar lists of numbers only
            return bits;
          });
        }
        if (found) fields[k] = field;
      }
    }
    if (!found) {
      const int64_t value = launch.rows.empty() ? 0 : launch.rows[1 + k];
      if (!everywhere(k, [&](size_t) { return value; })) {
        *why = "a row field is neither an argument's tensors, a scalar list's values nor a constant";
        return std::nullopt;
      }
      fields[k] = Field{FieldSource::kConstant, 0, value};
    }
  }
  return fields;
}

// A table uploaded for a call, kept for later calls with identical rows on the same stream
// (where the caching allocator's reuse of its block is ordered after the kernels reading it).
struct UploadedTable {
  c10::DeviceIndex device;
  void* stream;
  std::vector<int64_t> rows;
  at::Tensor table;
};

// The call a FastForeachKernel sent to the Python kernel, on this thread.
struct PendingForeach {
  bool recordable;
  int launches = 0;
  std::optional<RecordedLaunch> launch;
  PendingForeach* previous;
};
thread_local PendingForeach* pending_foreach = nullptr;

class FastForeachKernel final : public c10::OperatorKernel {
 public:
  FastForeachKernel(std::string op, c10::OperatorHandle mirror)
      : op_(std::move(op)), mirror_(std::move(mirror)), counter_(op_.c_str(), FallbackPath::triton) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    const size_t first = stack->size() - count;
    const bool inplace = op.schema().returns().empty();
    KeyWriter key;
    ForeachFacts facts;
    const bool keyed = foreach_key(*stack, first, count, &key, &facts);
    if (keyed) {
      std::shared_ptr<const ForeachRecipe> recipe;
      {
        std::shared_lock<std::shared_mutex> lock(mutex_);
        auto it = recipes_.find(key.bytes);
        if (it != recipes_.end()) recipe = it->second;
      }
      if (recipe && recipe->inplace == inplace && replay(*recipe, stack, first, count, facts)) {
        replayed_.fetch_add(1, std::memory_order_relaxed);
        counter_.hit();
        return;
      }
    }
    to_python_.fetch_add(1, std::memory_order_relaxed);
    // The arguments outlive the call (the stack is consumed): what each row field is made of
    // is worked out from them and the outputs once it returns.
    torch::jit::Stack args;
    if (keyed) args.assign(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
    PendingForeach call{keyed, 0, std::nullopt, pending_foreach};
    pending_foreach = &call;
    try {
      mirror_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    } catch (...) {
      pending_foreach = call.previous;
      throw;
    }
    pending_foreach = call.previous;
    if (!keyed || call.launches != 1 || !call.launch) return;
    std::vector<at::Tensor> outs;
    if (!inplace) {
      for (const c10::IValue& value : stack->back().toListRef()) outs.push_back(value.toTensor());
      if (!outputs_replayable(outs, args[facts.lead].toListRef())) return;
    }
    std::string why;
    auto fields = deduce(*call.launch, args, facts.lead, inplace ? nullptr : &outs, &why);
    if (!fields) return;
    auto recipe = std::make_shared<ForeachRecipe>();
    recipe->function = call.launch->function;
    recipe->threads = call.launch->threads;
    recipe->shared_bytes = call.launch->shared_bytes;
    recipe->chunk = call.launch->chunk;
    recipe->inplace = inplace;
    recipe->out_dtype = inplace ? args[facts.lead].toListRef()[0].toTensor().scalar_type() : outs[0].scalar_type();
    recipe->operands = *fields;
    recipe->params = std::move(call.launch->params);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    // Keys hold scalar values (an lr schedule makes new ones): a full cache starts over.
    if (recipes_.size() >= kMaxRecipesPerOp) recipes_.clear();
    recipes_.emplace(std::move(key.bytes), std::move(recipe));
  }

  FastTritonStats stats() {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return {op_, replayed_.load(), to_python_.load(), static_cast<int64_t>(recipes_.size())};
  }

 private:
  // Outputs a replay makes alike: contiguous chip tensors of one dtype, each of its lead
  // tensor's shape.
  static bool outputs_replayable(const std::vector<at::Tensor>& outs, const c10::ArrayRef<c10::IValue>& lead) {
    if (outs.size() != lead.size()) return false;
    for (size_t i = 0; i < outs.size(); ++i) {
      const at::Tensor& out = outs[i];
      if (!out.defined() || !out.is_contiguous() || out.scalar_type() != outs[0].scalar_type() ||
          out.device() != lead[i].toTensor().device() || !out.sizes().equals(lead[i].toTensor().sizes())) {
        return false;
      }
    }
    return true;
  }

  bool replay(const ForeachRecipe& recipe, torch::jit::Stack* stack, size_t first, size_t count,
              const ForeachFacts& facts) {
    if (!launch_context_ready(facts.device.index())) return false;
    const c10::ArrayRef<c10::IValue> lead = (*stack)[first + facts.lead].toListRef();
    // A key records only the first tensors' shared addresses: the lists must share all of them.
    for (const auto& [a, b] : facts.aliased) {
      const c10::ArrayRef<c10::IValue> x = (*stack)[first + a].toListRef();
      const c10::ArrayRef<c10::IValue> y = (*stack)[first + b].toListRef();
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i].toTensor().const_data_ptr() != y[i].toTensor().const_data_ptr()) return false;
      }
    }
    std::vector<at::Tensor> outs;
    if (!recipe.inplace) {
      outs.reserve(lead.size());
      const auto options = at::TensorOptions().dtype(recipe.out_dtype).device(facts.device);
      for (const c10::IValue& value : lead) outs.push_back(at::empty(value.toTensor().sizes(), options));
    }
    thread_local std::vector<int64_t> rows;
    write_rows(recipe, *stack, first, lead, outs, &rows);
    void* stream = native_stream(current_stream(facts.device.index()));
    const at::Tensor table = table_for(rows, facts.device, stream);
    if (!aligned16(table.const_data_ptr())) return false;  // Triton specialised the table pointer aligned
    uint64_t values[kMaxParams];
    void* params[kMaxParams];
    for (size_t i = 0; i < recipe.params.size(); ++i) {
      values[i] = i == 0 ? static_cast<uint64_t>(address(table)) : recipe.params[i];
      params[i] = &values[i];  // a narrower parameter reads its slot's low bytes (little-endian)
    }
    launch_compiled_kernel(op_, recipe.function, static_cast<int64_t>(rows.size()) / kForeachRowFields,
                           recipe.threads, recipe.shared_bytes, stream, params);
    torch::jit::drop(*stack, count);
    if (!recipe.inplace) stack->emplace_back(c10::List<at::Tensor>(outs));
    return true;
  }

  // The device table holding `rows`: one uploaded before for identical rows on this stream, or
  // a new one, copied from pinned host memory without waiting for the stream to drain.
  at::Tensor table_for(const std::vector<int64_t>& rows, c10::Device device, void* stream) {
    std::lock_guard<std::mutex> lock(tables_mutex_);
    for (const UploadedTable& entry : tables_) {
      if (entry.device == device.index() && entry.stream == stream && entry.rows == rows) return entry.table;
    }
    const int64_t count = static_cast<int64_t>(rows.size()) / kForeachRowFields;
    // From the chip's own pinned allocator, which the copy below recognises (and records the copy
    // with, instead of waiting for the stream). `pinned_memory(true)` would not do: in a CUDA build
    // torch hands out CUDA's pinned memory whatever the accelerator (EmptyTensor.cpp), and each
    // new table (an optimizer's scalar lists change every step) then synchronised the stream.
    at::Tensor host(at::detail::empty_generic({count, kForeachRowFields}, &PinnedHostAllocator::instance(),
                                              c10::DispatchKeySet(c10::DispatchKey::CPU), at::kLong, std::nullopt));
    std::memcpy(host.mutable_data_ptr(), rows.data(), rows.size() * sizeof(int64_t));
    at::Tensor table = at::empty({count, kForeachRowFields}, at::TensorOptions().dtype(at::kLong).device(device));
    table.copy_(host, /*non_blocking=*/true);
    if (tables_.size() >= kTablesPerOp) tables_.pop_front();
    tables_.push_back({device.index(), stream, rows, table});
    return table;
  }

  std::string op_;
  c10::OperatorHandle mirror_;
  PathCounter counter_;
  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const ForeachRecipe>> recipes_;
  std::mutex tables_mutex_;
  // Never destroyed: the kernel lives in the dispatcher until exit, after the chip's allocator
  // has shut down, which its tables' blocks must not be returned to.
  std::deque<UploadedTable>& tables_ = *new std::deque<UploadedTable>();
  std::atomic<int64_t> replayed_{0};
  std::atomic<int64_t> to_python_{0};
};

}  // namespace

void register_fast_foreach_op(const std::string& name, const std::string& overload, const std::string& mirror) {
  replay::FrontedKernels<FastForeachKernel>::instance().front(name, overload, mirror);
}

bool record_foreach_launch(uintptr_t function, int64_t threads, int64_t shared_bytes, const at::Tensor& rows,
                           int64_t chunk, const std::vector<LaunchArg>& params, std::string* why_not) {
  PendingForeach* call = pending_foreach;
  auto refuse = [&](const char* why) {
    if (why_not != nullptr) *why_not = why;
    if (call != nullptr) call->launch.reset();
    return false;
  };
  if (call == nullptr) return refuse("no call of a C++-fronted foreach op is in progress on this thread");
  if (!call->recordable) return refuse("the call has no key (an argument outside what a replay handles)");
  if (++call->launches > 1) return refuse("the call launched more than one kernel");
  if (function == 0 || threads <= 0 || threads > 1024 || shared_bytes < 0 || chunk <= 0) {
    return refuse("launch configuration out of range");
  }
  if (!rows.defined() || !rows.device().is_cpu() || rows.scalar_type() != at::kLong || !rows.is_contiguous() ||
      rows.dim() != 2 || rows.size(1) != kForeachRowFields || rows.size(0) == 0) {
    return refuse("the table is not a host int64 tensor of rows");
  }
  if (params.empty() || params.size() > kMaxParams || params[0].source != LaunchArgSource::kOut ||
      params[0].bytes != 8) {
    return refuse("the kernel's first parameter is not the table");
  }
  RecordedLaunch launch;
  launch.params.push_back(0);
  for (size_t i = 1; i < params.size(); ++i) {
    if (params[i].source != LaunchArgSource::kConstant) return refuse("a parameter after the table is not a constant");
    launch.params.push_back(static_cast<uint64_t>(params[i].value));
  }
  // The compiled kernel's own parameter list: each recorded size must match; Triton's trailing
  // scratch pointers (none needed by this kernel) are passed null.
  std::vector<int> sizes;
  if (!kernel_parameter_sizes(function, kMaxParams, &sizes)) return refuse("too many kernel parameters");
  if (sizes.size() < params.size()) return refuse("the kernel takes fewer parameters than its signature lists");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < params.size() ? sizes[i] != params[i].bytes : sizes[i] != 8) {
      return refuse("a parameter's size differs from the kernel's");
    }
    if (i >= params.size()) launch.params.push_back(0);
  }
  launch.function = reinterpret_cast<void*>(function);
  launch.threads = static_cast<unsigned>(threads);
  launch.shared_bytes = static_cast<unsigned>(shared_bytes);
  launch.chunk = chunk;
  const int64_t* data = rows.const_data_ptr<int64_t>();
  launch.rows.assign(data, data + rows.numel());
  call->launch = std::move(launch);
  return true;
}

std::vector<FastTritonStats> fast_foreach_stats() {
  std::vector<FastTritonStats> all;
  replay::FrontedKernels<FastForeachKernel>::instance().each([&](FastForeachKernel& kernel) { all.push_back(kernel.stats()); });
  return all;
}

}  // namespace torch_fl
