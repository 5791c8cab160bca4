// Which kernel serves torch.nn.functional.scaled_dot_product_attention on the chip.
//
// torch's composite asks a DispatchStub (`_fused_sdp_choice_stub`, keyed on the device type),
// not the `aten::_fused_sdp_choice` operator; unregistered, PrivateUse1 always gets the math
// decomposition (a bmm, a materialised mask, softmax, dropout and a bmm, each over the whole
// [batch, heads, queries, keys] score matrix, where CUDA runs one fused kernel). The stub:
//   - a chip whose spec gives `_fused_sdp_choice` a vendor kernel: asks it, per call; its
//     answer's kernels (`_scaled_dot_product_efficient_attention` and its backward, ...) run
//     where the spec routes them. A flash answer is CUDA's own: torch's composite runs the
//     CPU's flash kernel for any other device. Where the vendor answers math (or flash), the
//     chip's overrideable kernel serves the call if it has one and the call fits, else math.
//   - any other chip: torch's overrideable fused attention
//     (`_scaled_dot_product_fused_attention_overrideable`, the entry point torch keeps for
//     out-of-tree devices) where the chip has a kernel for it (the Triton `attention` family,
//     or a vendor's) and the call is within what such a kernel takes (`fused_attention_fits`);
//     else math.
// torch's switches (`torch.nn.attention.sdpa_kernel`, `torch.backends.cuda.enable_math_sdp`)
// apply: a call with every backend the chip has switched off is refused by name, as on CUDA.
#include <torch_fl/fallback.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/dispatch/DispatchKeyExtractor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>

#include <array>
#include <optional>
#include <string>

namespace torch_fl {

namespace {

constexpr int64_t kMath = static_cast<int64_t>(sdp::SDPBackend::math);
constexpr int64_t kOverrideable = static_cast<int64_t>(sdp::SDPBackend::overrideable);
// The largest head size (query/key and value) an overrideable kernel is asked to take: the
// Triton family's blocks hold a whole head in registers (triton_ops/_attention.py).
constexpr int64_t kMaxHeadSize = 256;

// An aten operator whose PrivateUse1 kernel decides the choice. Looked up once (the lookup takes
// the dispatcher's lock and compares names: host time on every attention call); whether the
// chip has a kernel is asked per call, kernels being registered later than the first lookup.
class ChipKernel {
 public:
  explicit ChipKernel(const char* name) : handle_(c10::Dispatcher::singleton().findOp({name, ""})) {}
  bool present() const {
    return handle_.has_value() && handle_->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
  }
  // Whether a call on tensors of these keys (and the thread's included and excluded keys) would
  // reach the chip's kernel through nothing that changes it: no key above the backend but
  // autograd's and ADInplaceOrView (an op returning an int passes them by), and BackendSelect
  // (always included) and autocast where the op has no kernel of its own for them. A trace's
  // tensors (fake, functional) and Python modes keep keys above and need the whole dispatch.
  bool reached_directly(c10::DispatchKeySet keys) const {
    keys = c10::impl::computeDispatchKeySet(keys, c10::DispatchKeySet(c10::DispatchKeySet::FULL));
    keys = keys - c10::autograd_dispatch_keyset_with_ADInplaceOrView;
    for (const auto passed : {c10::DispatchKey::BackendSelect, c10::DispatchKey::AutocastPrivateUse1}) {
      if (!handle_->hasKernelForDispatchKey(passed)) keys = keys - c10::DispatchKeySet(passed);
    }
    return keys.highestPriorityTypeId() == c10::DispatchKey::PrivateUse1;
  }

