#include <torch_fl/driver.h>
#include <torch_fl/driver_mux.h>
#include <torch_fl/fallback.h>
#include <torch_fl/rng.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

namespace torch_fl {

namespace {

constexpr int kMaxMembers = 16;

FallbackPolicy& policy_storage(int member) {
  static auto* policies = new std::vector<FallbackPolicy>(kMaxMembers);
  return (*policies)[member >= 0 && member < kMaxMembers ? member : 0];
}

std::mutex& counters_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

std::vector<PathCounter*>& path_counters() {
  static auto* counters = new std::vector<PathCounter*>();
  return *counters;
}

std::map<std::string, std::map<std::string, int64_t>>& fallback_counts() {
  static auto* counts = new std::map<std::string, std::map<std::string, int64_t>>();
  return *counts;
}

std::set<std::string>& warned_ops() {
  static auto* warned = new std::set<std::string>();
  return *warned;
}

std::atomic<int> strict_flag{-1};  // -1: not yet read from the environment

std::string op_key(const c10::OperatorName& name) {
  std::string key = name.name;
  if (key.rfind("aten::", 0) == 0) key = key.substr(6);
  if (!name.overload_name.empty()) key += "." + name.overload_name;
  return key;
}

std::string chain_text(const std::vector<std::string>& chain) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < chain.size(); ++i) out << (i ? ", " : "") << chain[i];
  out << "]";
  return out.str();
}

bool contains(const std::vector<std::string>& chain, const char* step) {
  for (const auto& s : chain) {
    if (s == step) return true;
  }
  return false;
}

}  // namespace

const char* path_name(FallbackPath path) {
  switch (path) {
    case FallbackPath::vendor:
      return "vendor";
    case FallbackPath::triton:
      return "triton";
    case FallbackPath::cpu:
      return "cpu";
  }
  return "unknown";
}

void configure_fallback(FallbackPolicy policy, int member) {
  TORCH_CHECK(member >= 0 && member < kMaxMembers, "torch_fl: member index ", member, " out of range");
  policy_storage(member) = std::move(policy);
}

const FallbackPolicy& fallback_policy(int member) { return policy_storage(member); }

int member_of_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (mux_member_count() == 1) return 0;
  const size_t count = op.schema().arguments().size();
  for (size_t i = stack.size() - std::min(count, stack.size()); i < stack.size(); ++i) {
    const c10::IValue& value = stack[i];
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (t.defined() && t.is_privateuseone()) return mux_member_of(t.device().index());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) {
        if (t.defined() && t.is_privateuseone()) return mux_member_of(t.device().index());
      }
    }
  }
  return mux_member_of(current_device());
}

namespace {

struct MissingKernel {
  std::string op, kernel;
  int line;
  bool required;
  int member;
};

std::vector<MissingKernel>& missing_kernels() {
  static auto* missing = new std::vector<MissingKernel>();
  return *missing;
}

}  // namespace

void note_missing_kernel(const char* op, const char* kernel, int line, bool required, int member) {
  missing_kernels().push_back({op, kernel, line, required, member});
}

std::vector<std::string> missing_kernel_ops() {
  std::vector<std::string> ops;
  for (const auto& m : missing_kernels()) ops.push_back(m.op);
  return ops;
}

void verify_required_kernels() {
  std::ostringstream errors;
  int count = 0;
  for (const auto& m : missing_kernels()) {
    if (!m.required) continue;
    const auto& policy = fallback_policy(m.member);
    errors << (count++ ? "; " : "") << "aten::" << m.op << " requires the vendor kernel '" << m.kernel << "' ("
           << policy.spec << ":" << m.line << ": require: vendor), but chip '" << policy.chip
           << "''s vendor kernel library lacks it";
  }
  TORCH_CHECK(count == 0, "chip '", Driver::instance().description().chip, "' cannot initialise: ", errors.str());
}

PathCounter::PathCounter(const char* op, FallbackPath path) : op_(op), path_(path) {
  std::lock_guard<std::mutex> lock(counters_mutex());
  path_counters().push_back(this);
}

void note_fallback(const std::string& op, FallbackPath path) {
  std::lock_guard<std::mutex> lock(counters_mutex());
  fallback_counts()[op][path_name(path)] += 1;
}

std::map<std::string, std::map<std::string, int64_t>> fallback_stats() {
  std::lock_guard<std::mutex> lock(counters_mutex());
  auto stats = fallback_counts();
  for (const PathCounter* counter : path_counters()) {
    if (counter->calls() > 0) stats[counter->op()][path_name(counter->path())] += counter->calls();
  }
  return stats;
}

void reset_fallback_stats() {
  std::lock_guard<std::mutex> lock(counters_mutex());
  fallback_counts().clear();
  for (PathCounter* counter : path_counters()) counter->reset();
}

namespace {
std::string& triton_status() {
  static auto* status = new std::string("not enabled");
  return *status;
}
}  // namespace