 private:
  std::optional<c10::OperatorHandle> handle_;
};

const ChipKernel& vendor_choice() {
  static const ChipKernel kernel("aten::_fused_sdp_choice");
  return kernel;
}

const ChipKernel& overrideable_attention() {
  static const ChipKernel kernel("aten::_scaled_dot_product_fused_attention_overrideable");
  return kernel;
}

// A mask dim that broadcasts to `full`: equal, or 1 (sizes known without guarding on them).
bool broadcasts(const c10::SymInt& dim, const c10::SymInt& full) {
  if (TORCH_STATICALLY_KNOWN_TRUE(dim == full)) return true;
  const auto size = dim.maybe_as_int();
  return size.has_value() && *size == 1;
}

// Why a call is outside what a chip's overrideable attention kernel takes, or "" when it is
// within: dense 4-d query, key and value of one floating dtype (float32, float16, bfloat16),
// equal batch sizes, equal head counts or grouped-query heads with enable_gqa, non-empty
// sequences, equal query and key head sizes, head sizes up to kMaxHeadSize, and a mask of at
// most 4 dims that broadcasts to [batch, heads, queries, keys] (any floating dtype; a boolean
// one reaches the kernel as an additive mask). A mask that requires grad is taken.
std::string outside_fused_attention(const sdp::sdp_params& p) {
  const at::Tensor& q = p.query;
  const at::Tensor& k = p.key;
  const at::Tensor& v = p.value;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return "nested tensors";
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return "query, key and value not all 4-d";
  const auto dtype = q.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16) || k.scalar_type() != dtype ||
      v.scalar_type() != dtype) {
    return "dtypes other than one of float32, float16, bfloat16";
  }
  if (q.sym_size(0) != k.sym_size(0) || q.sym_size(0) != v.sym_size(0)) return "unequal batch sizes";
  // Grouped-query heads (fewer key and value heads, a divisor of the query heads) where the call
  // asks for them: torch's composite passes key and value unrepeated, the kernel shares them.
  if (k.sym_size(1) != v.sym_size(1) || k.sym_size(1) == 0) return "unequal key and value head counts";
  if (q.sym_size(1) != k.sym_size(1) && !(p.enable_gqa && q.sym_size(1) % k.sym_size(1) == 0)) {
    return "unequal head counts (grouped-query heads: enable_gqa and query heads a multiple of key heads)";
  }
  if (k.sym_size(2) != v.sym_size(2)) return "key and value of unequal lengths";
  if (q.sym_size(2) == 0 || k.sym_size(2) == 0) return "an empty sequence";
  if (q.sym_size(3) != k.sym_size(3)) return "query and key head sizes unequal";
  if (q.sym_size(3) == 0 || v.sym_size(3) == 0 || q.sym_size(3) > kMaxHeadSize || v.sym_size(3) > kMaxHeadSize) {
    return "a head size outside 1.." + std::to_string(kMaxHeadSize);
  }
  if (p.attn_mask.has_value()) {
    const at::Tensor& mask = *p.attn_mask;
    if (mask.is_nested() || mask.dim() > 4 || (mask.scalar_type() != at::kBool && !mask.is_floating_point())) {
      return "a mask that is not a boolean or floating tensor of at most 4 dims";
    }
    const std::array<c10::SymInt, 4> full{q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    for (int64_t d = 1; d <= mask.dim(); ++d) {
      if (!broadcasts(mask.sym_size(-d), full[4 - d])) return "a mask that does not broadcast to the scores";
    }
  }
  return "";
}

// Why the chip's overrideable fused attention cannot serve a call, or "" when it can.
std::string overrideable_unavailable(const sdp::sdp_params& params) {
  if (!overrideable_attention().present()) {
    return "no kernel for _scaled_dot_product_fused_attention_overrideable";
  }
  std::string why = outside_fused_attention(params);
  if (why.empty() && !at::globalContext().userEnabledOverrideableSDP()) why = "switched off (SDPBackend.OVERRIDEABLE)";
  return why;
}

// The choice of a chip without a vendor kernel for `_fused_sdp_choice`.
int64_t choice_without_a_vendor_kernel(const sdp::sdp_params& params) {
  const auto& context = at::globalContext();
  const std::string why = overrideable_unavailable(params);
  if (why.empty()) return kOverrideable;
  TORCH_CHECK(context.userEnabledMathSDP(), "scaled_dot_product_attention on ", params.query.device(),
              ": no backend left. The math decomposition is switched off (torch.nn.attention.sdpa_kernel or "
              "torch.backends.cuda.enable_math_sdp), and the chip's fused attention does not apply: ", why, ".");
  return kMath;
}

// The vendor's answer. Called from the backend key where nothing above it would change the call:
// as a dispatched op the choice cost 2.1 us more host time than the vendor's own work (the layers
// above the backend, measured on the GPU, bench/ANALYSIS.md), on every attention call.
int64_t ask_vendor_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                          const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                          std::optional<double> scale, bool enable_gqa) {
  c10::DispatchKeySet keys = query.key_set() | key.key_set() | value.key_set();
  if (attn_mask.has_value() && attn_mask->defined()) keys = keys | attn_mask->key_set();
  if (vendor_choice().reached_directly(keys)) {
    return at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), query, key,
                                                    value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  }
  return at::_fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

int64_t chip_attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  if (vendor_choice().present()) {
    const int64_t choice = ask_vendor_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
    // Flash on a device other than CUDA is the CPU's kernel in torch's composite: never the chip's.
    if (choice != kMath && choice != static_cast<int64_t>(sdp::SDPBackend::flash_attention)) return choice;
    // The vendor has no fused kernel for the call (grouped-query heads, say): the chip's
    // overrideable one (the Triton family's) serves it where it can, before the decomposition.
    const bool overrideable =
        overrideable_unavailable({query, key, value, attn_mask, dropout_p, is_causal, enable_gqa}).empty();
    return overrideable ? kOverrideable : kMath;
  }
  return choice_without_a_vendor_kernel({query, key, value, attn_mask, dropout_p, is_causal, enable_gqa});
}

}  // namespace

bool answer_attention_choice_without_a_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const c10::OperatorName choice{"aten::_fused_sdp_choice", ""};
  if (op.schema().operator_name() != choice) return false;
  // aten::_fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
  const size_t count = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, count);
  const auto mask = args[3].toOptional<at::Tensor>();
  const int64_t answer = choice_without_a_vendor_kernel(
      {args[0].toTensor(), args[1].toTensor(), args[2].toTensor(), mask, args[4].toDouble(), args[5].toBool(),
       args[7].toBool()});
  torch::jit::drop(*stack, count);
  torch::jit::push(*stack, answer);
  return true;
}

}  // namespace torch_fl

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_fl::chip_attention_choice)
}  // namespace at::native