void set_triton_status(std::string status) { triton_status() = std::move(status); }

void set_strict(bool value) { strict_flag.store(value ? 1 : 0); }

bool strict() {
  int value = strict_flag.load();
  if (value < 0) {
    const char* env = std::getenv("TORCH_FL_STRICT_FALLBACK");
    value = (env && *env && std::string(env) != "0") ? 1 : 0;
    strict_flag.store(value);
  }
  return value == 1;
}

namespace {

// A random op on the CPU path draws from the chip's generator, not the host's: its
// `Generator?` argument (the chip's default generator when None) lends its state to a
// CPU generator for the call and takes the advanced state back afterwards. The chip
// generator keeps the CPU generator's state format, so this is exact, and
// `torch.<chip>.get_rng_state()`/`manual_seed` govern these draws too.
class ChipRandomOnHost {
 public:
  ChipRandomOnHost(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const auto& args = op.schema().arguments();
    const size_t first = stack->size() - args.size();
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& type = args[i].real_type();
      const bool is_generator = type->kind() == c10::TypeKind::OptionalType &&
                                type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                                    c10::TypeKind::GeneratorType;
      if (!is_generator) continue;
      c10::IValue& slot = (*stack)[first + i];
      if (slot.isNone()) {
        const auto device = chip_device(*stack, first);
        if (!device) return;
        chip_ = default_generator(device->index());
      } else if (slot.toGenerator().device().type() == c10::DeviceType::PrivateUse1) {
        chip_ = slot.toGenerator();
      } else {
        return;  // a CPU generator passed explicitly is used as is
      }
      lock_.emplace(chip_.mutex());
      host_ = at::make_generator<at::CPUGeneratorImpl>();
      // The chip generator's state begins with the CPU layout (its Philox offset follows).
      const at::Tensor chip_state = chip_.get_state();
      host_.set_state(chip_state.narrow(0, 0, host_state_bytes()).clone());
      slot = c10::IValue(host_);
      return;
    }
  }
  ~ChipRandomOnHost() {
    if (host_.defined()) chip_.set_state(host_.get_state());
  }

 private:
  static std::optional<c10::Device> chip_device(const torch::jit::Stack& stack, size_t first) {
    for (size_t i = first; i < stack.size(); ++i) {
      if (stack[i].isTensor() && stack[i].toTensor().defined() && stack[i].toTensor().is_privateuseone()) {
        return stack[i].toTensor().device();
      }
    }
    return std::nullopt;
  }

  at::Generator chip_;
  at::Generator host_;
  std::optional<std::lock_guard<std::mutex>> lock_;
};

// The layout the chips' convolutions promise (torch_fl/conv_layout.py, which tells torch's
// tracing so): a 2-d convolution's outputs channels-last when the input or the weight is, all
// others contiguous. torch's host convolutions keep or drop channels-last(-3d) by their own
// heuristics (slow_conv3d against oneDNN), so the results are laid out here.
at::Tensor to_chip_laid_out(const at::Tensor& result, const at::Tensor& input, const at::Tensor& weight) {
  const auto last = at::MemoryFormat::ChannelsLast;
  const bool channels_last = input.dim() == 4 && (input.suggest_memory_format() == last ||
                                                  weight.suggest_memory_format() == last);
  const auto format = channels_last ? last : at::MemoryFormat::Contiguous;
  return result.to(result.options().device(input.device()), /*non_blocking=*/false, /*copy=*/false, format);
}

// torch sends a PrivateUse1 convolution and its backward to the `_overrideable` ops, whose only
// CPU kernels raise "not implemented": their CPU step is ATen's convolution on host copies.
// Returns false for every other op.
bool convolution_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string& name = op.schema().operator_name().name;
  const bool forward = name == "aten::convolution_overrideable";
  if (!forward && name != "aten::convolution_backward_overrideable") return false;
  const size_t count = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, count);
  const auto host = [](const at::Tensor& t) { return t.defined() ? t.cpu() : t; };
  if (forward) {
    // (input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
    const at::Tensor input = args[0].toTensor();
    const auto bias = args[2].toOptional<at::Tensor>();
    const at::Tensor out = at::convolution(
        input.cpu(), args[1].toTensor().cpu(), bias ? std::optional<at::Tensor>(host(*bias)) : std::nullopt,
        args[3].toIntVector(), args[4].toIntVector(), args[5].toIntVector(), args[6].toBool(), args[7].toIntVector(),
        args[8].toInt());
    const at::Tensor weight = args[1].toTensor();
    torch::jit::drop(*stack, count);
    torch::jit::push(*stack, to_chip_laid_out(out, input, weight));
    return true;
  }
  // (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask)
  const at::Tensor input = args[1].toTensor();
  const at::Tensor weight = args[2].toTensor();
  const bool transposed = args[6].toBool();
  const int64_t groups = args[8].toInt();
  const auto mask = args[9].to<std::array<bool, 3>>();
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      args[0].toTensor().cpu(), input.cpu(), weight.cpu(), mask[2] ? std::optional<at::IntArrayRef>(bias_sizes)
                                                                  : std::nullopt,
      args[3].toIntVector(), args[4].toIntVector(), args[5].toIntVector(), transposed, args[7].toIntVector(), groups,
      mask);
  torch::jit::drop(*stack, count);
  torch::jit::push(*stack, grad_input.defined() ? to_chip_laid_out(grad_input, input, weight) : grad_input);
  torch::jit::push(*stack, grad_weight.defined() ? to_chip_laid_out(grad_weight, input, weight) : grad_weight);
  torch::jit::push(*stack, grad_bias.defined() ? grad_bias.to(input.device()) : grad_bias);
  return true;
}

}  // namespace

void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (answer_attention_choice_without_a_kernel(op, stack)) return;
  const auto& policy = fallback_policy(member_of_call(op, *stack));
  const std::string key = op_key(op.schema().operator_name());
  const auto route = policy.routes.find(key);
  const bool named = route != policy.routes.end();
  const auto& chain = named ? route->second.chain : policy.default_chain;

  if (!contains(chain, "cpu")) {
    std::ostringstream hint;
    if (contains(chain, "triton")) {
      hint << "no Triton kernel serves it (torch_fl.triton_ops: " << triton_status() << "), and ";
    }
    if (named) {
      hint << policy.spec << ":" << route->second.line << " routes it to " << chain_text(chain)
           << "; give it a kernel or allow the CPU there: `" << key << ": {fallback: [cpu]}`";
    } else {
      hint << "the chip's default chain " << chain_text(chain) << " has no usable step; add under `ops:` in "
           << policy.spec << ":\n  " << key << ": {fallback: [cpu]}";
    }
    TORCH_CHECK_NOT_IMPLEMENTED(false, "aten::", key, " is not supported on chip '", policy.chip,
                                "' (spec ", policy.spec, "): no vendor kernel, and ", hint.str());
  }
  // An op torch implements only for GPUs (e.g. the fused RNN cells) has no CPU kernel: the
  // CPU step cannot run it, and torch's own error would not name the chip or the spec.
  if (!op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)) {
    std::ostringstream where;
    if (named) {
      where << policy.spec << ":" << route->second.line << " routes it to " << chain_text(chain);
    } else {
      where << "it takes the chip's default chain " << chain_text(chain) << " (" << policy.spec << ")";
    }
    TORCH_CHECK_NOT_IMPLEMENTED(false, "aten::", key, " is not supported on chip '", policy.chip, "' (spec ",
                                policy.spec, "): no vendor kernel",
                                contains(chain, "triton") ? ", no Triton kernel (torch_fl.triton_ops: " +
                                                                triton_status() + ")" : std::string(),
                                ", and torch has no CPU kernel for it, so the CPU step cannot run it; ", where.str(),
                                ". Give it a vendor kernel under `ops:` (`", key, ": {kernel: <name>}`)");
  }
  if (strict()) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "strict fallback mode: aten::", key, " would fall back to the CPU on chip '",
                                policy.chip, "' (spec ", policy.spec,
                                "); map it to a vendor kernel, or leave strict mode (torch_fl.strict_fallback / "
                                "TORCH_FL_STRICT_FALLBACK)");
  }
  bool warn = policy.warn == "always";
  if (policy.warn == "once") {
    std::lock_guard<std::mutex> lock(counters_mutex());
    warn = warned_ops().insert(key).second;
  }
  if (warn) {
    TORCH_WARN("aten::", key, " has no kernel on chip '", policy.chip, "' and falls back to the CPU (spec ",
               policy.spec, "); this is slow. torch_fl.fallback_stats() counts such calls.");
  }
  note_fallback(key, FallbackPath::cpu);
  if (convolution_on_host(op, stack)) return;
  ChipRandomOnHost random(op, stack);
  at::native::cpu_fallback(op, stack);
}

void vendor_declined(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& policy = fallback_policy(member_of_call(op, *stack));
  const auto& name = op.schema().operator_name();
  const std::string key = op_key(name);
  const auto route = policy.routes.find(key);
  const auto& chain = route != policy.routes.end() ? route->second.chain : policy.default_chain;
  if (!chain.empty() && chain.front() == "triton") {
    // Looked up per call: the Triton kernels register after the extension loads, and only
    // where Triton is available. A declined dtype is the uncommon case.
    std::string mirror = key;
    std::replace(mirror.begin(), mirror.end(), '.', '_');
    const auto handle =
        c10::Dispatcher::singleton().findOp(
            {"torchfl_" + Driver::instance().description().chip + "_declined::" + mirror, ""});
    if (handle.has_value()) {
      handle->callBoxed(stack);
      return;
    }
  }
  boxed_fallback(op, stack);
}

}  // namespace torch_fl
